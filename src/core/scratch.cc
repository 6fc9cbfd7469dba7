// core: the per-thread lists of ScratchVec buffers, their end-of-step trim, and the held-bytes totals.
#include "core/scratch.h"

#include <atomic>

namespace dsv4 {

// The calling thread's buffers. A plain pointer (constant-initialized, never destroyed), so buffers that
// are themselves thread_local can unlink at thread exit in any order.
struct ScratchList {
  static ScratchNode*& head() {
    thread_local ScratchNode* h = nullptr;
    return h;
  }
};

namespace {
std::atomic<int64_t> g_held_bytes{0};
std::atomic<uint64_t> g_steps{0};  // steps ended by any thread (scratch_end_step)
thread_local uint64_t t_steps_seen = 0;
}  // namespace

ScratchNode::ScratchNode() {
  ScratchNode*& head = ScratchList::head();
  next_ = head;
  if (head) head->prev_ = this;
  head = this;
}

ScratchNode::~ScratchNode() {
  if (prev_) {
    prev_->next_ = next_;
  } else {
    ScratchList::head() = next_;
  }
  if (next_) next_->prev_ = prev_;
}

void ScratchNode::note_held(int64_t bytes) {
  g_held_bytes.fetch_add(bytes - held_, std::memory_order_relaxed);
  held_ = bytes;
}

void trim_thread_buffers() {
  for (ScratchNode* n = ScratchList::head(); n != nullptr; n = n->next_) {
    const int64_t ask = n->step_ask_;
    n->step_ask_ = 0;
    if (n->held_ <= 2 * ask + ScratchNode::kTrimSlackBytes) {
      n->oversized_steps_ = 0;
      n->window_ask_ = 0;
      continue;
    }
    n->window_ask_ = std::max(n->window_ask_, ask);
    if (++n->oversized_steps_ < ScratchNode::kTrimAfterSteps) continue;
    n->shrink_to(n->window_ask_);
    n->oversized_steps_ = 0;
    n->window_ask_ = 0;
  }
}

void scratch_end_step() {
  trim_thread_buffers();
  t_steps_seen = g_steps.fetch_add(1, std::memory_order_relaxed) + 1;
}

void scratch_follow_steps() {
  const uint64_t steps = g_steps.load(std::memory_order_relaxed);
  if (steps == t_steps_seen) return;
  t_steps_seen = steps;
  trim_thread_buffers();
}

ScratchStats scratch_thread_stats() {
  ScratchStats s;
  for (const ScratchNode* n = ScratchList::head(); n != nullptr; n = n->next_) {
    s.held_bytes += n->held_;
    ++s.buffers;
  }
  return s;
}

int64_t scratch_held_bytes() { return g_held_bytes.load(std::memory_order_relaxed); }

}  // namespace dsv4
