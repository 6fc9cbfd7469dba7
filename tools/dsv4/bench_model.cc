// tools: `dsv4 bench --model` model section (see bench_model.h). Decode rows of a batch never interact
// (model.h), so each sequence's routing is the same alone or batched: one traced single-sequence pass per
// sequence records which experts every step activates, and the timed batched runs replay the same
// tokens. A step's weight bytes = the dense (non-expert) backbone once + every expert activated by any
// row of the batch once per layer; per token = that / batch.
// Decode is bandwidth-bound, so a batch of b can at best be bytes(b) / (b · bytes(1)) as slow per token as
// one stream: the speedup ceiling of batch b over batch 1 is b · bytes_per_step(1) / bytes_per_step(b),
// from this run's own routing (more distinct experts per step → lower ceiling). Each row reports it and the
// fraction of it achieved, so a target such as "8 streams ≥ 4× one" can be judged on any model.
// Batched decode also multiplies each weight by b tokens, so each row reports its fraction of the compute
// peak too: its weight matmuls' flops (2 per weight element per token that uses it, routed experts per
// routed token) split by weight family, each family over the peak of the instruction its tile runs on
// (bench_compute.h), against the measured time. Families come from the checkpoint dtypes (BF16/F32 and
// packed FP4 → fp32 FMA tiles, F8_E4M3 → the bf16 dot-product tile where the CPU has it); attention over the
// context and the mHC mixes are left out, so at long contexts the fraction understates the work.
#include "bench_model.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "io/model_config.h"
#include "core/host_memory.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "io/safetensors.h"
#include "model/cost_model.h"
#include "model/deepseek_v4/dispatch_profile.h"
#include "model/model.h"

namespace dsv4::cli::bench {
namespace {

// Weight bytes by role: routed experts per (layer, expert); everything else of the backbone once
// (embedding and hash table: one row per token). MTP is not part of a main-model decode step.
// Multiply-adds per token by weight family (index: WeightFamily).
using FamilyMacs = std::array<double, 3>;

struct WeightBytes {
  double dense = 0;
  std::map<std::pair<int64_t, int64_t>, double> expert;  // (layer, expert id) → bytes
  FamilyMacs dense_macs{};
  std::map<std::pair<int64_t, int64_t>, FamilyMacs> expert_macs;
};

// A matmul weight's family and element count (packed FP4: two per byte); nullopt for anything that is
// not a 2-D linear weight (norms, scales, mHC parameters, tables).
std::optional<std::pair<WeightFamily, double>> matmul_weight(const TensorInfo& t) {
  const std::string_view n = t.name;
  if (t.shape.size() != 2 || n == "embed.weight" || !n.ends_with(".weight")) return std::nullopt;
  const auto elems = static_cast<double>(t.n_elements);
  switch (t.dtype) {
    case DType::kBF16:
    case DType::kF32:
      return std::pair{WeightFamily::kBf16, elems};
    case DType::kF8E4M3:
      return std::pair{WeightFamily::kFp8, elems};
    case DType::kI8:
      return std::pair{WeightFamily::kFp4, 2 * elems};
    default:
      return std::nullopt;
  }
}

Result<WeightBytes> weight_bytes(const std::filesystem::path& dir) {
  DSV4_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  WeightBytes w;
  for (const TensorInfo& t : ckpt.tensors()) {
    const double bytes = static_cast<double>(t.data.size());
    if (t.name.rfind("mtp.", 0) == 0) continue;
    const auto mm = matmul_weight(t);
    const size_t ex = t.name.find(".ffn.experts.");
    if (t.name.rfind("layers.", 0) == 0 && ex != std::string::npos) {
      const int64_t layer = std::stoll(t.name.substr(7, ex - 7));
      const int64_t id = std::stoll(t.name.substr(ex + 13));
      w.expert[{layer, id}] += bytes;
      if (mm) w.expert_macs[{layer, id}][static_cast<size_t>(mm->first)] += mm->second;
      continue;
    }
    if (mm) w.dense_macs[static_cast<size_t>(mm->first)] += mm->second;
    const bool row_read = t.name == "embed.weight" || t.name.find("ffn.gate.tid2eid") != std::string::npos;
    w.dense += row_read && !t.shape.empty() ? bytes / static_cast<double>(t.shape[0]) : bytes;
  }
  return w;
}

// How the weights ended up resident: the mode asked for and chosen, whether a mapping was faulted in at
// load, the load time, and the process's huge-page bytes right after load (smaps_rollup) — a copy that
// the kernel could not back with huge pages shows here as anon_huge_bytes far below the checkpoint.
nlohmann::json residency_report(const ResidencyChoice& c, double load_seconds) {
  nlohmann::json j = {{"requested", residency_name(c.requested)},
                      {"mode", resident_mode_name(c)},
                      {"copied_bytes", c.copied_bytes},
                      {"mapped_bytes", c.mapped_bytes},
                      {"populated", c.populate},
                      {"locked_bytes", c.locked_bytes},
                      {"reason", c.reason},
                      {"proactive_reclaim", c.proactive_reclaim},
                      {"checkpoint_bytes", c.file_bytes},
                      {"load_seconds", load_seconds}};
  if (c.mem_available) j["mem_available_bytes"] = *c.mem_available;
  if (!c.lock_note.empty()) j["lock_note"] = c.lock_note;
  const HugePageUsage u = process_huge_pages();
  if (u.known) {
    j["anon_huge_bytes"] = u.anon_huge_bytes;
    j["file_huge_bytes"] = u.file_huge_bytes;
  }
  return j;
}

void print_residency(const nlohmann::json& w) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  std::printf("\nmodel weights: --weights %s -> %s%s, %.2f GiB loaded in %.2f s",
              w["requested"].get<std::string>().c_str(), w["mode"].get<std::string>().c_str(),
              w["populated"].get<bool>() ? " (populated at load)" : "",
              w["checkpoint_bytes"].get<double>() / kGiB, w["load_seconds"].get<double>());
  if (w.contains("mem_available_bytes")) std::printf(" (MemAvailable %.1f GiB)", w["mem_available_bytes"].get<double>() / kGiB);
  if (w.contains("anon_huge_bytes"))
    std::printf("; process huge pages: %.2f GiB anon, %.2f GiB file", w["anon_huge_bytes"].get<double>() / kGiB,
                w["file_huge_bytes"].get<double>() / kGiB);
  std::printf("\n  why: %s\n", w["reason"].get<std::string>().c_str());
  if (w["locked_bytes"].get<uint64_t>() > 0) std::printf("  locked: %.2f GiB\n", w["locked_bytes"].get<double>() / kGiB);
  if (w.contains("lock_note")) std::printf("  not locked: %s\n", w["lock_note"].get<std::string>().c_str());
}

// Whether the kernel took weight pages back while the model ran: the checkpoint's bytes in memory
// (mincore over a mapping; all of a copy) and the process's major faults (reads from disk) since load.
// On mapped weights, resident bytes falling or faults climbing mean decode is re-reading the file.
void check_reclaim(const Checkpoint& ck, uint64_t faults_at_load, nlohmann::json* w, bool quiet) {
  const uint64_t faults = process_major_faults() - faults_at_load;
  (*w)["major_faults_since_load"] = faults;
  const auto resident = ck.resident_bytes();
  if (resident) (*w)["resident_bytes_end"] = *resident;
  if (quiet) return;
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  const bool reclaimed = ck.residency().mapped_bytes > 0 && (faults > 0 || (resident && *resident < ck.total_bytes()));
  std::printf("model weights after the runs: %.2f of %.2f GiB resident%s, %llu major faults since load%s\n",
              resident ? static_cast<double>(*resident) / kGiB : 0.0, static_cast<double>(ck.total_bytes()) / kGiB,
              resident ? "" : " (unknown)", static_cast<unsigned long long>(faults),
              reclaimed ? " (the kernel reclaimed mapped weights: decode re-read them from disk; --weights copy avoids it)"
                        : "");
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = static_cast<int32_t>(2 + splitmix(seed) % static_cast<uint64_t>(vocab - 2));
  return t;
}

// Prefills sequences [0, n_seq) with their prompts in one forward.
Status prefill_all(const Model& m, const std::vector<std::vector<int32_t>>& prompts, int64_t n_seq,
                   std::vector<SequenceState*>& states) {
  std::vector<BatchToken> batch;
  for (int64_t s = 0; s < n_seq; ++s)
    for (size_t i = 0; i < prompts[static_cast<size_t>(s)].size(); ++i)
      batch.push_back({static_cast<int32_t>(s), static_cast<int32_t>(i), prompts[static_cast<size_t>(s)][i], false});
  return m.forward(batch, states, nullptr);
}

// Where the timed steps' time went (model/deepseek_v4/dispatch_profile.h): per phase the wall time per
// token and its share, the CPU time of the model's threads in it (caller + pool workers, spin-waits
// included) and cpu / wall, and for the weight matmul phases the bytes per token, the GB/s each achieved
// over its own dispatches' wall and its bytes per CPU-second against the probe's — the kernels in the
// model, to set against the decode GEMV rows above; the other phases are the serial work between
// dispatches. The CPU figures are the ones to A/B on a shared machine: time other processes take from
// the threads lengthens the wall figures, not these (memory-bandwidth contention still moves both).
nlohmann::json profile_report(const v4::DispatchProfile& prof, double tokens, double probe_gbps, double probe_cpu_gbps,
                              bool quiet) {
  nlohmann::json j = nlohmann::json::object();
  const double total = static_cast<double>(prof.total_ns()), total_cpu = static_cast<double>(prof.total_cpu_ns());
  double mm_ns = 0, mm_cpu = 0, mm_bytes = 0;
  if (!quiet)
    std::printf("    %-12s %9s %10s %8s %7s %10s %8s %9s %13s %9s\n", "phase", "ms/token", "cpu ms/tok", "cpu/wall",
                "share", "MB/token", "GB/s", "of probe", "of probe/cpu", "calls/tok");
  const auto line = [&](const char* name, double ns, double cpu_ns, double bytes, double calls, bool matmul) {
    const double gbps = ns > 0 ? bytes / ns : 0.0, cpu_gbps = cpu_ns > 0 ? bytes / cpu_ns : 0.0;
    const double busy = ns > 0 ? cpu_ns / ns : 0.0;
    nlohmann::json r = {{"ms_per_token", ns / 1e6 / tokens},
                        {"share", total > 0 ? ns / total : 0.0},
                        {"cpu_ms_per_token", cpu_ns / 1e6 / tokens},
                        {"cpu_share", total_cpu > 0 ? cpu_ns / total_cpu : 0.0},
                        {"cpu_over_wall", busy},
                        {"calls_per_token", calls / tokens}};
    if (matmul) {
      r["bytes_per_token"] = bytes / tokens;
      r["gbps"] = gbps;
      if (probe_gbps > 0) r["ratio_to_probe"] = gbps / probe_gbps;
      r["gb_per_cpu_s"] = cpu_gbps;
      if (probe_cpu_gbps > 0) r["ratio_to_probe_cpu"] = cpu_gbps / probe_cpu_gbps;
    }
    if (!quiet) {
      std::printf("    %-12s %9.3f %10.3f %8.2f %6.1f%%", name, ns / 1e6 / tokens, cpu_ns / 1e6 / tokens, busy,
                  total > 0 ? 100.0 * ns / total : 0.0);
      if (matmul)
        std::printf(" %10.2f %8.2f %8.1f%% %12.1f%% %9.1f\n", bytes / tokens / 1e6, gbps,
                    probe_gbps > 0 ? 100.0 * gbps / probe_gbps : 0.0,
                    probe_cpu_gbps > 0 ? 100.0 * cpu_gbps / probe_cpu_gbps : 0.0, calls / tokens);
      else
        std::printf(" %10s %8s %9s %13s %9.1f\n", "", "", "", "", calls / tokens);
    }
    return r;
  };
  for (int i = 0; i < static_cast<int>(v4::Phase::kCount); ++i) {
    const auto ph = static_cast<v4::Phase>(i);
    const v4::PhaseTotals& t = prof.totals(ph);
    const bool mm = v4::phase_is_matmul(ph);
    if (mm) mm_ns += static_cast<double>(t.ns), mm_cpu += static_cast<double>(t.cpu_ns), mm_bytes += static_cast<double>(t.bytes);
    // A phase outside the matmuls that books weight bytes (the mHC mixes' fn) shows its GB/s too.
    j[v4::phase_name(ph)] = line(v4::phase_name(ph), static_cast<double>(t.ns), static_cast<double>(t.cpu_ns),
                                 static_cast<double>(t.bytes), static_cast<double>(t.calls), mm || t.bytes > 0);
  }
  j["weight_matmuls"] = line("= matmuls", mm_ns, mm_cpu, mm_bytes, 0, true);
  j["outside_matmuls"] = line("= outside", total - mm_ns, total_cpu - mm_cpu, 0, 0, false);
  return j;
}

// What the profile itself costs: the clocks it reads at each scope boundary (the caller's and one per
// pool worker), the boundaries per token, and their reads' wall time (one boundary's reads timed at
// install, times the boundaries), which the phases' times include.
nlohmann::json profile_cost(const v4::DispatchProfile& prof, double tokens, bool quiet) {
  const double per_token = static_cast<double>(prof.boundaries()) / tokens;
  const double read_us = static_cast<double>(prof.read_cost_ns()) / 1e3;
  if (!quiet)
    std::printf("    (profile: %d clocks read at %.0f boundaries per token, %.2f us each: %.3f ms per token, inside these times)\n",
                prof.n_clocks(), per_token, read_us, per_token * read_us / 1e3);
  return {{"clocks", prof.n_clocks()},
          {"boundaries_per_token", per_token},
          {"clock_read_us", read_us},
          {"clock_read_ms_per_token", per_token * read_us / 1e3}};
}

}  // namespace

Result<nlohmann::json> bench_model(const std::filesystem::path& dir, const ModelBenchOptions& opt) {
  DSV4_ASSIGN_OR_RETURN(WeightBytes wb, weight_bytes(dir));
  const auto load_t0 = Clock::now();
  DSV4_ASSIGN_OR_RETURN(auto model, Model::load(dir, opt.model));
  const double load_seconds = seconds_since(load_t0);
  const ModelConfig& cfg = model->config();
  const int64_t V = cfg.vocab_size;
  nlohmann::json j;
  j["backend"] = backend_name(opt.model.backend);
  j["threads"] = model->threads();
  j["dense_weight_bytes_per_step"] = wb.dense;
  j["weights"] = residency_report(model->weights().checkpoint->residency(), load_seconds);
  if (!opt.quiet) print_residency(j["weights"]);
  const uint64_t faults_at_load = process_major_faults();
  // Where the threads run and the weights live (core/numa.h): bytes per node from /proc/self/numa_maps.
  j["numa"] = {{"plan", describe_plan(model->numa_plan())}, {"summary", model->placement_summary()}};
  if (const auto per_node = model->weight_bytes_per_node()) {
    nlohmann::json b = nlohmann::json::object();
    for (const auto& [node, bytes] : *per_node) b[std::to_string(node)] = bytes;
    j["numa"]["weight_bytes_per_node"] = std::move(b);
  }
  if (!opt.quiet) std::printf("model numa: %s\n", model->placement_summary().c_str());

  // 1. Prefill: one sequence, one forward of prefill_tokens.
  {
    const auto prompt = random_tokens(opt.prefill_tokens, V, 1);
    auto seq = model->new_sequence();
    std::vector<SequenceState*> states{seq.get()};
    std::vector<BatchToken> batch;
    for (int64_t i = 0; i < opt.prefill_tokens; ++i)
      batch.push_back({0, static_cast<int32_t>(i), prompt[static_cast<size_t>(i)], i + 1 == opt.prefill_tokens});
    std::vector<float> logits;
    const auto t0 = Clock::now();
    DSV4_RETURN_IF_ERROR(model->forward(batch, states, &logits));
    const double sec = seconds_since(t0);
    double flops = 0;
    for (int64_t p = 1; p <= opt.prefill_tokens; ++p) flops += flops_per_token(cfg, p).total();
    j["prefill"] = {{"tokens", opt.prefill_tokens},
                    {"seconds", sec},
                    {"tokens_per_s", static_cast<double>(opt.prefill_tokens) / sec},
                    {"flops", flops},
                    {"gflops", flops / sec / 1e9}};
    if (!opt.quiet)
      std::printf("\nmodel (%s backend) prefill: %lld tokens in %.3f s: %.1f tokens/s, %.2f GFLOP/s\n",
                  backend_name(opt.model.backend), static_cast<long long>(opt.prefill_tokens), sec,
                  static_cast<double>(opt.prefill_tokens) / sec,
                  flops / sec / 1e9);
  }

  // 2. Routing of every decode sequence, from traced single-sequence runs of the same tokens.
  const int64_t max_b = opt.batches.empty() ? 0 : *std::max_element(opt.batches.begin(), opt.batches.end());
  std::vector<std::vector<int32_t>> prompts, forced;
  for (int64_t s = 0; s < max_b; ++s) {
    prompts.push_back(random_tokens(opt.decode_prompt, V, 100 + static_cast<uint64_t>(s)));
    forced.push_back(random_tokens(opt.decode_steps, V, 200 + static_cast<uint64_t>(s)));
  }
  // routes[s][t][layer] = the experts sequence s's step t activates in that layer.
  std::vector<std::vector<std::vector<std::vector<int32_t>>>> routes(static_cast<size_t>(max_b));
  for (int64_t s = 0; s < max_b; ++s) {
    auto seq = model->new_sequence();
    std::vector<SequenceState*> states{seq.get()};
    DSV4_RETURN_IF_ERROR(prefill_all(*model, {prompts[static_cast<size_t>(s)]}, 1, states));
    for (int64_t t = 0; t < opt.decode_steps; ++t) {
      const BatchToken tok{0, static_cast<int32_t>(seq->n_tokens()), forced[static_cast<size_t>(s)][static_cast<size_t>(t)], true};
      ForwardTrace trace;
      std::vector<float> logits;
      DSV4_RETURN_IF_ERROR(model->forward({&tok, 1}, states, &logits, nullptr, &trace));
      auto& per_layer = routes[static_cast<size_t>(s)].emplace_back();
      for (const auto& l : trace.layers) per_layer.push_back(l.gate_indices);
    }
  }

  // 3. Timed decode at each batch size.
  nlohmann::json rows = nlohmann::json::array();
  double tps1 = 0, step_bytes1 = 0;
  if (!opt.quiet)
    std::printf("Each decode row's phase table: 'cpu ms/tok' is the CPU time of the caller and the pool's %d worker(s) while the\n"
                "phase ran (per-thread clocks), spin-waits included: a worker polls ~50 us for the next job before it\n"
                "sleeps, so a serial phase can show a spinning worker beside the caller; cpu/wall near %d: every thread\n"
                "on a core (computing or spinning), near 1: the caller alone. Time other processes take from these\n"
                "threads stretches the wall columns, not the CPU ones: A/B the CPU columns on a shared machine.\n",
                model->threads() - 1, model->threads());
  if (!opt.quiet)
    std::printf("model decode (%lld steps after a %lld-token prompt per sequence; 'of probe': wall GB/s over the probe's,\n"
                "  'of probe/cpu': GB per CPU-second over the probe's %.2f GB per CPU-second, the figure a shared\n"
                "  machine's load moves least):\n  %6s %10s %10s %12s %12s %8s %9s %9s %13s %9s %8s %8s\n",
                static_cast<long long>(opt.decode_steps), static_cast<long long>(opt.decode_prompt), opt.probe_cpu_gbps,
                "batch", "tokens/s", "tok/cpu-s", "MB/token", "MB/step", "GB/s", "of probe", "GB/cpu-s", "of probe/cpu",
                "x batch1", "ceiling", "of ceil");
  for (const int64_t b : opt.batches) {
    std::vector<std::unique_ptr<SequenceState>> seqs;
    std::vector<SequenceState*> states;
    for (int64_t s = 0; s < b; ++s) {
      seqs.push_back(model->new_sequence());
      states.push_back(seqs.back().get());
    }
    DSV4_RETURN_IF_ERROR(prefill_all(*model, prompts, b, states));
    std::vector<BatchToken> batch(static_cast<size_t>(b));
    std::vector<float> logits;
    // The caller's and the pool workers' CPU clocks: one read each per scope boundary, beside the wall clock.
    const ThreadPool* pool = model->context().exec.pool;
    v4::DispatchProfile prof(pool ? pool->worker_cpu_clocks() : std::vector<clockid_t>{});
    const v4::DispatchProfile::Install profiled(&prof);
    const auto t0 = Clock::now();
    const double c0 = process_cpu_seconds();
    for (int64_t t = 0; t < opt.decode_steps; ++t) {
      for (int64_t s = 0; s < b; ++s)
        batch[static_cast<size_t>(s)] = {static_cast<int32_t>(s), static_cast<int32_t>(states[static_cast<size_t>(s)]->n_tokens()),
                                         forced[static_cast<size_t>(s)][static_cast<size_t>(t)], true};
      DSV4_RETURN_IF_ERROR(model->forward(batch, states, &logits));
    }
    const double sec = seconds_since(t0), cpu_sec = process_cpu_seconds() - c0;
    // Bytes: the dense part once per step plus the union of the batch's experts per layer. Multiply-adds:
    // the dense part for every token, each expert for every token routed to it.
    double bytes = 0;
    FamilyMacs macs{};
    for (int64_t t = 0; t < opt.decode_steps; ++t) {
      bytes += wb.dense;
      for (size_t f = 0; f < macs.size(); ++f) macs[f] += static_cast<double>(b) * wb.dense_macs[f];
      for (int64_t il = 0; il < cfg.n_layers; ++il) {
        std::set<int32_t> used;
        for (int64_t s = 0; s < b; ++s)
          for (int32_t e : routes[static_cast<size_t>(s)][static_cast<size_t>(t)][static_cast<size_t>(il)]) {
            used.insert(e);
            auto it = wb.expert_macs.find({il, e});
            if (it != wb.expert_macs.end())
              for (size_t f = 0; f < macs.size(); ++f) macs[f] += it->second[f];
          }
        for (int32_t e : used) {
          auto it = wb.expert.find({il, e});
          if (it != wb.expert.end()) bytes += it->second;
        }
      }
    }
    const double tokens = static_cast<double>(b * opt.decode_steps);
    const double tps = tokens / sec, gbps = bytes / sec / 1e9;
    const double step_bytes = bytes / static_cast<double>(opt.decode_steps);
    if (b == 1) tps1 = tps, step_bytes1 = step_bytes;
    nlohmann::json row = {{"batch", b},
                          {"steps", opt.decode_steps},
                          {"seconds", sec},
                          {"tokens_per_s", tps},
                          {"weight_bytes_per_token", bytes / tokens},
                          {"weight_bytes_per_step", bytes / static_cast<double>(opt.decode_steps)},
                          {"gbps", gbps},
                          {"cpu_seconds", cpu_sec},
                          {"tokens_per_cpu_s", tokens / cpu_sec}};
    if (opt.probe_gbps > 0) row["ratio_to_probe"] = gbps / opt.probe_gbps;
    // The same ratio in bytes per CPU-second (decode's pool threads against the probe's): the figure a
    // loaded, shared machine depresses least (spin-waiting in the pool counts as decode CPU time).
    const double gb_per_cpu_s = bytes / cpu_sec / 1e9;
    row["gb_per_cpu_s"] = gb_per_cpu_s;
    if (opt.probe_cpu_gbps > 0) row["ratio_to_probe_cpu"] = gb_per_cpu_s / opt.probe_cpu_gbps;
    // Speedup over batch 1 and its bandwidth-bound ceiling b · bytes_step(1) / bytes_step(b).
    const double speedup = tps1 > 0 ? tps / tps1 : 0.0;
    const double ceiling = step_bytes1 > 0 ? static_cast<double>(b) * step_bytes1 / step_bytes : 0.0;
    if (tps1 > 0) {
      row["tokens_per_s_over_batch1"] = speedup;
      row["bandwidth_ceiling_over_batch1"] = ceiling;
      row["fraction_of_ceiling"] = speedup / ceiling;
    }
    // Compute: the time each family's flops need at its instruction's peak, summed, over the measured time.
    double flops = 0, min_wall = 0, min_cpu = 0;
    bool have_peaks = opt.peaks != nullptr && opt.model.backend == Backend::kCpu;
    for (size_t f = 0; f < macs.size() && have_peaks; ++f) {
      if (macs[f] == 0) continue;
      // FP4 weights are the routed experts; FP8 / BF16 ones dense (the model's AMX routing roles).
      const kernels::WeightRole role = static_cast<WeightFamily>(f) == WeightFamily::kFp4 ? kernels::WeightRole::kRoutedExpert
                                                                                         : kernels::WeightRole::kDense;
      const auto insn = gemm_insn(kernels::resolve_isa(opt.model.isa), b, cfg.dim, true, opt.model.amx.min_tokens(role));
      const kernels::ComputePeak* peak = insn ? opt.peaks->get(*insn) : nullptr;
      if (peak == nullptr) {
        have_peaks = false;
        break;
      }
      flops += 2 * macs[f];
      min_wall += 2 * macs[f] / (peak->threads_gflops * 1e9);
      min_cpu += 2 * macs[f] / (peak->core_gflops * 1e9);
    }
    if (have_peaks) {
      row["weight_gflop_per_step"] = flops / 1e9 / static_cast<double>(opt.decode_steps);
      row["gflops"] = flops / sec / 1e9;
      row["ratio_to_compute_peak"] = min_wall / sec;
      row["ratio_to_compute_peak_cpu"] = min_cpu / cpu_sec;
    }
    if (!opt.quiet)
      std::printf("  %6lld %10.2f %10.2f %12.3f %12.3f %8.2f %8.1f%% %9.2f %12.1f%% %8.2fx %7.2fx %7.1f%%\n",
                  static_cast<long long>(b), tps, tokens / cpu_sec, bytes / tokens / 1e6, step_bytes / 1e6, gbps,
                  opt.probe_gbps > 0 ? 100.0 * gbps / opt.probe_gbps : 0.0, gb_per_cpu_s,
                  opt.probe_cpu_gbps > 0 ? 100.0 * gb_per_cpu_s / opt.probe_cpu_gbps : 0.0, speedup, ceiling,
                  ceiling > 0 ? 100.0 * speedup / ceiling : 0.0);
    if (!opt.quiet && have_peaks)
      std::printf("  %6s %8.1f GFLOP/s of weight matmuls (%.2f GFLOP/step): %.1f%% of the compute peak, %.1f%% per CPU-second\n",
                  "", flops / sec / 1e9, flops / 1e9 / static_cast<double>(opt.decode_steps), 100.0 * min_wall / sec,
                  100.0 * min_cpu / cpu_sec);
    if (!opt.quiet)
      std::printf("  %6s where the time went (the caller's view; GB/s: each phase's weight bytes over its own wall, of\n"
                  "  %6s probe/cpu: its bytes per CPU-second over the probe's):\n", "", "");
    row["phases"] = profile_report(prof, tokens, opt.probe_gbps, opt.probe_cpu_gbps, opt.quiet);
    row["phase_profile"] = profile_cost(prof, tokens, opt.quiet);
    rows.push_back(row);
  }
  j["decode"] = rows;
  check_reclaim(*model->weights().checkpoint, faults_at_load, &j["weights"], opt.quiet);
  return j;
}

}  // namespace dsv4::cli::bench
