// unit: valid safetensors files and checkpoints load exactly: single file, sharded with an index, a
// directory without an index, zero-size tensors, metadata, and a write-then-read round trip of every dtype.
// Files are built byte by byte here where the layout itself is what is tested.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "core/dtype.h"
#include "test_util.h"

namespace dsv4 {
namespace {

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFF);
  return out;
}

std::string as_string(std::span<const std::byte> s) {
  return {reinterpret_cast<const char*>(s.data()), s.size()};
}

TEST(Safetensors, HandBuiltFileParsesToTheBytesItDescribes) {
  // Header written by hand (not by our writer); tensors deliberately listed out of data order.
  const std::string header = R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[4,16]},)"
                             R"("s":{"dtype":"F8_E8M0","shape":[4],"data_offsets":[0,4]},)"
                             R"("__metadata__":{"format":"pt"}})";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header;
  const std::string data = "SSSSwwwwwwwwwwww";
  file += data;
  test::TempDir dir;
  write_bytes(dir / "m.safetensors", file);
  auto f = SafetensorsFile::open(dir / "m.safetensors");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo& s = f->tensors()[0];  // sorted by name
  const TensorInfo& w = f->tensors()[1];
  EXPECT_EQ(s.name, "s");
  EXPECT_EQ(s.dtype, DType::kF8E8M0);
  EXPECT_EQ(s.shape, (std::vector<uint64_t>{4}));
  EXPECT_EQ(as_string(s.data), "SSSS");
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.dtype, DType::kBF16);
  EXPECT_EQ(w.n_elements, 6u);
  EXPECT_EQ(as_string(w.data), "wwwwwwwwwwww");
  EXPECT_EQ(f->metadata().at("format"), "pt");
  // The mapping is the file: the span points just past the header.
  auto again = SafetensorsFile::parse(std::as_bytes(std::span(file.data(), file.size())), "mem");
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->at(0).data.data(), reinterpret_cast<const std::byte*>(file.data()) + 8 + header.size());
}

TEST(Safetensors, EmptyHeaderIsAValidEmptyFile) {
  std::string file(8, '\0');
  file[0] = 2;
  file += "{}";
  auto r = SafetensorsFile::parse(std::as_bytes(std::span(file.data(), file.size())), "mem");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->empty());
}

TEST(Safetensors, ZeroSizeTensorsAreAccepted) {
  // Zero-element tensors take no bytes; several may sit at the same offset, before or after data.
  const std::string header = R"({"e0":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                             R"("e1":{"dtype":"I64","shape":[3,0,5],"data_offsets":[0,0]},)"
                             R"("x":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},)"
                             R"("e2":{"dtype":"BF16","shape":[0],"data_offsets":[4,4]},)"
                             R"("scalar":{"dtype":"I8","shape":[],"data_offsets":[4,5]}})";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header + "abcde";
  auto r = SafetensorsFile::parse(std::as_bytes(std::span(file.data(), file.size())), "mem");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 5u);
  for (const auto& t : *r) {
    if (t.name.starts_with("e")) {
      EXPECT_EQ(t.n_elements, 0u) << t.name;
      EXPECT_TRUE(t.data.empty()) << t.name;
    }
  }
  const auto scalar = std::find_if(r->begin(), r->end(), [](const TensorInfo& t) { return t.name == "scalar"; });
  EXPECT_EQ(scalar->n_elements, 1u);  // the empty product
  EXPECT_EQ(as_string(scalar->data), "e");
}

TEST(Safetensors, WriteThenReadRoundTripsEveryDtype) {
  const DType all[] = {DType::kBF16,   DType::kF16, DType::kF32, DType::kF8E4M3,
                       DType::kF8E8M0, DType::kI8,  DType::kI32, DType::kI64};
  std::vector<TensorToWrite> ts;
  uint32_t seed = 1;
  for (DType d : all) {
    TensorToWrite t;
    t.name = "t." + std::string(dtype_name(d));
    t.dtype = d;
    t.shape = {3, 5};
    t.bytes = random_bytes(15 * dtype_size(d), seed++);
    ts.push_back(std::move(t));
  }
  test::TempDir dir;
  ASSERT_TRUE(write_safetensors(dir / "all.safetensors", ts, {{"k", "v"}, {"empty", ""}}).is_ok());
  auto f = SafetensorsFile::open(dir / "all.safetensors");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_EQ(f->tensors().size(), ts.size());
  for (const auto& want : ts) {
    auto it = std::find_if(f->tensors().begin(), f->tensors().end(),
                           [&](const TensorInfo& t) { return t.name == want.name; });
    ASSERT_NE(it, f->tensors().end()) << want.name;
    EXPECT_EQ(it->dtype, want.dtype);
    EXPECT_EQ(dtype_name(it->dtype), want.name.substr(2));
    EXPECT_EQ(it->shape, want.shape);
    EXPECT_EQ(it->n_elements, 15u);
    ASSERT_EQ(it->data.size(), want.bytes.size());
    EXPECT_EQ(std::memcmp(it->data.data(), want.bytes.data(), want.bytes.size()), 0) << want.name;
  }
  EXPECT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata().at("k"), "v");
  EXPECT_EQ(f->metadata().at("empty"), "");
}

std::vector<TensorToWrite> some_tensors(int n) {
  std::vector<TensorToWrite> ts;
  for (int i = 0; i < n; ++i) {
    TensorToWrite t;
    t.name = "layers." + std::to_string(i) + ".w";
    t.dtype = i % 2 ? DType::kBF16 : DType::kF32;
    t.shape = {static_cast<uint64_t>(i + 1), 4};
    t.bytes = random_bytes((i + 1) * 4 * dtype_size(t.dtype), 100 + i);
    ts.push_back(std::move(t));
  }
  return ts;
}

TEST(Checkpoint, ShardedDirectoryWithIndex) {
  test::TempDir dir;
  const auto ts = some_tensors(7);
  ASSERT_TRUE(write_sharded_checkpoint(dir.path(), ts, 3).is_ok());
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  // The index, read independently: the shards it names are the ones loaded.
  const auto index = nlohmann::json::parse(test::read_text_file(dir / "model.safetensors.index.json"));
  std::set<std::string> listed;
  for (const auto& [name, shard] : index["weight_map"].items()) listed.insert(shard.get<std::string>());
  EXPECT_GE(listed.size(), 2u);
  EXPECT_EQ(ck->shard_paths().size(), listed.size());
  ASSERT_EQ(ck->tensors().size(), ts.size());
  uint64_t total = 0;
  for (const auto& want : ts) {
    const TensorInfo* t = ck->find(want.name);
    ASSERT_NE(t, nullptr) << want.name;
    ASSERT_EQ(t->data.size(), want.bytes.size());
    EXPECT_EQ(std::memcmp(t->data.data(), want.bytes.data(), want.bytes.size()), 0);
    EXPECT_EQ(ck->shard_paths().at(t->shard).filename().string(), index["weight_map"][want.name].get<std::string>());
    total += want.bytes.size();
  }
  EXPECT_EQ(ck->total_bytes(), total);
  EXPECT_TRUE(std::is_sorted(ck->tensors().begin(), ck->tensors().end(),
                             [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; }));
}

TEST(Checkpoint, DirectoryWithoutIndexLoadsEverySafetensorsFile) {
  test::TempDir dir;
  const auto ts = some_tensors(4);
  ASSERT_TRUE(write_safetensors(dir / "b.safetensors", {ts[0], ts[1]}).is_ok());
  ASSERT_TRUE(write_safetensors(dir / "a.safetensors", {ts[2], ts[3]}).is_ok());
  test::write_text_file(dir / "notes.txt", "not a weight file");
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  ASSERT_EQ(ck->shard_paths().size(), 2u);
  EXPECT_EQ(ck->shard_paths()[0].filename(), "a.safetensors");
  EXPECT_EQ(ck->tensors().size(), 4u);
  EXPECT_EQ(ck->find(ts[0].name)->shard, 1);
  EXPECT_EQ(ck->find(ts[2].name)->shard, 0);
}

TEST(Checkpoint, SingleFileByPath) {
  test::TempDir dir;
  const auto ts = some_tensors(2);
  ASSERT_TRUE(write_safetensors(dir / "model.safetensors", ts).is_ok());
  auto ck = Checkpoint::open(dir / "model.safetensors");
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->tensors().size(), 2u);
  EXPECT_NE(ck->find(ts[1].name), nullptr);
}

TEST(Checkpoint, MissingPathIsNotFound) {
  test::TempDir dir;
  auto ck = Checkpoint::open(dir / "nope");
  ASSERT_FALSE(ck.is_ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ck.status().rule(), "checkpoint.missing");
  EXPECT_NE(ck.status().message().find((dir / "nope").string()), std::string::npos);
  auto empty = Checkpoint::open(dir.path());
  ASSERT_FALSE(empty.is_ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(empty.status().rule(), "checkpoint.no_weights");
}

}  // namespace
}  // namespace dsv4
