// tests/unit: the state memory a page budget binds is memory held, not only pages in use. Several pools
// (one per kind of state, each with its own page size) draw from one PageBudget; a workload whose mix of
// kinds shifts — one kind fills the budget and lets go, another kind then fills it — must never leave
// the pools together holding more bytes than the budget. Oracle: the byte arithmetic of the pages
// (KvPoolStats::bytes_held against the budget); negative control: the same workload without a limit,
// where freed pages stay cached and the held total is twice what the limit would allow.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "model/kv_pages.h"

namespace dsv4 {
namespace {

constexpr KvRowLayout kRow{128, 64};  // 128-dim rows, 64 of them rope (FP8: core/kv_row.h layout)
constexpr int32_t kPageRows = 4;

struct Workload {
  int64_t peak_held = 0;       // the most bytes both pools held together at any point
  int64_t pages_per_kind = 0;  // pages each kind took at its turn
};

// Kind A ("window", FP8 rows) fills `fill_bytes`, releases everything; kind B ("partial", fp32 rows: a
// different page size) then fills the same bytes. Tables are grown row by row, as the model does.
Workload shift_kinds(const std::shared_ptr<PageBudget>& budget, int64_t fill_bytes) {
  auto a = std::make_shared<KvPagePool>(kRow, KvStorage::kFp8, kPageRows, budget);
  auto b = std::make_shared<KvPagePool>(KvRowLayout{kRow.dims, 0}, KvStorage::kF32, kPageRows, budget);
  Workload w;
  const auto held = [&] { return a->stats().bytes_held() + b->stats().bytes_held(); };
  for (const auto& pool : {a, b}) {
    std::vector<KvPageTable> tables;
    const std::vector<float> row(static_cast<size_t>(kRow.dims), 0.25f);
    int64_t pages = 0;
    while ((pages + 1) * pool->page_bytes() <= fill_bytes) {  // one table per page: every append takes one
      tables.emplace_back(pool);
      EXPECT_EQ(tables.back().pages_needed(kPageRows), 1);
      for (int32_t r = 0; r < kPageRows; ++r) tables.back().append(row);
      ++pages;
      w.peak_held = std::max(w.peak_held, held());
    }
    w.pages_per_kind = std::max(w.pages_per_kind, pages);
    tables.clear();  // this kind's sequences end: every page goes back
    EXPECT_EQ(pool->stats().pages_in_use, 0);
    w.peak_held = std::max(w.peak_held, held());
  }
  EXPECT_EQ(budget->bytes_in_use(), 0);
  return w;
}

TEST(RuntimePagesHeld, ShiftingKindsNeverHoldMoreThanTheBudget) {
  // Room for 6 pages of the larger kind: both kinds fill most of it in turn.
  const int64_t fp32_page = int64_t{kRow.dims} * 4 * kPageRows;
  const int64_t limit = 6 * fp32_page;
  auto budget = std::make_shared<PageBudget>(limit);
  const Workload w = shift_kinds(budget, limit);
  EXPECT_GE(w.pages_per_kind, 6);
  EXPECT_GT(w.peak_held, limit / 2) << "the workload must fill the budget to test it";
  EXPECT_LE(w.peak_held, limit);
}

TEST(RuntimePagesHeld, NegativeControlUnlimitedPoolsKeepFreedPages) {
  // Without a limit the same workload's freed pages stay cached for reuse: the held total is what both
  // kinds took, more than the limit the bounded run kept to. This is the workload's teeth.
  const int64_t fp32_page = int64_t{kRow.dims} * 4 * kPageRows;
  const int64_t limit = 6 * fp32_page;
  const Workload w = shift_kinds(std::make_shared<PageBudget>(0), limit);
  EXPECT_GT(w.peak_held, limit);
}

}  // namespace
}  // namespace dsv4
