// tools: `dsv4 generate --batch-file` (also spelled `dsv4 generate-batch`) — serve a file of requests
// through the runtime (continuous batching, chunked prefill, optional MTP speculation and prefix cache)
// and report throughput, acceptance per draft position and pool usage. One JSON object per line: {"prompt_ids": [..], "max_tokens": N,
// "temperature": T, "seed": S} (only prompt_ids is required).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.h"
#include "generate_batch.h"
#include "model_flags.h"
#include "command.h"
#include "runtime/engine_core.h"
#include "runtime/model_model_runner.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage =
    "usage: dsv4 generate --model DIR --batch-file PROMPTS.jsonl [--concurrency N] [--speculative K]\n"
    "       (or dsv4 generate-batch)   [--max-tokens N] [--batch-tokens N] [--pool-mib M] [--prefix-cache N]\n"
    "                           [--ignore-eos] [--quiet] [--backend cpu|reference] [--threads N] [--isa ISA]\n"
    "  PROMPTS.jsonl   one request per line: {\"prompt_ids\": [1, 2, 3], \"max_tokens\": 16, \"temperature\": 0,\n"
    "                  \"seed\": 7}; max_tokens defaults to --max-tokens (16), temperature to 0 (greedy)\n"
    "  --concurrency   sequences decoded together (default 4)\n"
    "  --speculative   MTP draft tokens per step (default 0: off)\n"
    "  --batch-tokens  tokens per forward: prefill chunks + decodes (default 256)\n"
    "  --pool-mib      state budget in MiB (default 1024)\n"
    "  --prefix-cache  finished sequences kept for prefix reuse (default 0)\n";

Result<std::vector<GenerationRequest>> read_requests(const std::string& path, int64_t default_max, bool ignore_eos) {
  std::ifstream f(path);
  if (!f) return io_error("cli.batch_file", "cannot open " + path);
  std::vector<GenerationRequest> reqs;
  std::string line;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return invalid_argument("cli.batch_line", where + "not a JSON object");
    if (!j.contains("prompt_ids") || !j["prompt_ids"].is_array())
      return invalid_argument("cli.batch_line", where + "\"prompt_ids\" (an array of token ids) is required");
    GenerationRequest r;
    for (const auto& v : j["prompt_ids"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        return invalid_argument("cli.batch_line", where + "prompt_ids holds a non-token value");
      r.prompt_ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    r.stop.max_tokens = static_cast<int32_t>(default_max);
    if (j.contains("max_tokens")) {
      if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1 || j["max_tokens"].get<int64_t>() > (1 << 24))
        return invalid_argument("cli.batch_line", where + "max_tokens must be an integer >= 1");
      r.stop.max_tokens = static_cast<int32_t>(j["max_tokens"].get<int64_t>());
    }
    r.sampling.temperature = 0.0f;
    if (j.contains("temperature")) {
      if (!j["temperature"].is_number()) return invalid_argument("cli.batch_line", where + "temperature must be a number");
      r.sampling.temperature = j["temperature"].get<float>();
    }
    if (j.contains("seed")) {
      if (!j["seed"].is_number_unsigned()) return invalid_argument("cli.batch_line", where + "seed must be an unsigned integer");
      r.sampling.seed = j["seed"].get<uint64_t>();
    }
    r.stop.ignore_eos = ignore_eos;
    reqs.push_back(std::move(r));
  }
  if (reqs.empty()) return invalid_argument("cli.batch_empty", path + " holds no requests");
  return reqs;
}

Status run(const Args& a) {
  const auto model_dir = a.get("--model");
  const auto batch_file = a.get("--batch-file");
  if (!model_dir || !batch_file) return invalid_argument("cli.missing_flag", "--model and --batch-file are required");
  DSV4_ASSIGN_OR_RETURN(int64_t concurrency, a.get_int("--concurrency", 4, 1, 4096));
  DSV4_ASSIGN_OR_RETURN(int64_t spec_k, a.get_int("--speculative", 0, 0, 16));
  DSV4_ASSIGN_OR_RETURN(int64_t max_tokens, a.get_int("--max-tokens", 16, 1, 1 << 24));
  DSV4_ASSIGN_OR_RETURN(int64_t batch_tokens, a.get_int("--batch-tokens", 256, 1 + spec_k, 1 << 20));
  DSV4_ASSIGN_OR_RETURN(int64_t pool_mib, a.get_int("--pool-mib", 1024, 1, int64_t{1} << 24));
  DSV4_ASSIGN_OR_RETURN(int64_t prefix_cache, a.get_int("--prefix-cache", 0, 0, 4096));
  const bool quiet = a.has("--quiet");
  DSV4_ASSIGN_OR_RETURN(auto reqs, read_requests(*batch_file, max_tokens, a.has("--ignore-eos")));

  DSV4_ASSIGN_OR_RETURN(ModelOptions mopt, parse_model_options(a, kernels::batch_invariant_isa()));
  DSV4_ASSIGN_OR_RETURN(auto runner, ModelModelRunner::load(*model_dir, mopt));
  if (spec_k > 0 && !runner->info().has_mtp)
    return invalid_argument("cli.no_mtp", "--speculative needs a checkpoint with an MTP module");
  EngineCoreOptions opt;
  opt.max_batch_tokens = static_cast<int32_t>(batch_tokens);
  opt.max_running = static_cast<int32_t>(concurrency);
  opt.speculative_k = static_cast<int32_t>(spec_k);
  opt.pool_bytes = pool_mib << 20;
  opt.prefix_cache_entries = static_cast<int32_t>(prefix_cache);
  DSV4_RETURN_IF_ERROR(plan_pool(runner->info().footprint, opt.pool_bytes, opt.block_tokens).status());
  EngineCore core(runner.get(), nullptr, opt);

  std::vector<std::vector<int32_t>> out(reqs.size());
  std::vector<FinishReason> finish(reqs.size(), FinishReason::kNone);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Status st = core.add(i + 1, reqs[i], [&out, &finish, i](const GenerationUpdate& u) {
      for (const auto& e : u.tokens) out[i].push_back(e.token);
      finish[i] = u.finish;
    });
    if (!st.is_ok()) return Status(st.code(), st.rule(), "request " + std::to_string(i + 1) + ": " + st.message());
  }
  int32_t peak_used = 0;
  int64_t peak_page_bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (core.has_work()) {
    DSV4_RETURN_IF_ERROR(core.step());
    peak_used = std::max(peak_used, core.pool().total() - core.pool().free_count());
    peak_page_bytes = std::max(peak_page_bytes, runner->memory().bytes_in_use());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (!quiet) {
    for (size_t i = 0; i < out.size(); ++i) {
      std::printf("request %zu:", i + 1);
      for (int32_t t : out[i]) std::printf(" %d", t);
      std::printf("\n");
    }
  }
  const CoreStats& s = core.stats();
  std::printf("requests %zu  concurrency %lld  speculative %lld\n", reqs.size(), static_cast<long long>(concurrency),
              static_cast<long long>(spec_k));
  std::printf("prompt tokens %lld  generated tokens %lld  forward tokens %lld  steps %lld  preemptions %lld\n",
              static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.generated_tokens),
              static_cast<long long>(s.forward_tokens), static_cast<long long>(s.steps),
              static_cast<long long>(s.preemptions));
  std::printf("wall %.3f s  generated %.2f tok/s  processed (prompt + generated) %.2f tok/s\n", secs,
              static_cast<double>(s.generated_tokens) / secs,
              static_cast<double>(s.prompt_tokens + s.generated_tokens) / secs);
  // Position j is verified only when every earlier draft of its step was accepted, so its count can be 0.
  for (size_t j = 0; j < static_cast<size_t>(spec_k); ++j) {
    const int64_t proposed = j < s.spec.proposed.size() ? s.spec.proposed[j] : 0;
    const int64_t accepted = j < s.spec.accepted.size() ? s.spec.accepted[j] : 0;
    std::printf("draft position %zu: accepted %lld of %lld verified (%.1f%%)\n", j, static_cast<long long>(accepted),
                static_cast<long long>(proposed),
                proposed ? 100.0 * static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0);
  }
  if (spec_k > 0) std::printf("acceptance %.1f%%\n", 100.0 * s.spec.acceptance());
  const PoolPlan& p = core.plan();
  std::printf("pool: %d blocks of %d tokens (%lld B), %d per sequence fixed; peak %d used (%.1f%%)\n", p.n_blocks,
              p.block_tokens, static_cast<long long>(p.block_bytes), p.seq_blocks, peak_used,
              100.0 * peak_used / std::max(1, p.n_blocks));
  std::printf("state bytes: window rings %lld/seq, compressor partials %lld/seq, compressed main %lld/token, "
              "indexer keys %lld/token\n",
              static_cast<long long>(p.footprint.window_ring_per_seq),
              static_cast<long long>(p.footprint.compressor_partial_per_seq),
              static_cast<long long>(p.footprint.compressed_main_per_token),
              static_cast<long long>(p.footprint.compressed_indexer_per_token));
  const RunnerMemory mem = runner->memory();
  std::printf("state pages (window and rows FP8 %lld B/page, FP4 indexer keys %lld B/page, fp32 partial blocks): "
              "peak %lld B in use, %lld B held at the end (window %lld, partial %lld, rows+keys %lld)\n",
              static_cast<long long>(mem.kv_page_bytes), static_cast<long long>(mem.index_page_bytes),
              static_cast<long long>(peak_page_bytes), static_cast<long long>(mem.bytes_held()),
              static_cast<long long>(mem.window_bytes_held), static_cast<long long>(mem.partial_bytes_held),
              static_cast<long long>(mem.kv_bytes_held()));
  if (s.prefix_hits > 0)
    std::printf("prefix cache: %lld hits, %lld tokens reused\n", static_cast<long long>(s.prefix_hits),
                static_cast<long long>(s.prefix_hit_tokens));
  return Status::ok();
}

}  // namespace

int run_generate_batch(int argc, char** argv) {
  std::vector<std::string> flags = {"--model", "--batch-file", "--concurrency", "--speculative", "--max-tokens",
                                    "--batch-tokens", "--pool-mib", "--prefix-cache"};
  flags.insert(flags.end(), model_flag_names().begin(), model_flag_names().end());
  auto args = Args::parse(argc, argv, flags, {"--ignore-eos", "--quiet", "--help"});
  if (args.is_ok() && !args->positional().empty())
    args = Result<Args>(invalid_argument("cli.positional", "unexpected argument '" + args->positional()[0] + "'"));
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    std::fputs(model_flags_usage(), stderr);
    return report_error("generate-batch", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    std::fputs(model_flags_usage(), stdout);
    return 0;
  }
  const Status s = run(*args);
  if (!s.is_ok()) return report_error("generate-batch", s);
  return 0;
}

namespace {
int cmd_generate_batch(int argc, char** argv) { return run_generate_batch(argc, argv); }
}  // namespace

DSV4_COMMAND("generate-batch", "serve a JSONL file of requests with continuous batching; report throughput", cmd_generate_batch);

}  // namespace dsv4::cli
