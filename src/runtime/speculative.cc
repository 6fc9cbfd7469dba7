// runtime: exact speculative acceptance (see speculative.h).
#include "runtime/speculative.h"

#include <algorithm>

#include "runtime/sampler.h"

namespace dsv4 {

AcceptDecision accept_draft(const SamplingParams& params, std::span<const float> p, std::span<const float> q,
                            int32_t draft, double u_accept, double u_residual) {
  const auto d = static_cast<size_t>(draft);
  if (is_greedy(params)) {
    const int32_t target = argmax(p);
    return {target == draft, target};
  }
  const double pd = p[d], qd = q[d];
  // u < p/q, written without the division (q(d) > 0 because d was drawn from q).
  if (u_accept * qd < pd) return {true, draft};
  std::vector<float> residual(p.size());
  double mass = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    residual[i] = std::max(0.0f, p[i] - q[i]);
    mass += residual[i];
  }
  // A rejection implies p(d) < q(d), hence positive residual mass; the guard covers rounding only.
  if (mass <= 0.0) return {false, sample_from(p, u_residual)};
  return {false, sample_from(residual, u_residual)};
}

void SpecStats::record(int32_t position, bool was_accepted) {
  const auto i = static_cast<size_t>(position);
  if (proposed.size() <= i) {
    proposed.resize(i + 1, 0);
    accepted.resize(i + 1, 0);
  }
  ++proposed[i];
  if (was_accepted) ++accepted[i];
}

double SpecStats::acceptance() const {
  int64_t p = 0, a = 0;
  for (size_t i = 0; i < proposed.size(); ++i) {
    p += proposed[i];
    a += accepted[i];
  }
  return p == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(p);
}

}  // namespace dsv4
