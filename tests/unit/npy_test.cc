// unit: .npy reading and writing: round trips, files built byte by byte as numpy lays them out, and one
// malformed file per rule. A2: a header claiming more data than the file holds is rejected before any
// buffer is sized from it (under ASan, allocating the claimed terabytes would abort the test).
#include "io/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>

#include "test_util.h"

namespace dsv4 {
namespace {

// A version-1 .npy: magic, u16 header length, the dict padded with spaces and '\n' to 64 bytes, data.
std::string npy_v1(const std::string& dict, const std::string& data, int pad_to = 64) {
  std::string h = dict;
  while ((10 + h.size() + 1) % pad_to != 0) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  const uint16_t n = static_cast<uint16_t>(h.size());
  out += static_cast<char>(n & 0xFF);
  out += static_cast<char>(n >> 8);
  return out + h + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

Result<NpyArray> parse(const std::string& bytes) {
  return parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size())), "golden/x.npy");
}

TEST(Npy, HandBuiltFloatArrayParses) {
  auto a = parse(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", floats({1, -2, 3.5f, 0})));
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(a->descr, "<f4");
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(a->to_f32(), (std::vector<float>{1, -2, 3.5f, 0}));
  EXPECT_EQ(a->to_i64(), (std::vector<int64_t>{1, -2, 3, 0}));
}

TEST(Npy, FloatToIntegerConversionSaturates) {
  // Regression (npy fuzz target): out-of-range floats and NaN converted to int64 were undefined casts.
  const float big = 1e28f, nan = std::nanf("");
  auto a = parse(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }",
                        floats({big, -big, nan, -7.9f, 9.2233715e18f})));
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(a->to_i64(), (std::vector<int64_t>{INT64_MAX, INT64_MIN, 0, -7, 9223371487098961920}));
  std::string d(16, '\0');
  const double v[2] = {-1e300, 9223372036854775807.0};
  std::memcpy(d.data(), v, 16);
  auto b = parse(npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", d));
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->to_i64(), (std::vector<int64_t>{INT64_MIN, INT64_MAX}));
}

TEST(Npy, ScalarOneDimAndEmptyShapes) {
  auto scalar =
      parse(npy_v1("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", std::string("\x05\0\0\0\0\0\0\0", 8)));
  ASSERT_TRUE(scalar.is_ok()) << scalar.status().to_string();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->to_i64(), (std::vector<int64_t>{5}));
  auto one = parse(npy_v1("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", "\x01\x02\xff"));
  ASSERT_TRUE(one.is_ok()) << one.status().to_string();
  EXPECT_EQ(one->to_i64(), (std::vector<int64_t>{1, 2, 255}));
  auto empty = parse(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 7), }", ""));
  ASSERT_TRUE(empty.is_ok()) << empty.status().to_string();
  EXPECT_EQ(empty->n_elements(), 0u);
}

TEST(Npy, Version2HeaderParses) {
  std::string h = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  while ((12 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string f = std::string("\x93NUMPY\x02\x00", 8);
  const uint32_t n = static_cast<uint32_t>(h.size());
  f.append(reinterpret_cast<const char*>(&n), 4);
  f += h;
  const int32_t v[2] = {-7, 9};
  f.append(reinterpret_cast<const char*>(v), 8);
  auto a = parse(f);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(a->to_i64(), (std::vector<int64_t>{-7, 9}));
}

TEST(Npy, WriteThenReadRoundTrips) {
  test::TempDir dir;
  const std::vector<float> f = {1.5f, -0.0f, 3e-8f, 65504.0f, -1e30f, 7.0f};
  ASSERT_TRUE(write_npy_f32(dir / "f.npy", {2, 3}, f.data()).is_ok());
  auto a = read_npy(dir / "f.npy");
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{2, 3}));
  ASSERT_EQ(a->bytes.size(), f.size() * 4);
  EXPECT_EQ(std::memcmp(a->bytes.data(), f.data(), a->bytes.size()), 0);
  const std::vector<int32_t> i = {0, -1, 2147483647};
  ASSERT_TRUE(write_npy_i32(dir / "i.npy", {3}, i.data()).is_ok());
  auto b = read_npy(dir / "i.npy");
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_EQ(b->descr, "<i4");
  EXPECT_EQ(b->to_i64(), (std::vector<int64_t>{0, -1, 2147483647}));
  // numpy's layout: the data starts on a 64-byte boundary.
  EXPECT_EQ((std::filesystem::file_size(dir / "i.npy") - 12) % 64, 0u);
}

struct Case {
  std::string label;
  std::string bytes;
  std::string rule;
};

std::vector<Case> cases() {
  const std::string d = "'descr': '<f4', 'fortran_order': False, ";
  std::string v1_huge_len = std::string("\x93NUMPY\x02\x00", 8) + std::string("\x01\x00\x20\x00", 4) + "{}";
  return {
      {"NotNpy", "hello world, not numpy", "npy.magic"},
      {"ShorterThanPrefix", std::string("\x93NUMPY\x01", 7), "npy.magic"},
      {"UnknownVersion", std::string("\x93NUMPY\x07\x00\x02\x00{}", 12), "npy.version"},
      {"V2LengthCutOff", std::string("\x93NUMPY\x02\x00\x10\x00", 10), "npy.truncated"},
      {"HeaderLongerThanFile", std::string("\x93NUMPY\x01\x00\xff\x00{}", 12), "npy.truncated"},
      {"HeaderAbove1MiB", v1_huge_len, "npy.header_too_large"},
      {"HeaderNotADict", npy_v1("descr <f4", ""), "npy.header_syntax"},
      {"HeaderUnknownKey", npy_v1("{" + d + "'shape': (1,), 'x': 1}", floats({1})), "npy.header_syntax"},
      {"HeaderMissingShape", npy_v1("{" + d + "}", floats({1})), "npy.header_syntax"},
      {"ShapeNegative", npy_v1("{" + d + "'shape': (-1,), }", floats({1})), "npy.header_syntax"},
      {"ShapeNotInteger", npy_v1("{" + d + "'shape': (abc,), }", floats({1})), "npy.header_syntax"},
      {"ShapeBeyondU64", npy_v1("{" + d + "'shape': (99999999999999999999,), }", floats({1})), "npy.header_syntax"},
      {"RepeatedKey", npy_v1("{" + d + "'shape': (1,), 'shape': (1,)}", floats({1})), "npy.header_syntax"},
      {"FortranOrder", npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", floats({1})), "npy.order"},
      {"BigEndian", npy_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", floats({1})), "npy.descr"},
      {"ComplexDtype", npy_v1("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", floats({1, 2})),
       "npy.descr"},
      {"DescrWithSuffix", npy_v1("{'descr': '<f4x', 'fortran_order': False, 'shape': (1,), }", floats({1})),
       "npy.descr"},
      {"SizeOverflows", npy_v1("{" + d + "'shape': (4294967296, 4294967296), }", floats({1})), "npy.size_overflow"},
      {"DataShorterThanShape", npy_v1("{" + d + "'shape': (3,), }", floats({1, 2})), "npy.truncated_data"},
      {"HugeShapeTinyFile", npy_v1("{" + d + "'shape': (1099511627776,), }", floats({1})), "npy.truncated_data"},
      {"TrailingBytes", npy_v1("{" + d + "'shape': (1,), }", floats({1, 2})), "npy.trailing_bytes"},
  };
}

class NpyMalformed : public ::testing::TestWithParam<Case> {};

TEST_P(NpyMalformed, RejectedWithItsRule) {
  const Case& c = GetParam();
  test::TempDir dir;
  const auto path = dir / "bad.npy";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(c.bytes.data(), static_cast<std::streamsize>(c.bytes.size()));
  }
  auto r = read_npy(path);
  ASSERT_FALSE(r.is_ok()) << "accepted a malformed .npy";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidFile) << r.status().to_string();
  EXPECT_EQ(r.status().rule(), c.rule) << r.status().to_string();
  EXPECT_NE(r.status().message().find(path.string()), std::string::npos) << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(Rules, NpyMalformed, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.label; });

TEST(Npy, MissingFileIsNotFound) {
  test::TempDir dir;
  auto r = read_npy(dir / "none.npy");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().rule(), "npy.missing");
}

TEST(NpyMalformedCoverage, EveryRuleInTheSourceHasACase) {
  const std::string src = test::read_text_file(test::source_dir() / "src/io/npy.cc");
  std::set<std::string> covered = {"npy.missing"};
  for (const Case& c : cases()) covered.insert(c.rule);
  const std::regex rule_re("\"(npy\\.[a-z_0-9]+)\"");
  int n = 0;
  for (auto it = std::sregex_iterator(src.begin(), src.end(), rule_re); it != std::sregex_iterator(); ++it) {
    const std::string rule = (*it)[1];
    if (rule.starts_with("npy.write")) continue;
    ++n;
    EXPECT_TRUE(covered.count(rule)) << rule;
  }
  EXPECT_GE(n, 10);
}

}  // namespace
}  // namespace dsv4
