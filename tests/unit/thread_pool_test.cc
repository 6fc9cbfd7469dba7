// unit: the persistent thread pool — every index visited exactly once, chunk boundaries on grain
// multiples, the same split for repeated calls, nested calls run inline, many back-to-back dispatches.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

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

TEST(ThreadPool, ChunksAreGrainAlignedContiguousAndBalanced) {
  for (int chunks : {1, 2, 3, 7}) {
    for (int64_t n : {1, 5, 100, 129, 4096}) {
      for (int64_t grain : {1, 2, 32}) {
        int64_t prev_end = 0, min_len = n, max_len = 0;
        for (int c = 0; c < chunks; ++c) {
          int64_t b = 0, e = 0;
          ThreadPool::chunk_range(n, grain, chunks, c, &b, &e);
          EXPECT_EQ(b, prev_end);
          EXPECT_LE(b, e);
          if (b < n) {
            EXPECT_EQ(b % grain, 0);
          }
          prev_end = e;
          const int64_t grains = (e - b + grain - 1) / grain;
          min_len = std::min(min_len, grains);
          max_len = std::max(max_len, grains);
        }
        EXPECT_EQ(prev_end, n);
        // Balanced: chunk sizes in grains differ by at most one.
        if ((n + grain - 1) / grain >= chunks) {
          EXPECT_LE(max_len - min_len, 1);
        }
      }
    }
  }
}

TEST(ThreadPool, ChunkIndexMatchesStaticSplitAndRunsOnDistinctThreads) {
  ThreadPool pool(3);
  const int64_t n = 300, grain = 10;
  ASSERT_EQ(pool.n_chunks(n, grain), 3);
  std::vector<int64_t> begins(3, -1), ends(3, -1);
  std::vector<std::thread::id> ids(3);
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int c) {
    begins[static_cast<size_t>(c)] = b;
    ends[static_cast<size_t>(c)] = e;
    ids[static_cast<size_t>(c)] = std::this_thread::get_id();
  });
  for (int c = 0; c < 3; ++c) {
    int64_t b = 0, e = 0;
    ThreadPool::chunk_range(n, grain, 3, c, &b, &e);
    EXPECT_EQ(begins[static_cast<size_t>(c)], b);
    EXPECT_EQ(ends[static_cast<size_t>(c)], e);
  }
  EXPECT_EQ(ids[0], std::this_thread::get_id());  // the caller runs chunk 0
  EXPECT_NE(ids[1], ids[0]);
  EXPECT_NE(ids[2], ids[1]);
}

TEST(ThreadPool, NestedParallelForRunsInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.parallel_for(4, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const auto outer = std::this_thread::get_id();
      pool.parallel_for(10, 1, [&](int64_t b2, int64_t e2, int c2) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        EXPECT_EQ(c2, 0);
        total.fetch_add(e2 - b2);
      });
    }
  });
  EXPECT_EQ(total.load(), 40);
}

TEST(ThreadPool, ManyBackToBackDispatchesSumExactly) {
  ThreadPool pool(4);
  int64_t expected = 0, got = 0;
  std::vector<int64_t> partial(4);
  for (int iter = 0; iter < 2000; ++iter) {
    const int64_t n = 1 + iter % 97;
    std::fill(partial.begin(), partial.end(), 0);
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int c) {
      for (int64_t i = b; i < e; ++i) partial[static_cast<size_t>(c)] += i;
    });
    for (int64_t p : partial) got += p;
    expected += n * (n - 1) / 2;
  }
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace dsv4
