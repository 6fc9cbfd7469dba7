// runtime: the acceptance rule of exact speculative decoding. A draft token d, drawn from the draft
// distribution q, is checked against the target distribution p of the same position (both from the
// same sampling chain and history): greedy requests accept iff d is p's argmax; sampled requests accept
// with probability min(1, p(d)/q(d)) and otherwise draw from norm(max(p - q, 0)), which leaves the output
// distributed exactly as p (Leviathan et al. 2023, Chen et al. 2023).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dsv4/engine.h"

namespace dsv4 {

struct AcceptDecision {
  bool accepted = false;
  int32_t token = 0;  // the draft when accepted, else the replacement
};

// p, q: [vocab] distributions from sampling_distribution(); u_accept, u_residual: independent uniforms.
AcceptDecision accept_draft(const SamplingParams& params, std::span<const float> p, std::span<const float> q,
                            int32_t draft, double u_accept, double u_residual);

// Per draft position: how many drafts were proposed there and how many were accepted.
struct SpecStats {
  std::vector<int64_t> proposed;
  std::vector<int64_t> accepted;
  void record(int32_t position, bool was_accepted);
  double acceptance() const;  // over all positions
};

}  // namespace dsv4
