// model/deepseek_v4: the forward's time profile (see dispatch_profile.h).
#include "model/deepseek_v4/dispatch_profile.h"

#include <chrono>

#include "core/check.h"

namespace dsv4::v4 {
namespace {

thread_local DispatchProfile* t_active = nullptr;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
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

int64_t DispatchProfile::total_ns() const {
  int64_t s = 0;
  for (const PhaseTotals& t : t_) s += t.ns;
  return s;
}

DispatchProfile* DispatchProfile::active() { return t_active; }

DispatchProfile::Install::Install(DispatchProfile* p) : prev_(t_active) {
  if (p == nullptr) return;
  t_active = p;
  p->depth_ = 0;
  p->last_ns_ = now_ns();
}

DispatchProfile::Install::~Install() {
  if (DispatchProfile* p = t_active; p != nullptr && p != prev_) p->charge(now_ns());
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

void DispatchProfile::charge(int64_t now) {
  const Phase cur = depth_ == 0 ? Phase::kOther : stack_[static_cast<size_t>(depth_ - 1)];
  t_[static_cast<size_t>(cur)].ns += now - last_ns_;
  last_ns_ = now;
}

void DispatchProfile::enter(Phase phase, int64_t bytes) {
  DSV4_CHECK(depth_ < kMaxDepth, "DispatchProfile: scopes nested too deep");
  charge(now_ns());
  stack_[static_cast<size_t>(depth_++)] = phase;
  PhaseTotals& t = t_[static_cast<size_t>(phase)];
  ++t.calls;
  t.bytes += bytes;
}

void DispatchProfile::leave() {
  charge(now_ns());
  if (depth_ > 0) --depth_;
}

}  // namespace dsv4::v4
