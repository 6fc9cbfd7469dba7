// tests/server: n calls made at the same moment, for the tests that compare requests sent together with
// the same requests sent alone.
#pragma once

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace dsv4::server::test {

// Calls fn(0) .. fn(n-1), each on its own thread, and returns once all have returned. No call starts
// before every thread is running, so the requests really overlap: a thread started early cannot finish
// its request before the last one is sent.
inline void run_together(int n, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&ready, &fn, n, i] {
      ++ready;
      while (ready.load() < n) std::this_thread::yield();
      fn(i);
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace dsv4::server::test
