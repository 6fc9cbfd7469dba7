// bench: aggregate generated tokens/s of the runtime (scheduler, sampler, speculation bookkeeping) at
// concurrency 1, 4 and 16 over the fake model, whose forward costs one hash per logit. With the fake,
// this measures the runtime's own overhead per token; `dsv4 generate-batch` measures a real model.
#include <benchmark/benchmark.h>

#include "runtime/engine_core.h"
#include "runtime/testing/fake_model_runner.h"

namespace {

using dsv4::EngineCore;
using dsv4::EngineCoreOptions;
using dsv4::GenerationRequest;
using dsv4::GenerationUpdate;

// args: concurrency, vocab, speculative k, greedy (1) or sampled (0)
void BM_runtime_fake(benchmark::State& state) {
  const auto concurrency = static_cast<int>(state.range(0));
  dsv4::testing::FakeModelOptions fo;
  fo.vocab_size = static_cast<int32_t>(state.range(1));
  fo.draft_miss_percent = 30;
  EngineCoreOptions opt;
  opt.max_batch_tokens = 512;
  opt.max_running = 64;
  opt.speculative_k = static_cast<int32_t>(state.range(2));
  const bool greedy = state.range(3) != 0;
  int64_t generated = 0;
  for (auto _ : state) {
    dsv4::testing::FakeModelRunner runner(fo);
    EngineCore core(&runner, nullptr, opt);
    for (int i = 0; i < concurrency; ++i) {
      GenerationRequest r;
      for (int j = 0; j < 128; ++j) r.prompt_ids.push_back(2 + (i * 131 + j * 7) % (fo.vocab_size - 2));
      r.sampling.temperature = greedy ? 0.0f : 0.8f;
      r.sampling.top_p = greedy ? 1.0f : 0.95f;
      r.stop.max_tokens = 64;
      r.stop.ignore_eos = true;
      (void)core.add(static_cast<dsv4::RequestId>(i + 1), std::move(r), [](const GenerationUpdate&) {});
    }
    while (core.has_work()) (void)core.step();
    generated += core.stats().generated_tokens;
  }
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(generated), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_runtime_fake)
    ->ArgNames({"conc", "vocab", "spec", "greedy"})
    ->ArgsProduct({{1, 4, 16}, {1024, 129280}, {0, 2}, {1, 0}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
