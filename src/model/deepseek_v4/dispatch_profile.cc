// model/deepseek_v4: the forward's time profile (see dispatch_profile.h).
#include "model/deepseek_v4/dispatch_profile.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"

namespace dsv4::v4 {
namespace {

thread_local DispatchProfile* t_active = nullptr;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A clock the OS refuses (a worker that has exited) reads as 0: that thread's time stops counting.
int64_t clock_ns(clockid_t c) {
  timespec ts{};
  if (clock_gettime(c, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kOther: return "other";
    case Phase::kAttnLinear: return "attn_linear";
    case Phase::kAttnCore: return "attn_core";
    case Phase::kMhc: return "mhc";
    case Phase::kMoeGate: return "moe_gate";
    case Phase::kMoeRoute: return "moe_route";
    case Phase::kMoeExperts: return "moe_experts";
    case Phase::kHeadLinear: return "head_linear";
    case Phase::kHeadMix: return "head_mix";
    case Phase::kCount: break;
  }
  return "?";
}

bool phase_is_matmul(Phase p) {
  return p == Phase::kAttnLinear || p == Phase::kMoeGate || p == Phase::kMoeExperts || p == Phase::kHeadLinear;
}

void DispatchProfile::reset() {
  t_ = {};
  depth_ = 0;
  last_ns_ = last_cpu_ns_ = read_cost_ns_ = boundaries_ = 0;
}

int64_t DispatchProfile::total_ns() const {
  int64_t s = 0;
  for (const PhaseTotals& t : t_) s += t.ns;
  return s;
}

int64_t DispatchProfile::total_cpu_ns() const {
  int64_t s = 0;
  for (const PhaseTotals& t : t_) s += t.cpu_ns;
  return s;
}

DispatchProfile* DispatchProfile::active() { return t_active; }

DispatchProfile::Install::Install(DispatchProfile* p) : prev_(t_active) {
  if (p == nullptr) return;
  t_active = p;
  p->depth_ = 0;
  p->start();
}

DispatchProfile::Install::~Install() {
  if (DispatchProfile* p = t_active; p != nullptr && p != prev_) p->charge();
  t_active = prev_;
}

Phase DispatchProfile::matmul_phase() {
  const DispatchProfile* p = t_active;
  const Phase cur = p == nullptr || p->depth_ == 0 ? Phase::kOther : p->stack_[static_cast<size_t>(p->depth_ - 1)];
  switch (cur) {
    case Phase::kAttnCore:
    case Phase::kAttnLinear: return Phase::kAttnLinear;
    case Phase::kMoeRoute:
    case Phase::kMoeGate: return Phase::kMoeGate;
    case Phase::kHeadMix:
    case Phase::kHeadLinear: return Phase::kHeadLinear;
    default: return Phase::kOther;
  }
}

int64_t DispatchProfile::read_cpu() const {
  int64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  for (clockid_t c : worker_clocks_) cpu += clock_ns(c);
  return cpu;
}

// The wall clock is read first and the CPU clocks after it at every boundary, so each interval's wall
// and CPU readings are offset by the same reads.
void DispatchProfile::start() {
  constexpr int kTimedReads = 15;
  std::array<int64_t, kTimedReads> dt{};
  for (int64_t& d : dt) {
    const int64_t t0 = now_ns();
    (void)read_cpu();
    d = now_ns() - t0;
  }
  std::nth_element(dt.begin(), dt.begin() + kTimedReads / 2, dt.end());
  read_cost_ns_ = dt[kTimedReads / 2];
  last_ns_ = now_ns();
  last_cpu_ns_ = read_cpu();
  ++boundaries_;
}

void DispatchProfile::charge() {
  const int64_t now = now_ns();
  const int64_t cpu = read_cpu();
  const Phase cur = depth_ == 0 ? Phase::kOther : stack_[static_cast<size_t>(depth_ - 1)];
  PhaseTotals& t = t_[static_cast<size_t>(cur)];
  t.ns += now - last_ns_;
  t.cpu_ns += cpu - last_cpu_ns_;
  last_ns_ = now;
  last_cpu_ns_ = cpu;
  ++boundaries_;
}

void DispatchProfile::enter(Phase phase, int64_t bytes) {
  DSV4_CHECK(depth_ < kMaxDepth, "DispatchProfile: scopes nested too deep");
  charge();
  stack_[static_cast<size_t>(depth_++)] = phase;
  PhaseTotals& t = t_[static_cast<size_t>(phase)];
  ++t.calls;
  t.bytes += bytes;
}

void DispatchProfile::leave() {
  charge();
  if (depth_ > 0) --depth_;
}

}  // namespace dsv4::v4
