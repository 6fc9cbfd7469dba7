// unit: the --weights policy (io/residency_policy.h) as a pure function of the host's facts — the 3/4
// margin line on both sides, MemAvailable unknown, a checkpoint larger than RAM, the lock limit at and
// below the checkpoint, an empty checkpoint — and the reason it gives. The oracle is the policy as
// documented in the header, written out case by case.
#include <gtest/gtest.h>

#include <limits>

#include "io/residency_policy.h"

namespace dsv4 {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

ResidencyFacts facts(uint64_t bytes, std::optional<uint64_t> avail, uint64_t lockable = 0, bool reclaim = false) {
  return {bytes, avail, lockable, reclaim};
}

ResidencyDecision decide_ok(Residency r, bool populate, const ResidencyFacts& f) {
  auto d = decide_residency({r, populate, 0.75}, f);
  EXPECT_TRUE(d.is_ok()) << d.status().to_string();
  return d.is_ok() ? *d : ResidencyDecision{};
}

bool says(const ResidencyDecision& d, const char* text) { return d.reason.find(text) != std::string::npos; }

TEST(ResidencyPolicy, AutoCopiesWhenItFitsWithAQuarterSpare) {
  // 1000 MiB against 1334 MiB available is within 3/4 (1000.5); against 1333 MiB it is not (999.75).
  const auto in = decide_ok(Residency::kAuto, true, facts(1000 * kMiB, 1334 * kMiB));
  EXPECT_EQ(in.resolved, Residency::kCopy);
  EXPECT_FALSE(in.populate);
  EXPECT_FALSE(in.lock);
  EXPECT_TRUE(says(in, "auto: copy")) << in.reason;
  EXPECT_TRUE(says(in, "0.98 GiB of weights, 1.30 GiB MemAvailable")) << in.reason;

  const auto out = decide_ok(Residency::kAuto, true, facts(1000 * kMiB, 1333 * kMiB));
  EXPECT_EQ(out.resolved, Residency::kMmap);
  EXPECT_TRUE(out.populate);  // fits in MemAvailable, only not with the margin
  EXPECT_FALSE(out.lock);     // never locked by auto: reclaim stays possible when memory is this tight
  EXPECT_TRUE(says(out, "populated mmap")) << out.reason;

  // Exactly on the line counts as fitting.
  EXPECT_EQ(decide_ok(Residency::kAuto, true, facts(750 * kMiB, 1000 * kMiB)).resolved, Residency::kCopy);
  EXPECT_EQ(decide_ok(Residency::kAuto, true, facts(750 * kMiB + 1, 1000 * kMiB)).resolved, Residency::kMmap);
  // The page cache being reclaimed proactively is named in the reason; it does not change the choice.
  const auto damon = decide_ok(Residency::kAuto, true, facts(1000 * kMiB, 2000 * kMiB, 0, true));
  EXPECT_EQ(damon.resolved, Residency::kCopy);
  EXPECT_TRUE(says(damon, "DAMON")) << damon.reason;
  EXPECT_FALSE(says(in, "DAMON")) << in.reason;
}

TEST(ResidencyPolicy, AutoMapsWhatDoesNotFit) {
  // Larger than MemAvailable: a lazy mapping, never populated (that would evict its own pages).
  const auto big = decide_ok(Residency::kAuto, true, facts(2000 * kMiB, 1000 * kMiB, kUnlimited));
  EXPECT_EQ(big.resolved, Residency::kMmap);
  EXPECT_FALSE(big.populate);
  EXPECT_FALSE(big.lock);
  EXPECT_TRUE(says(big, "larger than available memory")) << big.reason;
  // Exactly MemAvailable still fits (populated); one byte more does not.
  EXPECT_TRUE(decide_ok(Residency::kAuto, true, facts(1000 * kMiB, 1000 * kMiB)).populate);
  EXPECT_FALSE(decide_ok(Residency::kAuto, true, facts(1000 * kMiB + 1, 1000 * kMiB)).populate);
  // Populating is the caller's call (tools that read only the tensor table leave it off).
  EXPECT_FALSE(decide_ok(Residency::kAuto, false, facts(1000 * kMiB, 1000 * kMiB)).populate);
  // No MemAvailable figure: nothing to size a copy against, so the mapping, lazy.
  const auto unknown = decide_ok(Residency::kAuto, true, facts(1 * kMiB, std::nullopt, kUnlimited));
  EXPECT_EQ(unknown.resolved, Residency::kMmap);
  EXPECT_FALSE(unknown.populate);
  EXPECT_TRUE(says(unknown, "MemAvailable unknown")) << unknown.reason;
  // An empty checkpoint fits anything.
  EXPECT_EQ(decide_ok(Residency::kAuto, true, facts(0, 0)).resolved, Residency::kCopy);
}

TEST(ResidencyPolicy, MmapPopulatesAndLocksWhenAllowed) {
  const uint64_t bytes = 1000 * kMiB, avail = 2000 * kMiB;
  const auto locked = decide_ok(Residency::kMmap, true, facts(bytes, avail, bytes));  // limit == size: enough
  EXPECT_EQ(locked.resolved, Residency::kMmap);
  EXPECT_TRUE(locked.populate);
  EXPECT_TRUE(locked.lock);
  EXPECT_TRUE(says(locked, "locked (mlock)")) << locked.reason;

  const auto limited = decide_ok(Residency::kMmap, true, facts(bytes, avail, bytes - 1, true));
  EXPECT_TRUE(limited.populate);
  EXPECT_FALSE(limited.lock);
  EXPECT_TRUE(says(limited, "not locked (RLIMIT_MEMLOCK 0.98 GiB)")) << limited.reason;
  EXPECT_TRUE(says(limited, "DAMON")) << limited.reason;

  // Not asked to populate, or not fitting with margin: lazy, and a lazy mapping is never locked.
  const auto lazy = decide_ok(Residency::kMmap, false, facts(bytes, avail, kUnlimited));
  EXPECT_FALSE(lazy.populate);
  EXPECT_FALSE(lazy.lock);
  const auto tight = decide_ok(Residency::kMmap, true, facts(bytes, 1333 * kMiB, kUnlimited));
  EXPECT_FALSE(tight.populate);
  EXPECT_FALSE(tight.lock);
  EXPECT_TRUE(says(tight, "lazy")) << tight.reason;
  EXPECT_FALSE(decide_ok(Residency::kMmap, true, facts(bytes, std::nullopt, kUnlimited)).populate);
}

TEST(ResidencyPolicy, CopyIsRefusedOnlyAboveMemAvailable) {
  auto refused = decide_residency({Residency::kCopy, true, 0.75}, facts(1000 * kMiB, 999 * kMiB));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().rule(), "checkpoint.copy_no_memory");
  EXPECT_NE(refused.status().message().find("--weights mmap"), std::string::npos);
  // Up to all of MemAvailable when asked explicitly (auto keeps a quarter back), and with no figure.
  const auto all = decide_ok(Residency::kCopy, true, facts(1000 * kMiB, 1000 * kMiB));
  EXPECT_EQ(all.resolved, Residency::kCopy);
  EXPECT_FALSE(all.populate);
  EXPECT_FALSE(all.lock);
  EXPECT_TRUE(says(all, "copy asked")) << all.reason;
  EXPECT_EQ(decide_ok(Residency::kCopy, true, facts(1000 * kMiB, std::nullopt)).resolved, Residency::kCopy);
}

TEST(ResidencyPolicy, MarginIsTheRequestsFraction) {
  // A caller may ask for a different margin: half of MemAvailable.
  auto half = decide_residency({Residency::kAuto, true, 0.5}, facts(600 * kMiB, 1000 * kMiB));
  ASSERT_TRUE(half.is_ok());
  EXPECT_EQ(half->resolved, Residency::kMmap);
  auto more = decide_residency({Residency::kAuto, true, 0.5}, facts(500 * kMiB, 1000 * kMiB));
  ASSERT_TRUE(more.is_ok());
  EXPECT_EQ(more->resolved, Residency::kCopy);
}

}  // namespace
}  // namespace dsv4
