// unit: one malformed .safetensors file per loader rule (docs/reliability.md §A1), each built here byte by
// byte, each rejected with kInvalidFile, its own rule id, and a message naming the file and the tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"

namespace dsv4 {
namespace {

// Raw file: u64 little-endian header length, the header text, then `data_bytes` filler bytes.
std::string raw_file(std::string_view header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out += header;
  out.append(data_bytes, '\x5a');
  return out;
}

// A file whose length prefix says `n` whatever follows.
std::string raw_len(uint64_t n, std::string_view rest) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  out += rest;
  return out;
}

// One header entry: "name":{"dtype":..,"shape":..,"data_offsets":..}; the parts are raw JSON text.
std::string entry(std::string_view name, std::string_view dtype, std::string_view shape, std::string_view offsets) {
  return "\"" + std::string(name) + "\":{\"dtype\":\"" + std::string(dtype) + "\",\"shape\":" + std::string(shape) +
         ",\"data_offsets\":" + std::string(offsets) + "}";
}
std::string obj(const std::string& body) {
  return "{" + body + "}";
}

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Case {
  std::string label;
  std::string bytes;
  std::string rule;
  std::string tensor;  // the tensor the message must name ("" when the rule is about the whole file)
};

std::vector<Case> cases() {
  const std::string ok_a = entry("a", "F32", "[2]", "[0,8]");
  std::string deep;
  for (int i = 0; i < 17; ++i) deep += "[";
  for (int i = 0; i < 17; ++i) deep += "]";
  std::string long_name(1025, 'n');
  return {
      {"FileShorterThanLengthPrefix", std::string("\x08\x00\x00\x00\x00", 5), "safetensors.truncated", ""},
      {"EmptyFile", "", "safetensors.truncated", ""},
      {"HeaderLongerThan100MB", raw_len((100ull << 20) + 1, "{}"), "safetensors.header_too_large", ""},
      {"HeaderLengthMaxU64", raw_len(~0ull, "{}"), "safetensors.header_too_large", ""},
      {"HeaderLongerThanFile", raw_len(1000, "{\"a\":1}"), "safetensors.header_past_eof", ""},
      {"HeaderLengthZero", raw_len(0, ""), "safetensors.header_empty", ""},
      {"HeaderNotJson", raw_file("{\"a\":", 0), "safetensors.json_syntax", ""},
      {"HeaderInvalidUtf8", raw_file("{\"\xff\xfe\":{}}", 0), "safetensors.json_syntax", ""},
      {"HeaderTrailingGarbage", raw_file("{} x", 0), "safetensors.json_syntax", ""},
      {"HeaderNotObject", raw_file("[1,2]", 0), "safetensors.header_not_object", ""},
      {"HeaderNestedTooDeep", raw_file(obj("\"__metadata__\":" + deep), 0), "safetensors.json_too_deep", ""},
      {"DuplicateTensorName", raw_file(obj(ok_a + "," + entry("a", "F32", "[2]", "[8,16]")), 16),
       "safetensors.duplicate_tensor", "a"},
      {"DuplicateFieldInEntry",
       raw_file(obj("\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8),
       "safetensors.duplicate_key", ""},
      {"MetadataNotObject", raw_file(obj("\"__metadata__\":\"x\""), 0), "safetensors.metadata_not_object", ""},
      {"MetadataValueNotString", raw_file(obj("\"__metadata__\":{\"k\":1}"), 0), "safetensors.metadata_value", ""},
      {"EmptyTensorName", raw_file(obj(entry("", "F32", "[2]", "[0,8]")), 8), "safetensors.name_empty", ""},
      {"TensorNameTooLong", raw_file(obj(entry(long_name, "F32", "[2]", "[0,8]")), 8), "safetensors.name_too_long", ""},
      {"TensorNameControlChar", raw_file(obj(entry("a\\u0001b", "F32", "[2]", "[0,8]")), 8), "safetensors.name_chars",
       ""},
      {"EntryNotObject", raw_file(obj("\"a\":[1]"), 0), "safetensors.entry_not_object", "a"},
      {"UnknownEntryField",
       raw_file(obj("\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"scale\":1}"), 8),
       "safetensors.entry_field", "a"},
      {"DtypeMissing", raw_file(obj("\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}"), 8), "safetensors.dtype_missing",
       "a"},
      {"DtypeNotString", raw_file(obj("\"a\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}"), 8),
       "safetensors.dtype_type", "a"},
      {"DtypeUnknown", raw_file(obj(entry("a", "Q4_K", "[2]", "[0,8]")), 8), "safetensors.dtype_unknown", "a"},
      {"DtypeF64Unsupported", raw_file(obj(entry("a", "F64", "[1]", "[0,8]")), 8), "safetensors.dtype_unknown", "a"},
      {"ShapeMissing", raw_file(obj("\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}"), 8),
       "safetensors.shape_missing", "a"},
      {"ShapeNotArray", raw_file(obj(entry("a", "F32", "2", "[0,8]")), 8), "safetensors.shape_type", "a"},
      {"RankAbove8", raw_file(obj(entry("a", "F32", "[1,1,1,1,1,1,1,1,2]", "[0,8]")), 8), "safetensors.rank", "a"},
      {"ShapeNegative", raw_file(obj(entry("a", "F32", "[-2]", "[0,8]")), 8), "safetensors.shape_negative", "a"},
      {"ShapeFloat", raw_file(obj(entry("a", "F32", "[2.5]", "[0,8]")), 8), "safetensors.shape_not_integer", "a"},
      {"ShapeIntegralFloat", raw_file(obj(entry("a", "F32", "[2.0]", "[0,8]")), 8), "safetensors.shape_not_integer",
       "a"},
      {"ShapeString", raw_file(obj(entry("a", "F32", "[\"2\"]", "[0,8]")), 8), "safetensors.shape_not_integer", "a"},
      {"ShapeBeyondU64", raw_file(obj(entry("a", "F32", "[18446744073709551616]", "[0,8]")), 8),
       "safetensors.shape_not_integer", "a"},
      {"OffsetsMissing", raw_file(obj("\"a\":{\"dtype\":\"F32\",\"shape\":[2]}"), 8), "safetensors.offsets_missing",
       "a"},
      {"OffsetsNotArray", raw_file(obj(entry("a", "F32", "[2]", "8")), 8), "safetensors.offsets_type", "a"},
      {"OffsetsOneValue", raw_file(obj(entry("a", "F32", "[2]", "[8]")), 8), "safetensors.offsets_arity", "a"},
      {"OffsetsThreeValues", raw_file(obj(entry("a", "F32", "[2]", "[0,8,8]")), 8), "safetensors.offsets_arity", "a"},
      {"OffsetNegative", raw_file(obj(entry("a", "F32", "[2]", "[-8,0]")), 8), "safetensors.offsets_negative", "a"},
      {"OffsetFloat", raw_file(obj(entry("a", "F32", "[2]", "[0,8.0]")), 8), "safetensors.offsets_not_integer", "a"},
      {"OffsetsBeginAfterEnd", raw_file(obj(entry("a", "F32", "[2]", "[8,0]")), 8), "safetensors.offsets_order", "a"},
      {"SizeProductOverflows", raw_file(obj(entry("a", "F32", "[4294967296,4294967296]", "[0,8]")), 8),
       "safetensors.size_overflow", "a"},
      {"SizeTimesDtypeOverflows", raw_file(obj(entry("a", "F32", "[4611686018427387904]", "[0,8]")), 8),
       "safetensors.size_overflow", "a"},
      {"SizeOverflowBehindZeroDim", raw_file(obj(entry("a", "F32", "[0,4294967296,4294967296]", "[0,0]")), 0),
       "safetensors.size_overflow", "a"},
      {"BytesNotShapeTimesDtype", raw_file(obj(entry("a", "F32", "[3]", "[0,8]")), 8), "safetensors.byte_count", "a"},
      {"OffsetsPastEof", raw_file(obj(entry("a", "F32", "[4]", "[0,16]")), 8), "safetensors.offsets_past_eof", "a"},
      {"OffsetsPastEofHuge", raw_file(obj(entry("a", "I8", "[8]", "[18446744073709551600,18446744073709551608]")), 8),
       "safetensors.offsets_past_eof", "a"},
      {"OffsetsOverlap", raw_file(obj(ok_a + "," + entry("b", "F32", "[2]", "[4,12]")), 12),
       "safetensors.offsets_overlap", "b"},
      {"OffsetsGap", raw_file(obj(entry("a", "F32", "[1]", "[0,4]") + "," + entry("b", "F32", "[1]", "[8,12]")), 12),
       "safetensors.offsets_gap", "b"},
      {"GapBeforeFirstTensor", raw_file(obj(entry("a", "F32", "[1]", "[4,8]")), 8), "safetensors.offsets_gap", "a"},
      {"TrailingBytes", raw_file(obj(ok_a), 12), "safetensors.trailing_bytes", ""},
      {"DataWithoutTensors", raw_file("{}", 4), "safetensors.trailing_bytes", ""},
  };
}

class SafetensorsMalformed : public ::testing::TestWithParam<Case> {};

TEST_P(SafetensorsMalformed, RejectedWithItsRule) {
  const Case& c = GetParam();
  test::TempDir dir;
  const auto path = dir / "bad.safetensors";
  write_bytes(path, c.bytes);
  auto check = [&](const Status& st, const std::string& via) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidFile) << via << ": " << st.to_string();
    EXPECT_EQ(st.rule(), c.rule) << via << ": " << st.to_string();
    EXPECT_NE(st.message().find(path.string()), std::string::npos)
        << via << ": message must name the file: " << st.message();
    if (!c.tensor.empty()) {
      EXPECT_NE(st.message().find("tensor '" + c.tensor + "'"), std::string::npos) << via << ": " << st.message();
    }
  };
  auto f = SafetensorsFile::open(path);
  ASSERT_FALSE(f.is_ok()) << "accepted a malformed file";
  check(f.status(), "SafetensorsFile::open");
  // The checkpoint loader gives the same verdict, for the file named directly and for its directory.
  auto ck = Checkpoint::open(path);
  ASSERT_FALSE(ck.is_ok());
  check(ck.status(), "Checkpoint::open(file)");
  auto ck_dir = Checkpoint::open(dir.path());
  ASSERT_FALSE(ck_dir.is_ok());
  EXPECT_EQ(ck_dir.status().rule(), c.rule);
}

INSTANTIATE_TEST_SUITE_P(Rules, SafetensorsMalformed, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.label; });

// Every rejection rule spelled out in the loader source has at least one case above, so a new rule
// cannot be added without a test.
TEST(SafetensorsMalformedCoverage, EveryRuleInTheSourceHasACase) {
  const std::string src = test::read_text_file(test::source_dir() / "src/io/safetensors.cc");
  ASSERT_FALSE(src.empty());
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.rule);
  const std::regex rule_re("\"(safetensors\\.[a-z_0-9]+)\"");
  int n_rules = 0;
  for (auto it = std::sregex_iterator(src.begin(), src.end(), rule_re); it != std::sregex_iterator(); ++it) {
    const std::string rule = (*it)[1];
    if (rule.starts_with("safetensors.write") || rule == "safetensors.shards" || rule == "safetensors.duplicate_tensor")
      continue;  // writer-side argument errors, and the duplicate rule passed as a parameter (covered above)
    ++n_rules;
    EXPECT_TRUE(covered.count(rule)) << rule << " has no malformed-file case";
  }
  EXPECT_GE(n_rules, 25);
  // Rules built from a prefix at run time.
  for (const char* r : {"safetensors.json_syntax", "safetensors.json_too_deep", "safetensors.duplicate_key",
                        "safetensors.duplicate_tensor"})
    EXPECT_TRUE(covered.count(r)) << r;
}

}  // namespace
}  // namespace dsv4
