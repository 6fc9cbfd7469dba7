// unit: malformed sharded checkpoints (model.safetensors.index.json + shards), one per rule
// (docs/reliability.md §A1): each is rejected with its own rule id and a message naming the file.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <regex>
#include <set>

#include "io/safetensors.h"
#include "test_util.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

TensorToWrite tensor(const std::string& name, DType d, uint64_t n) {
  return {name, d, {n}, std::vector<std::byte>(n * dtype_size(d), std::byte{7})};
}

// A valid two-shard checkpoint: s1 holds a (F32[2], 8 B) and b (I8[3], 3 B), s2 holds c (BF16[2], 4 B).
const char* kGoodIndex =
    R"({"metadata":{"total_size":15},"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})";

void write_shards(const fs::path& dir) {
  ASSERT_TRUE(
      write_safetensors(dir / "s1.safetensors", {tensor("a", DType::kF32, 2), tensor("b", DType::kI8, 3)}).is_ok());
  ASSERT_TRUE(write_safetensors(dir / "s2.safetensors", {tensor("c", DType::kBF16, 2)}).is_ok());
}

void write_index(const fs::path& dir, const std::string& text) {
  test::write_text_file(dir / "model.safetensors.index.json", text);
}

struct Case {
  std::string label;
  std::function<void(const fs::path& dir)> make;  // builds the broken checkpoint in `dir` (dir/.. is scratch)
  std::string rule;
  std::string file;    // the file name the message must contain
  std::string tensor;  // the tensor the message must name, or ""
  StatusCode code = StatusCode::kInvalidFile;
};

// The good checkpoint with the index replaced by `text`.
std::function<void(const fs::path&)> with_index(std::string text) {
  return [text](const fs::path& dir) {
    write_shards(dir);
    write_index(dir, text);
  };
}
std::string weight_map(const std::string& body) {
  return R"({"weight_map":{)" + body + "}}";
}

std::vector<Case> cases() {
  const std::string idx = "model.safetensors.index.json";
  std::string deep = R"({"weight_map":{"a":"s1.safetensors"},"x":)";
  for (int i = 0; i < 20; ++i) deep += "[";
  for (int i = 0; i < 20; ++i) deep += "]";
  deep += "}";
  return {
      {"IndexTooLarge",
       [](const fs::path& dir) {
         write_shards(dir);
         write_index(dir, kGoodIndex);
         fs::resize_file(dir / "model.safetensors.index.json", (64ull << 20) + 1);  // sparse: costs no disk
       },
       "index.too_large", idx, ""},
      {"IndexNotJson", with_index(R"({"weight_map":)"), "index.json_syntax", idx, ""},
      {"IndexNestedTooDeep", with_index(deep), "index.json_too_deep", idx, ""},
      {"IndexDuplicateTensorKey", with_index(weight_map(R"("a":"s1.safetensors","a":"s2.safetensors")")),
       "index.duplicate_key", idx, ""},
      {"IndexNotObject", with_index(R"(["s1.safetensors"])"), "index.not_object", idx, ""},
      {"NoWeightMap", with_index(R"({"metadata":{}})"), "index.weight_map_missing", idx, ""},
      {"WeightMapNotObject", with_index(R"({"weight_map":["a"]})"), "index.weight_map_type", idx, ""},
      {"WeightMapEmpty", with_index(R"({"weight_map":{}})"), "index.weight_map_empty", idx, ""},
      {"ShardNotString", with_index(weight_map(R"("a":1)")), "index.shard_type", idx, "a"},
      {"ShardParentPath", with_index(weight_map(R"("a":"../x.safetensors")")), "index.shard_parent", idx, "a"},
      {"ShardDotDot", with_index(weight_map(R"("a":"..")")), "index.shard_parent", idx, "a"},
      {"ShardAbsolutePath", with_index(weight_map(R"("a":"/etc/passwd")")), "index.shard_absolute", idx, "a"},
      {"ShardInSubdirectory", with_index(weight_map(R"("a":"a/b.safetensors")")), "index.shard_subdir", idx, "a"},
      {"ShardBackslash", with_index(weight_map(R"("a":"a\\b.safetensors")")), "index.shard_subdir", idx, "a"},
      {"ShardEmptyName", with_index(weight_map(R"("a":"")")), "index.shard_empty", idx, "a"},
      {"ShardNameTooLong", with_index(weight_map("\"a\":\"" + std::string(256, 's') + "\"")), "index.shard_too_long",
       idx, "a"},
      {"ShardNameControlChar", with_index(weight_map(R"("a":"s1\u0007.safetensors")")), "index.shard_chars", idx, "a"},
      {"MetadataNotObject",
       with_index(R"({"metadata":5,"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})"),
       "index.metadata_type", idx, ""},
      {"TotalSizeNegative",
       with_index(
           R"({"metadata":{"total_size":-15},"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})"),
       "index.total_size_type", idx, ""},
      {"TotalSizeString",
       with_index(
           R"({"metadata":{"total_size":"15"},"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})"),
       "index.total_size_type", idx, ""},
      {"TotalSizeMismatch",
       with_index(
           R"({"metadata":{"total_size":16},"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})"),
       "index.total_size", idx, ""},
      {"SymlinkedShardLeavesDirectory",
       [](const fs::path& dir) {
         write_shards(dir);
         fs::create_directory(dir.parent_path() / "outside");
         fs::rename(dir / "s2.safetensors", dir.parent_path() / "outside/s2.safetensors");
         fs::create_symlink("../outside/s2.safetensors", dir / "s2.safetensors");
         write_index(dir, kGoodIndex);
       },
       "index.shard_escapes", "s2.safetensors", ""},
      {"SymlinkedShardAbsoluteTarget",
       [](const fs::path& dir) {
         write_shards(dir);
         fs::rename(dir / "s2.safetensors", dir.parent_path() / "s2.safetensors");
         fs::create_symlink(dir.parent_path() / "s2.safetensors", dir / "s2.safetensors");
         write_index(dir, kGoodIndex);
       },
       "index.shard_escapes", "s2.safetensors", ""},
      {"ShardFileMissing",
       [](const fs::path& dir) {
         write_shards(dir);
         fs::remove(dir / "s2.safetensors");
         write_index(dir, kGoodIndex);
       },
       "index.shard_missing", idx, "", StatusCode::kNotFound},
      {"TensorListedButMissing",
       with_index(
           R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors","d":"s2.safetensors"}})"),
       "index.tensor_missing", "s2.safetensors", "d"},
      {"TensorPresentButUnlisted", with_index(R"({"weight_map":{"a":"s1.safetensors","c":"s2.safetensors"}})"),
       "index.tensor_unlisted", "s1.safetensors", "b"},
      {"TensorInWrongShard",
       with_index(R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors"}})"),
       "index.tensor_wrong_shard", "s1.safetensors", "b"},
      {"SameTensorInTwoShards",
       [](const fs::path& dir) {
         write_shards(dir);
         ASSERT_TRUE(
             write_safetensors(dir / "s2.safetensors", {tensor("c", DType::kBF16, 2), tensor("a", DType::kF32, 2)})
                 .is_ok());
         write_index(dir, kGoodIndex);
       },
       "checkpoint.duplicate_tensor", "s2.safetensors", "a"},
      {"SameTensorInTwoShardsNoIndex",
       [](const fs::path& dir) {
         write_shards(dir);
         ASSERT_TRUE(write_safetensors(dir / "s0.safetensors", {tensor("c", DType::kBF16, 2)}).is_ok());
       },
       "checkpoint.duplicate_tensor", "s2.safetensors", "c"},
      {"MalformedShardBehindIndex",
       [](const fs::path& dir) {
         write_shards(dir);
         test::write_text_file(dir / "s2.safetensors", "short");
         write_index(dir, kGoodIndex);
       },
       "safetensors.truncated", "s2.safetensors", ""},
  };
}

class IndexMalformed : public ::testing::TestWithParam<Case> {};

TEST_P(IndexMalformed, RejectedWithItsRule) {
  const Case& c = GetParam();
  test::TempDir tmp;
  const fs::path dir = tmp / "model";
  fs::create_directory(dir);
  c.make(dir);
  auto ck = Checkpoint::open(dir);
  ASSERT_FALSE(ck.is_ok()) << "accepted a malformed checkpoint";
  const Status& st = ck.status();
  EXPECT_EQ(st.code(), c.code) << st.to_string();
  EXPECT_EQ(st.rule(), c.rule) << st.to_string();
  EXPECT_NE(st.message().find((dir / c.file).string()), std::string::npos)
      << "message must name " << c.file << ": " << st.message();
  if (!c.tensor.empty()) {
    EXPECT_NE(st.message().find("tensor '" + c.tensor + "'"), std::string::npos) << st.message();
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, IndexMalformed, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.label; });

TEST(IndexValid, GoodCheckpointLoads) {
  test::TempDir tmp;
  write_shards(tmp.path());
  write_index(tmp.path(), kGoodIndex);
  auto ck = Checkpoint::open(tmp.path());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->tensors().size(), 3u);
  EXPECT_EQ(ck->total_bytes(), 15u);
  EXPECT_EQ(ck->shard_paths().at(ck->find("c")->shard).filename(), "s2.safetensors");
}

TEST(IndexValid, SymlinkInsideTheDirectoryIsAccepted) {
  // Only links that leave the model directory are refused.
  test::TempDir tmp;
  write_shards(tmp.path());
  fs::create_directory(tmp / "blobs");
  fs::rename(tmp / "s2.safetensors", tmp / "blobs/real");
  fs::create_symlink("blobs/real", tmp / "s2.safetensors");
  write_index(tmp.path(), kGoodIndex);
  auto ck = Checkpoint::open(tmp.path());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_NE(ck->find("c"), nullptr);
}

TEST(IndexValid, ShardsNotInTheIndexAreIgnored) {
  test::TempDir tmp;
  write_shards(tmp.path());
  ASSERT_TRUE(write_safetensors(tmp / "stray.safetensors", {tensor("z", DType::kI8, 1)}).is_ok());
  write_index(tmp.path(), kGoodIndex);
  auto ck = Checkpoint::open(tmp.path());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->find("z"), nullptr);
}

TEST(IndexMalformedCoverage, EveryRuleInTheSourceHasACase) {
  const std::string src = test::read_text_file(test::source_dir() / "src/io/safetensors.cc");
  ASSERT_FALSE(src.empty());
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.rule);
  // Also covered, in safetensors_test.cc (not-found cases), checkpoint_residency_test.cc (a copy that
  // cannot fit in memory: not a file rule) or by construction from a prefix.
  for (const char* r : {"checkpoint.missing", "checkpoint.no_weights", "checkpoint.copy_no_memory"}) covered.insert(r);
  const std::regex rule_re("\"((index|checkpoint)\\.[a-z_0-9]+)\"");
  int n_rules = 0;
  for (auto it = std::sregex_iterator(src.begin(), src.end(), rule_re); it != std::sregex_iterator(); ++it) {
    const std::string rule = (*it)[1];
    if (rule == "checkpoint.dir") continue;  // the OS failing to resolve an existing directory: not a file rule
    ++n_rules;
    EXPECT_TRUE(covered.count(rule)) << rule << " has no malformed-checkpoint case";
  }
  EXPECT_GE(n_rules, 18);
}

}  // namespace
}  // namespace dsv4
