// tests/model: golden comparison metrics (golden/README.md thresholds table).
#include "golden_metrics.h"

#include <algorithm>
#include <cmath>

#include "test_util.h"

namespace dsv4::test {

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> cases;
  const auto root = shared_dir() / "golden";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
    if (!e.is_directory()) continue;
    const auto ck = e.path() / "checkpoint", g = e.path() / "golden";
    if (std::filesystem::is_directory(ck) && std::filesystem::is_directory(g))
      cases.push_back({e.path().filename().string(), ck, g});
  }
  std::sort(cases.begin(), cases.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return cases;
}

namespace {
bool use(const std::vector<bool>& rows, size_t r) { return rows.empty() || rows[r]; }
}  // namespace

double relative_rms(const std::vector<float>& a, const std::vector<float>& b, int64_t width,
                    const std::vector<bool>& rows) {
  double num = 0, den = 0;
  const size_t n = b.size() / static_cast<size_t>(width);
  for (size_t r = 0; r < n; ++r) {
    if (!use(rows, r)) continue;
    for (int64_t j = 0; j < width; ++j) {
      const size_t i = r * static_cast<size_t>(width) + static_cast<size_t>(j);
      num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
      den += static_cast<double>(b[i]) * b[i];
    }
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double max_row_relative(const std::vector<float>& a, const std::vector<float>& b, int64_t width,
                        const std::vector<bool>& rows) {
  double worst = 0;
  const size_t n = b.size() / static_cast<size_t>(width);
  for (size_t r = 0; r < n; ++r) {
    if (!use(rows, r)) continue;
    double md = 0, mb = 0;
    for (int64_t j = 0; j < width; ++j) {
      const size_t i = r * static_cast<size_t>(width) + static_cast<size_t>(j);
      md = std::max(md, std::fabs(static_cast<double>(a[i]) - b[i]));
      mb = std::max(mb, std::fabs(static_cast<double>(b[i])));
    }
    worst = std::max(worst, mb > 0 ? md / mb : md);
  }
  return worst;
}

double rows_identical(const std::vector<float>& a, const std::vector<float>& b, int64_t width) {
  const size_t n = b.size() / static_cast<size_t>(width);
  size_t same = 0;
  for (size_t r = 0; r < n; ++r)
    same += std::equal(a.begin() + static_cast<std::ptrdiff_t>(r * width), a.begin() + static_cast<std::ptrdiff_t>((r + 1) * width),
                       b.begin() + static_cast<std::ptrdiff_t>(r * width));
  return n ? static_cast<double>(same) / static_cast<double>(n) : 1.0;
}

std::vector<bool> rows_set_equal_mask(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t width) {
  const size_t n = b.size() / static_cast<size_t>(width);
  std::vector<bool> eq(n);
  for (size_t r = 0; r < n; ++r) {
    std::set<int32_t> sa, sb;
    for (int64_t j = 0; j < width; ++j) {
      const size_t i = r * static_cast<size_t>(width) + static_cast<size_t>(j);
      if (a[i] >= 0) sa.insert(a[i]);
      if (b[i] >= 0) sb.insert(b[i]);
    }
    eq[r] = sa == sb;
  }
  return eq;
}

double rows_set_differ(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t width) {
  const auto eq = rows_set_equal_mask(a, b, width);
  if (eq.empty()) return 0.0;
  return static_cast<double>(std::count(eq.begin(), eq.end(), false)) / static_cast<double>(eq.size());
}

LogitStats compare_logits(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab, int64_t n_rows,
                          int64_t b_offset) {
  LogitStats s;
  double sum = 0;
  int64_t agree = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* ra = a.data() + r * vocab;
    const float* rb = b.data() + (r + b_offset) * vocab;
    agree += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
    for (int64_t j = 0; j < vocab; ++j) {
      const double d = std::fabs(static_cast<double>(ra[j]) - rb[j]);
      sum += d;
      s.max_abs = std::max(s.max_abs, d);
    }
  }
  s.top1 = n_rows ? static_cast<double>(agree) / static_cast<double>(n_rows) : 1.0;
  s.mean_abs = n_rows ? sum / static_cast<double>(n_rows * vocab) : 0.0;
  return s;
}

}  // namespace dsv4::test
