// unit: the persistent thread pool — every index visited exactly once, chunks of a fixed length on grain
// multiples whatever the schedule, slots bounded by n_slots and never shared by two running chunks, the
// caller taking over the chunks of a worker that is stuck, nested calls inline, many back-to-back
// dispatches (including ones that catch workers asleep), and "0 threads" sized by the CPUs the caller may use.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/numa.h"

namespace dsv4 {
namespace {

TEST(ThreadPool, VisitsEveryIndexOnceForManyShapes) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.n_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000, 1025}) {
      for (int64_t grain : {1, 3, 16, 128}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << grain;
      }
    }
  }
}

struct Call {
  int64_t begin, end;
  int slot;
  std::thread::id thread;
};

// Every chunk is [c·len, min(n, (c+1)·len)) with len = chunk_grains·grain: the split is a function of
// (n, grain, n_threads) only. Slots stay below n_slots and one slot is always the same thread.
TEST(ThreadPool, ChunksAreFixedGrainMultiplesAndSlotsAreBounded) {
  for (int threads : {2, 3, 7}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 100, 129, 4096, 100000}) {
      for (int64_t grain : {1, 2, 32}) {
        std::mutex mu;
        std::vector<Call> calls;
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int slot) {
          std::lock_guard<std::mutex> lock(mu);
          calls.push_back({b, e, slot, std::this_thread::get_id()});
        });
        const int64_t len = pool.chunk_grains(n, grain) * grain;
        const int slots = pool.n_slots(n, grain);
        std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.begin < b.begin; });
        ASSERT_FALSE(calls.empty());
        const int64_t n_grains = (n + grain - 1) / grain;
        // About kChunksPerThread chunks per thread (fewer only when there are fewer grains).
        EXPECT_EQ(static_cast<int64_t>(calls.size()), (n + len - 1) / len);
        EXPECT_GE(static_cast<int64_t>(calls.size()),
                  std::min<int64_t>(n_grains, int64_t{threads} * ThreadPool::kChunksPerThread) / 2);
        std::vector<std::thread::id> slot_thread(static_cast<size_t>(threads));
        for (size_t c = 0; c < calls.size(); ++c) {
          EXPECT_EQ(calls[c].begin, static_cast<int64_t>(c) * len);
          EXPECT_EQ(calls[c].end, std::min(n, (static_cast<int64_t>(c) + 1) * len));
          ASSERT_GE(calls[c].slot, 0);
          ASSERT_LT(calls[c].slot, slots) << n << " " << grain;
          auto& id = slot_thread[static_cast<size_t>(calls[c].slot)];
          if (id == std::thread::id()) id = calls[c].thread;
          EXPECT_EQ(id, calls[c].thread) << "slot " << calls[c].slot << " ran on two threads";
        }
        if (calls.size() > 1) {
          EXPECT_EQ(calls[0].slot, 0);  // the caller runs the first chunk
          EXPECT_EQ(calls[0].thread, std::this_thread::get_id());
        }
      }
    }
  }
}

// A slot's scratch is safe without a lock: two chunks of one slot never overlap in time, even when
// chunks are slow and many.
TEST(ThreadPool, ASlotNeverRunsTwoChunksAtOnce) {
  ThreadPool pool(4);
  const int64_t n = 64;
  std::vector<std::atomic<int>> busy(static_cast<size_t>(pool.n_slots(n, 1)));
  std::atomic<int> overlaps{0};
  for (int iter = 0; iter < 20; ++iter) {
    pool.parallel_for(n, 1, [&](int64_t, int64_t, int slot) {
      if (busy[static_cast<size_t>(slot)].fetch_add(1) != 0) overlaps.fetch_add(1);
      std::this_thread::yield();
      busy[static_cast<size_t>(slot)].fetch_sub(1);
    });
  }
  EXPECT_EQ(overlaps.load(), 0);
}

// A worker that is stuck in its first chunk does not hold the others up: the caller (and any other
// worker) claims every remaining chunk. The stuck chunk waits until all the others are done, which with a
// static one-range-per-thread split would never happen for a range it owns.
TEST(ThreadPool, OthersTakeEveryChunkAStuckWorkerHasNotClaimed) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    const int64_t n = 1000;
    const int64_t len = pool.chunk_grains(n, 1);
    const int64_t total = (n + len - 1) / len;
    ASSERT_GE(total, 4);
    std::atomic<int64_t> finished{0};
    std::atomic<int> stuck_slot{-1};
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    bool timed_out = false;
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int slot) {
      int expected = -1;
      if (slot != 0 && stuck_slot.compare_exchange_strong(expected, slot)) {
        // Hang guard only (a broken pool would deadlock here); not a performance threshold.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (finished.load() != total - 1 && !(timed_out = std::chrono::steady_clock::now() > deadline))
          std::this_thread::yield();
      }
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      finished.fetch_add(1);
    });
    EXPECT_FALSE(timed_out) << threads << " threads: the other threads did not take the stuck worker's share";
    EXPECT_EQ(finished.load(), total);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1);
  }
}

TEST(ThreadPool, NestedParallelForRunsInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.parallel_for(4, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const auto outer = std::this_thread::get_id();
      pool.parallel_for(10, 1, [&](int64_t b2, int64_t e2, int slot) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        EXPECT_EQ(slot, 0);
        total.fetch_add(e2 - b2);
      });
    }
  });
  EXPECT_EQ(total.load(), 40);
}

// Per-slot partial sums accumulated (a slot runs several chunks); every few dispatches the caller pauses
// long enough for the workers to fall asleep, so both the spinning and the futex wake-up paths run.
TEST(ThreadPool, ManyBackToBackDispatchesSumExactly) {
  ThreadPool pool(4);
  int64_t expected = 0, got = 0;
  std::vector<int64_t> partial(4);
  for (int iter = 0; iter < 2000; ++iter) {
    const int64_t n = 1 + iter % 97;
    std::fill(partial.begin(), partial.end(), 0);
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int slot) {
      for (int64_t i = b; i < e; ++i) partial[static_cast<size_t>(slot)] += i;
    });
    for (int64_t p : partial) got += p;
    expected += n * (n - 1) / 2;
    if (iter % 400 == 399) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(got, expected);
}

// A pool of "0 threads" built on a thread restricted to one CPU (as taskset or a container's cpuset
// would) has one thread, not one per CPU of the machine: more threads than usable CPUs time-share them.
TEST(ThreadPool, ZeroThreadsMeansTheCpusTheCallerMayUse) {
  const std::vector<int> mine = current_thread_cpus();
  if (mine.size() < 2) GTEST_SKIP() << "needs a thread allowed on at least 2 CPUs to restrict";
  EXPECT_EQ(ThreadPool(0).n_threads(), static_cast<int>(mine.size()));
  int restricted_threads = -1;
  std::thread t([&] {
    const int one[] = {mine.front()};
    const auto pinned = pin_current_thread(one);
    if (!pinned.is_ok() || !pinned.value().applied) return;  // no affinity control here: nothing to check
    restricted_threads = ThreadPool(0).n_threads();
  });
  t.join();
  if (restricted_threads < 0) GTEST_SKIP() << "this platform refused to pin a thread";
  EXPECT_EQ(restricted_threads, 1);
}

}  // namespace
}  // namespace dsv4
