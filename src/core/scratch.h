// core: per-thread step scratch that gives memory back. A ScratchVec is a grow-only buffer (a warm
// decode step must not touch the heap) that also records the largest size each step asked of it; at the
// end of a step (scratch_end_step) a buffer that held more than twice what it was asked for, step after
// step, shrinks to the largest of those asks. So a 2048-token prefill's ~268 MB activation buffers are
// released a few decode steps later, while a batch that shrinks for a step or two keeps its buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsv4 {

struct ScratchStats {
  int64_t held_bytes = 0;
  int64_t buffers = 0;
};

// One buffer's trim state, linked into the list of the thread that created it (buffers are
// thread_local or owned by one thread at a time).
class ScratchNode {
 public:
  // A buffer is oversized in a step when it holds more than 2 × the step's ask + this (small buffers
  // are not worth a reallocation).
  static constexpr int64_t kTrimSlackBytes = 64 * 1024;
  // Consecutive oversized steps before a trim: a batch that dips for fewer steps keeps its memory.
  static constexpr int kTrimAfterSteps = 4;

  ScratchNode();
  virtual ~ScratchNode();
  ScratchNode(const ScratchNode&) = delete;
  ScratchNode& operator=(const ScratchNode&) = delete;

 protected:
  void note_ask(int64_t bytes) { step_ask_ = std::max(step_ask_, bytes); }
  // Keeps the process-wide held-bytes total in step with this buffer's capacity.
  void note_held(int64_t bytes);
  virtual void shrink_to(int64_t bytes) = 0;

 private:
  friend void trim_thread_buffers();
  friend ScratchStats scratch_thread_stats();
  friend struct ScratchList;
  ScratchNode* prev_ = nullptr;
  ScratchNode* next_ = nullptr;
  int64_t held_ = 0;         // bytes of capacity
  int64_t step_ask_ = 0;     // largest ask in the current step
  int64_t window_ask_ = 0;   // largest ask over the current run of oversized steps
  int oversized_steps_ = 0;  // length of that run
};

template <typename T>
class ScratchVec final : public ScratchNode {
 public:
  ScratchVec() = default;
  ~ScratchVec() override { note_held(0); }

  // Resizes to n elements (contents kept up to the old size, like std::vector::resize); when that needs
  // more capacity, reserves max(n, room) at once (room: what a growing state table will need before
  // its next page, so it does not reallocate every step).
  T* grow(int64_t n, int64_t room = 0) {
    const auto need = static_cast<size_t>(n);
    const size_t want = std::max(need, static_cast<size_t>(std::max<int64_t>(room, 0)));
    note_ask(static_cast<int64_t>(want * sizeof(T)));
    if (v_.capacity() < need) {
      v_.reserve(want);
      note_held(static_cast<int64_t>(v_.capacity() * sizeof(T)));
    }
    v_.resize(need);
    return v_.data();
  }

  T* data() { return v_.data(); }
  const T* data() const { return v_.data(); }
  size_t size() const { return v_.size(); }
  T& operator[](size_t i) { return v_[i]; }
  const T& operator[](size_t i) const { return v_[i]; }
  size_t capacity() const { return v_.capacity(); }
  T* begin() { return v_.data(); }
  T* end() { return v_.data() + v_.size(); }

 private:
  void shrink_to(int64_t bytes) override {
    const auto keep = static_cast<size_t>(bytes) / sizeof(T);
    if (v_.capacity() <= keep) return;
    std::vector<T> fresh;
    fresh.reserve(keep);
    fresh.assign(v_.begin(), v_.begin() + static_cast<std::ptrdiff_t>(std::min(keep, v_.size())));
    v_.swap(fresh);
    note_held(static_cast<int64_t>(v_.capacity() * sizeof(T)));
  }

  std::vector<T> v_;
};

// Ends a step for the calling thread's buffers: trims those oversized for kTrimAfterSteps steps in a row
// to the largest ask of those steps. Allocates (and frees) only when it trims. Also announces the step
// to scratch_follow_steps.
void scratch_end_step();
// For threads that serve a stepping thread (pool workers, after each job): if a step ended since this
// thread last looked, ends one for this thread's buffers too. One relaxed load when nothing changed.
void scratch_follow_steps();

// The calling thread's buffers.
ScratchStats scratch_thread_stats();
// Bytes held by every ScratchVec of the process (all threads).
int64_t scratch_held_bytes();

}  // namespace dsv4
