// tests/model: the comparison metrics of golden/README.md's thresholds table, and discovery of golden
// cases (every directory under ../shared/golden with checkpoint/ and golden/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace dsv4::test {

struct GoldenCase {
  std::string name;
  std::filesystem::path checkpoint, golden;
};
std::vector<GoldenCase> golden_cases();

// ‖a−b‖₂ / ‖b‖₂ over the rows selected by `rows` (all rows when empty). Row length `width`.
double relative_rms(const std::vector<float>& a, const std::vector<float>& b, int64_t width,
                    const std::vector<bool>& rows = {});
// max over rows of max|a−b| / max|b| within the row.
double max_row_relative(const std::vector<float>& a, const std::vector<float>& b, int64_t width,
                        const std::vector<bool>& rows = {});
// Fraction of rows whose elements are all bit-identical.
double rows_identical(const std::vector<float>& a, const std::vector<float>& b, int64_t width);
// Fraction of rows whose sets of non-negative values differ.
double rows_set_differ(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t width);
std::vector<bool> rows_set_equal_mask(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t width);

struct LogitStats {
  double top1 = 0;      // fraction of rows with the same argmax
  double mean_abs = 0;  // mean |Δlogit|
  double max_abs = 0;   // max |Δlogit|
};
// Compares the first n_rows rows of a against rows b_offset.. of b (row length vocab).
LogitStats compare_logits(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab, int64_t n_rows,
                          int64_t b_offset = 0);

}  // namespace dsv4::test
