// tools: the model section of `dsv4 bench --model DIR` — end-to-end prefill and decode on the loaded
// checkpoint: prefill tokens/s and GFLOP/s (cost_model FLOPs), decode tokens/s at several batch sizes,
// and the weight bytes each decode step really reads, summed from the run's own expert routing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_compute.h"
#include "core/status.h"
#include "model/model.h"

namespace dsv4::cli::bench {

struct ModelBenchOptions {
  int64_t prefill_tokens = 128;     // one sequence's prompt, timed as one forward
  int64_t decode_prompt = 16;       // each decode sequence's own prompt before the timed steps
  int64_t decode_steps = 16;        // timed decode steps per batch size
  std::vector<int64_t> batches{1, 4, 8};
  ModelOptions model;               // backend (cpu by default), threads, ISA
  double probe_gbps = 0;            // the read probe's best, for the ratios
  double probe_cpu_gbps = 0;        // its bytes per CPU-second (ReadProbeResult::best_cpu_gbps)
  const ComputePeaks* peaks = nullptr;  // the compute probe, for the decode rows' compute fraction
  bool quiet = false;
};

Result<nlohmann::json> bench_model(const std::filesystem::path& dir, const ModelBenchOptions& opt);

}  // namespace dsv4::cli::bench
