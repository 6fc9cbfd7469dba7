// tools: `dsv4 bench-engine` — aggregate throughput of the whole runtime (continuous batching, chunked
// prefill, optional prefix cache and MTP speculation) at several concurrency levels on one loaded model.
// A benchmark, not a test: the same synthetic requests (mixed prompt lengths, optionally behind one
// shared prefix) run at each level; it reports tokens/s, step shape, pool and page usage, prefix and
// speculation stats, and whether every level produced the same greedy tokens (batch invariance).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.h"
#include "command.h"
#include "model_flags.h"
#include "runtime/engine_core.h"
#include "runtime/model_model_runner.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage =
    "usage: dsv4 bench-engine --model DIR [--concurrency 1,4,16] [--requests N] [--prompt-lengths 16,64,200]\n"
    "                         [--max-tokens N] [--shared-prefix N] [--prefix-cache N] [--speculative K]\n"
    "                         [--batch-tokens N] [--state-budget-mib M] [--checkpoint-interval N] [--seed S]\n"
    "                         [--json]\n"
    "  Runs the same synthetic greedy requests through the engine at each concurrency level (sequences\n"
    "  running at once) and reports aggregate tokens/s. Each level runs max(--requests, concurrency)\n"
    "  requests (default 16); request i has prompt length lengths[i % n] (default 16,64,200: mixed prefill\n"
    "  and decode in the same steps), preceded by --shared-prefix tokens common to all (default 0), and\n"
    "  generates --max-tokens tokens (default 16, EOS ignored).\n"
    "  --prefix-cache N     finished sequences kept for prefix reuse (default 0: off)\n"
    "  --checkpoint-interval N  tokens between the prefix cache's state checkpoints (default: the model's,\n"
    "                       the smallest multiple of its window and compression ratios >= 256)\n"
    "  --speculative K      MTP draft tokens per step (default 0: off)\n"
    "  --batch-tokens N     tokens per forward (default 256)\n"
    "  --state-budget-mib M state budget binding admission and the model's page pools (default 1024)\n"
    "  --json               one JSON object on stdout instead of the table\n";

Result<std::vector<int64_t>> int_list(const Args& a, const std::string& flag, const std::string& def, int64_t lo, int64_t hi) {
  const std::string text = a.get_or(flag, def);
  std::vector<int64_t> out;
  size_t i = 0;
  while (i <= text.size()) {
    const size_t j = std::min(text.find(',', i), text.size());
    const std::string item = text.substr(i, j - i);
    char* end = nullptr;
    const long long v = item.empty() ? 0 : std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < lo || v > hi) {
      return invalid_argument("cli.bad_list", flag + " takes integers in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                                  "] separated by commas, got '" + text + "'");
    }
    out.push_back(v);
    i = j + 1;
  }
  return out;
}

uint64_t next_random(uint64_t& s) {  // splitmix64
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Level {
  int64_t concurrency = 0;
  int64_t requests = 0;
  double seconds = 0;
  CoreStats stats;
  double mean_latency_s = 0;
  int32_t peak_blocks = 0;
  int32_t total_blocks = 0;
  int64_t peak_page_bytes = 0;
  int64_t peak_checkpoints = 0;
  int64_t replayed_tokens = 0;
  bool same_tokens = true;  // as the first level, for the requests both ran
};

Status run(const Args& a) {
  const auto model_dir = a.get("--model");
  if (!model_dir) return invalid_argument("cli.missing_flag", "--model is required");
  DSV4_ASSIGN_OR_RETURN(auto levels, int_list(a, "--concurrency", "1,4,16", 1, 4096));
  DSV4_ASSIGN_OR_RETURN(auto lengths, int_list(a, "--prompt-lengths", "16,64,200", 1, 1 << 20));
  DSV4_ASSIGN_OR_RETURN(int64_t n_requests, a.get_int("--requests", 16, 1, 1 << 16));
  DSV4_ASSIGN_OR_RETURN(int64_t max_tokens, a.get_int("--max-tokens", 16, 1, 1 << 20));
  DSV4_ASSIGN_OR_RETURN(int64_t shared, a.get_int("--shared-prefix", 0, 0, 1 << 20));
  DSV4_ASSIGN_OR_RETURN(int64_t prefix_cache, a.get_int("--prefix-cache", 0, 0, 4096));
  DSV4_ASSIGN_OR_RETURN(int64_t spec_k, a.get_int("--speculative", 0, 0, 16));
  DSV4_ASSIGN_OR_RETURN(int64_t batch_tokens, a.get_int("--batch-tokens", 256, 1 + spec_k, 1 << 20));
  DSV4_ASSIGN_OR_RETURN(int64_t budget_mib, a.get_int("--state-budget-mib", 1024, 1, int64_t{1} << 24));
  DSV4_ASSIGN_OR_RETURN(int64_t seed, a.get_int("--seed", 1, 0, INT64_MAX));
  DSV4_ASSIGN_OR_RETURN(int64_t interval, a.get_int("--checkpoint-interval", 0, 0, 1 << 20));
  const bool json = a.has("--json");

  DSV4_ASSIGN_OR_RETURN(ModelOptions mopt, parse_model_options(a, kernels::batch_invariant_isa()));
  DSV4_ASSIGN_OR_RETURN(auto runner, ModelModelRunner::load(*model_dir, mopt));
  if (interval > 0) runner->set_checkpoint_interval(static_cast<int32_t>(interval));
  const RunnerInfo& info = runner->info();
  if (spec_k > 0 && !info.has_mtp) return invalid_argument("cli.no_mtp", "--speculative needs a checkpoint with an MTP module");

  // The same requests at every level: random ids away from the special tokens at the low end.
  const int64_t most = std::max<int64_t>(n_requests, *std::max_element(levels.begin(), levels.end()));
  uint64_t rng = static_cast<uint64_t>(seed);
  const auto vocab = static_cast<uint64_t>(std::max<int32_t>(info.vocab_size - 16, 1));
  std::vector<int32_t> prefix;
  for (int64_t i = 0; i < shared; ++i) prefix.push_back(static_cast<int32_t>(16 + next_random(rng) % vocab));
  std::vector<GenerationRequest> all;
  for (int64_t i = 0; i < most; ++i) {
    GenerationRequest r;
    r.prompt_ids = prefix;
    for (int64_t j = 0; j < lengths[static_cast<size_t>(i) % lengths.size()]; ++j)
      r.prompt_ids.push_back(static_cast<int32_t>(16 + next_random(rng) % vocab));
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = static_cast<int32_t>(max_tokens);
    r.stop.ignore_eos = true;
    all.push_back(std::move(r));
  }

  std::vector<Level> results;
  std::vector<std::vector<int32_t>> first_tokens;
  for (int64_t c : levels) {
    EngineCoreOptions opt;
    opt.max_batch_tokens = static_cast<int32_t>(batch_tokens);
    opt.max_running = static_cast<int32_t>(c);
    opt.speculative_k = static_cast<int32_t>(spec_k);
    opt.pool_bytes = budget_mib << 20;
    opt.prefix_cache_entries = static_cast<int32_t>(prefix_cache);
    DSV4_RETURN_IF_ERROR(plan_pool(info.footprint, opt.pool_bytes, opt.block_tokens).status());
    Level lv;
    lv.concurrency = c;
    lv.requests = std::max(n_requests, c);
    const int64_t replayed0 = runner->prefix_replayed_tokens();
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(lv.requests));
    std::vector<double> done_at(static_cast<size_t>(lv.requests), 0.0);
    const auto t0 = std::chrono::steady_clock::now();
    auto now = [&t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    {
      EngineCore core(runner.get(), nullptr, opt);
      for (int64_t i = 0; i < lv.requests; ++i) {
        const auto k = static_cast<size_t>(i);
        const Status st = core.add(static_cast<RequestId>(i + 1), all[k], [&tokens, &done_at, &now, k](const GenerationUpdate& u) {
          for (const auto& e : u.tokens) tokens[k].push_back(e.token);
          if (u.finish != FinishReason::kNone) done_at[k] = now();
        });
        if (!st.is_ok()) return Status(st.code(), st.rule(), "request " + std::to_string(i + 1) + ": " + st.message());
      }
      while (core.has_work()) {
        DSV4_RETURN_IF_ERROR(core.step());
        lv.peak_blocks = std::max(lv.peak_blocks, core.pool().total() - core.pool().free_count());
        lv.peak_page_bytes = std::max(lv.peak_page_bytes, runner->memory().bytes_in_use());
        lv.peak_checkpoints = std::max(lv.peak_checkpoints, runner->checkpoints_held());
      }
      lv.seconds = now();
      lv.stats = core.stats();
      lv.total_blocks = core.pool().total();
    }
    lv.replayed_tokens = runner->prefix_replayed_tokens() - replayed0;
    for (double t : done_at) lv.mean_latency_s += t / static_cast<double>(lv.requests);
    if (first_tokens.empty()) first_tokens = tokens;
    for (size_t i = 0; i < std::min(first_tokens.size(), tokens.size()); ++i) lv.same_tokens &= tokens[i] == first_tokens[i];
    results.push_back(lv);
    if (!json) {
      const CoreStats& s = lv.stats;
      std::printf("concurrency %3lld: %lld requests, %.2f s: generated %.2f tok/s, prompt+generated %.2f tok/s, "
                  "mean latency %.2f s\n",
                  static_cast<long long>(c), static_cast<long long>(lv.requests), lv.seconds,
                  static_cast<double>(s.generated_tokens) / lv.seconds,
                  static_cast<double>(s.prompt_tokens + s.generated_tokens) / lv.seconds, lv.mean_latency_s);
      std::printf("    steps %lld (%.1f rows/step), preemptions %lld, refused forwards %lld; pool peak %d of %d blocks, "
                  "state pages peak %.2f MiB (all kinds)\n",
                  static_cast<long long>(s.steps), static_cast<double>(s.forward_tokens) / std::max<int64_t>(1, s.steps),
                  static_cast<long long>(s.preemptions), static_cast<long long>(s.forward_retries), lv.peak_blocks,
                  lv.total_blocks, static_cast<double>(lv.peak_page_bytes) / (1 << 20));
      if (prefix_cache > 0)
        std::printf("    prefix cache: %lld hits, %lld tokens reused, %lld replayed by the hits (checkpoint every %d), "
                    "checkpoints peak %lld\n",
                    static_cast<long long>(s.prefix_hits), static_cast<long long>(s.prefix_hit_tokens),
                    static_cast<long long>(lv.replayed_tokens), runner->info().checkpoint_interval,
                    static_cast<long long>(lv.peak_checkpoints));
      if (spec_k > 0) std::printf("    speculation: acceptance %.1f%%\n", 100.0 * s.spec.acceptance());
      std::printf("    tokens identical to concurrency %lld: %s\n", static_cast<long long>(levels[0]),
                  lv.same_tokens ? "yes" : "NO");
      std::fflush(stdout);
    }
  }
  if (json) {
    nlohmann::json out;
    out["model"] = *model_dir;
    out["max_tokens"] = max_tokens;
    out["prompt_lengths"] = lengths;
    out["shared_prefix"] = shared;
    out["speculative"] = spec_k;
    out["prefix_cache"] = prefix_cache;
    out["checkpoint_interval"] = runner->info().checkpoint_interval;
    out["threads"] = runner->model().threads();
    for (const Level& lv : results) {
      const CoreStats& s = lv.stats;
      nlohmann::json j;
      j["concurrency"] = lv.concurrency;
      j["requests"] = lv.requests;
      j["seconds"] = lv.seconds;
      j["generated_tokens"] = s.generated_tokens;
      j["prompt_tokens"] = s.prompt_tokens;
      j["generated_tok_per_s"] = static_cast<double>(s.generated_tokens) / lv.seconds;
      j["total_tok_per_s"] = static_cast<double>(s.prompt_tokens + s.generated_tokens) / lv.seconds;
      j["mean_latency_s"] = lv.mean_latency_s;
      j["steps"] = s.steps;
      j["forward_tokens"] = s.forward_tokens;
      j["preemptions"] = s.preemptions;
      j["refused_forwards"] = s.forward_retries;
      j["pool_blocks_peak"] = lv.peak_blocks;
      j["pool_blocks_total"] = lv.total_blocks;
      j["state_page_bytes_peak"] = lv.peak_page_bytes;
      j["prefix_hits"] = s.prefix_hits;
      j["prefix_hit_tokens"] = s.prefix_hit_tokens;
      j["replayed_tokens"] = lv.replayed_tokens;
      j["checkpoints_peak"] = lv.peak_checkpoints;
      j["spec_acceptance"] = s.spec.acceptance();
      j["tokens_identical_to_first_level"] = lv.same_tokens;
      out["runs"].push_back(j);
    }
    std::printf("%s\n", out.dump(2).c_str());
  }
  return Status::ok();
}

int cmd_bench_engine(int argc, char** argv) {
  std::vector<std::string> flags = {"--model", "--concurrency", "--requests", "--prompt-lengths", "--max-tokens",
                                    "--shared-prefix", "--prefix-cache", "--speculative", "--batch-tokens",
                                    "--state-budget-mib", "--seed", "--checkpoint-interval"};
  flags.insert(flags.end(), model_flag_names().begin(), model_flag_names().end());
  auto args = Args::parse(argc, argv, flags, {"--json", "--help"});
  if (args.is_ok() && !args->positional().empty())
    args = Result<Args>(invalid_argument("cli.positional", "unexpected argument '" + args->positional()[0] + "'"));
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    std::fputs(model_flags_usage(), stderr);
    return report_error("bench-engine", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    std::fputs(model_flags_usage(), stdout);
    return 0;
  }
  const Status s = run(*args);
  if (!s.is_ok()) return report_error("bench-engine", s);
  return 0;
}

}  // namespace

DSV4_COMMAND("bench-engine", "aggregate tokens/s of the engine at several concurrency levels (continuous batching)",
             cmd_bench_engine);

}  // namespace dsv4::cli
