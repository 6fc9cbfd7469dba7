// tests: what the runtime tests on the golden tiny checkpoint share — its runner loaded on the best
// batch-invariant ISA, deterministic prompts, and greedy requests.
#pragma once

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "dsv4/engine.h"
#include "runtime/model_model_runner.h"
#include "test_util.h"

namespace dsv4::test {

// The runtime tests compare tokens and logits across batch compositions and chunkings, which the cpu
// backend keeps bit-identical only below AMX (AMX GEMMs of >= 16 rows sum in another order; see
// model.h), so they load the best batch-invariant ISA, as serve and generate-batch do.
inline std::unique_ptr<ModelModelRunner> load_tiny_runner() {
  ModelOptions o;
  o.isa = kernels::Isa::kAvx512;
  auto r = ModelModelRunner::load(shared_dir() / "golden/tiny/checkpoint", o);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(r).value() : nullptr;
}

// n token ids below the tiny vocabulary (1024), varied by salt.
inline std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(2 + (i * 7919 + salt * 104729) % 1000);
  return p;
}

inline GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  return r;
}

}  // namespace dsv4::test
