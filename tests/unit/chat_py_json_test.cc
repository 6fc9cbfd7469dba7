// unit: Python json.dumps(ensure_ascii=False) compatibility of the chat JSON writer. Expected strings
// are what CPython 3 prints for the same input (json.dumps(json.loads(x), ensure_ascii=False)).
#include <gtest/gtest.h>

#include "tokenizer/py_json.h"

namespace dsv4::tok {
namespace {

std::string roundtrip(std::string_view in) {
  auto v = parse_json(in);
  EXPECT_TRUE(v.is_ok()) << in << ": " << v.status().to_string();
  return v.is_ok() ? py_json_dumps(*v) : "";
}

TEST(PyJson, DumpsLikePython) {
  EXPECT_EQ(roundtrip(R"({"b":1,"a":[true,false,null],"c":{}})"), R"({"b": 1, "a": [true, false, null], "c": {}})");
  EXPECT_EQ(roundtrip(R"("caf\u00e9 \u4e2d / \/ \"q\" \\ \n\t\r\b\f \u0001 \u007f")"),
            "\"café 中 / / \\\"q\\\" \\\\ \\n\\t\\r\\b\\f \\u0001 \x7f\"");
  EXPECT_EQ(roundtrip(R"("\ud83d\ude00")"), "\"😀\"");
  EXPECT_EQ(roundtrip("[]"), "[]");
  EXPECT_EQ(roundtrip(R"({"a":1,"a":2,"b":3})"), R"({"a": 2, "b": 3})");  // dict: last value, first position
  EXPECT_EQ(roundtrip("123456789012345678901234567890"),
            "123456789012345678901234567890");  // Python ints are unbounded
  EXPECT_EQ(roundtrip("-0"), "0");
  EXPECT_EQ(roundtrip("[NaN, Infinity, -Infinity]"), "[NaN, Infinity, -Infinity]");
}

TEST(PyJson, FloatReprLikePython) {
  const std::pair<const char*, const char*> cases[] = {
      {"1.0", "1.0"},
      {"2.5", "2.5"},
      {"0.1", "0.1"},
      {"100.0", "100.0"},
      {"1e16", "1e+16"},
      {"1e15", "1000000000000000.0"},
      {"0.0001", "0.0001"},
      {"0.00001", "1e-05"},
      {"-0.0", "-0.0"},
      {"2.5e-7", "2.5e-07"},
      {"1.5e300", "1.5e+300"},
      {"123456789012345678.0", "1.2345678901234568e+17"},
      {"3.14159", "3.14159"},
      {"1E2", "100.0"},
      {"5e-324", "5e-324"},
      {"1e400", "Infinity"},
      {"0.30000000000000004", "0.30000000000000004"},
      {"12345.678", "12345.678"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(roundtrip(in), want) << in;
}

TEST(PyJson, RejectsInvalidJson) {
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", ".5", "\"\\x\"", "\"a\nb\"", "tru", "[1] 2", "{'a': 1}"})
    EXPECT_FALSE(parse_json(bad).is_ok()) << bad;
  std::string deep(10000, '[');
  auto r = parse_json(deep);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().rule(), "json.too_deep");
}

}  // namespace
}  // namespace dsv4::tok
