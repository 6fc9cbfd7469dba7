// tools: `dsv4 generate` — generate tokens from a model (cpu kernels or the reference, --backend): prefill
// the prompt, then decode one token at a time, greedy (temperature 0) or sampled; a timing line on stderr. A text prompt is encoded
// with the model's tokenizer.json and the output streamed as text (complete UTF-8 only); --prompt-ids
// prints ids. --dry-run validates the config and prints the memory plan without touching weights.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <chrono>

#include "args.h"
#include "generate_batch.h"
#include "model_flags.h"
#include "process_memory.h"
#include "command.h"
#include "io/model_config.h"
#include "model/cost_model.h"
#include "model/model.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage =
    "usage: dsv4 generate --model DIR (--prompt TEXT | --prompt-ids IDS) [-n N] [--temperature T] [--seed S]\n"
    "                     [--ignore-eos] [--tokenizer PATH] [--dry-run [--ctx-size N]]\n"
    "                     [--backend cpu|reference] [--threads N] [--isa ISA] [--timings]\n"
    "  TEXT: encoded with DIR/tokenizer.json (or --tokenizer), BOS prepended; output printed as text\n"
    "  IDS: token ids separated by commas or spaces, or a file holding them; output printed as ids\n"
    "  -n N            tokens to generate (default 16)\n"
    "  --temperature   0 = greedy (default); > 0 samples from softmax(logits / T)\n"
    "  --seed          sampling seed (default 0)\n"
    "  --ignore-eos    keep going after the end-of-sequence token\n"
    "  --timings       one line on stderr: load, prefill and decode seconds and tokens/s, peak and\n"
    "                  anonymous RSS (the latter excludes the file-backed checkpoint mapping)\n"
    "  --dry-run       validate DIR's config (or a config.json) and print the memory plan; no weights read\n"
    "  --ctx-size N    context the plan is made for (default: the model's max_position_embeddings)\n"
    "       dsv4 generate --model DIR --batch-file PROMPTS.jsonl [--concurrency N] [--speculative K] ...\n"
    "  many requests through the engine (continuous batching, MTP speculation, prefix cache), then\n"
    "  throughput, acceptance per draft position and pool usage: see dsv4 generate --batch-file F --help\n";

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) b /= 1024.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", b, units[u]);
  return buf;
}

// The memory a run of this config needs, from the config alone (spec §4 state layout).
Status dry_run(const std::string& model_path, const Args& a) {
  DSV4_ASSIGN_OR_RETURN(ModelConfig cfg, load_model_config(model_path));
  DSV4_ASSIGN_OR_RETURN(int64_t ctx, a.get_int("--ctx-size", cfg.max_position_embeddings, 1, int64_t{1} << 24));
  const ParamCost params = param_cost(cfg);
  std::printf("config: %s — valid (%lld layers + %lld MTP, vocab %lld)\n", model_path.c_str(),
              static_cast<long long>(cfg.n_layers), static_cast<long long>(cfg.n_mtp_layers),
              static_cast<long long>(cfg.vocab_size));
  std::printf("weights as shipped:        %s (%.2fB params, %.2fB active per token)\n",
              human_bytes(static_cast<double>(params.bytes_total)).c_str(), params.params_total / 1e9,
              params.params_active_per_token / 1e9);
  for (KvLayout layout : {KvLayout::kBf16Reference, KvLayout::kFp8}) {
    const KvCost kv = kv_cost(cfg, ctx, layout);
    std::printf("KV/state per sequence at %lld tokens (%s): %s (window %s, compressed %s, indexer %s, state %s)\n",
                static_cast<long long>(ctx), std::string(kv_layout_name(layout)).c_str(),
                human_bytes(static_cast<double>(kv.bytes_at_context)).c_str(),
                human_bytes(static_cast<double>(kv.window_bytes)).c_str(),
                human_bytes(static_cast<double>(kv.compressed_bytes)).c_str(),
                human_bytes(static_cast<double>(kv.indexer_bytes)).c_str(),
                human_bytes(static_cast<double>(kv.state_bytes)).c_str());
  }
  return Status::ok();
}

// Greedy: the first maximal logit. Sampled: inverse-CDF draw from softmax(logits / T), in float64.
int32_t pick_token(const float* logits, int64_t vocab, double temperature, std::mt19937_64& rng) {
  int64_t best = 0;
  for (int64_t j = 1; j < vocab; ++j)
    if (logits[j] > logits[best]) best = j;
  if (temperature <= 0.0) return static_cast<int32_t>(best);
  std::vector<double> p(static_cast<size_t>(vocab));
  double sum = 0.0;
  for (int64_t j = 0; j < vocab; ++j) sum += p[static_cast<size_t>(j)] = std::exp((logits[j] - logits[best]) / temperature);
  const double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  double acc = 0.0;
  for (int64_t j = 0; j < vocab; ++j) {
    acc += p[static_cast<size_t>(j)];
    if (u < acc) return static_cast<int32_t>(j);
  }
  return static_cast<int32_t>(best);
}

Status run(const Args& a) {
  const auto model_dir = a.get("--model");
  if (!model_dir) return invalid_argument("cli.missing_flag", "--model is required");
  if (a.get("--prompt") && a.get("--prompt-ids"))
    return invalid_argument("cli.prompt_both", "give either --prompt or --prompt-ids, not both");
  if (a.has("--dry-run")) return dry_run(*model_dir, a);
  const auto text_prompt = a.get("--prompt");
  auto ids_arg = a.get("--prompt-ids");
  if (!text_prompt && !ids_arg) return invalid_argument("cli.missing_flag", "--prompt or --prompt-ids is required");
  std::optional<Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
  if (text_prompt) {
    const std::string tok_path = a.get_or("--tokenizer", (std::filesystem::path(*model_dir) / "tokenizer.json").string());
    auto tok = Tokenizer::load(tok_path);
    if (!tok.is_ok())
      return Status(tok.status().code(), tok.status().rule(),
                    "a text prompt needs the model's tokenizer: " + tok.status().message() + " (or use --prompt-ids)");
    tokenizer = std::move(tok).value();
  } else {
    std::string ids_text = *ids_arg;
    if (std::ifstream f(*ids_arg); f) {
      std::stringstream ss;
      ss << f.rdbuf();
      ids_text = ss.str();
    }
    DSV4_ASSIGN_OR_RETURN(prompt, parse_token_ids(ids_text));
    if (prompt.empty()) return invalid_argument("cli.prompt_empty", "the prompt holds no token ids");
  }
  DSV4_ASSIGN_OR_RETURN(int64_t n_new, a.get_int("--n", 16, 0, int64_t{1} << 30));
  DSV4_ASSIGN_OR_RETURN(double temperature, a.get_double("--temperature", 0.0, 0.0, 100.0));
  DSV4_ASSIGN_OR_RETURN(int64_t seed, a.get_int("--seed", 0, 0, INT64_MAX));
  const bool ignore_eos = a.has("--ignore-eos");

  DSV4_ASSIGN_OR_RETURN(ModelOptions mopt, parse_model_options(a));
  using Clock = std::chrono::steady_clock;
  const auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const auto t_load = Clock::now();
  DSV4_ASSIGN_OR_RETURN(auto model, Model::load(*model_dir, mopt));
  const double load_s = secs(Clock::now() - t_load);
  const int64_t V = model->config().vocab_size;
  if (tokenizer) {
    // Raw completion prompt: BOS then the text, user text never forging special tokens.
    prompt = tokenizer->encode(*text_prompt, /*allow_special=*/false);
    prompt.insert(prompt.begin(), static_cast<int32_t>(model->config().bos_token_id));
    for (int32_t id : prompt)
      if (id < 0 || id >= V)
        return invalid_argument("cli.tokenizer_vocab", "the tokenizer produced id " + std::to_string(id) +
                                                           " outside the model's vocabulary of " + std::to_string(V));
  }
  std::optional<StreamDecoder> decoder;
  if (tokenizer) decoder.emplace(*tokenizer);
  auto seq = model->new_sequence();
  SequenceState* states[] = {seq.get()};
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i)
    batch.push_back({0, static_cast<int32_t>(i), prompt[i], i + 1 == prompt.size()});
  std::vector<float> logits;
  // The first forward is the prefill (the whole prompt), every later one decodes one token.
  double prefill_s = 0.0, decode_s = 0.0;
  int64_t n_prefill = 0, n_decode = 0;
  for (int64_t k = 0; k < n_new; ++k) {
    const auto t0 = Clock::now();
    DSV4_RETURN_IF_ERROR(model->forward(batch, states, &logits));
    (k == 0 ? prefill_s : decode_s) += secs(Clock::now() - t0);
    (k == 0 ? n_prefill : n_decode) += static_cast<int64_t>(batch.size());
    const int32_t next = pick_token(logits.data(), V, temperature, rng);
    const bool eos = next == model->config().eos_token_id;
    if (decoder) {
      if (!eos) std::fputs(decoder->push(next).c_str(), stdout);
    } else {
      std::printf("%s%d", k ? " " : "", next);
    }
    std::fflush(stdout);
    if (eos && !ignore_eos) break;
    batch = {{0, static_cast<int32_t>(seq->n_tokens()), next, true}};
  }
  if (decoder) std::fputs(decoder->flush().c_str(), stdout);
  std::printf("\n");
  std::fflush(stdout);
  if (!a.has("--timings")) return Status::ok();
  const auto rate = [](int64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; };
  std::fprintf(stderr,
               "timing: backend %s threads %d isa %s | load %.3f s | prefill %lld tok %.3f s %.2f tok/s | "
               "decode %lld tok %.3f s %.2f tok/s | peak RSS %.1f MiB, anon RSS %.1f MiB\n",
               backend_name(mopt.backend), model->threads(),
               kernels::isa_name(mopt.backend == Backend::kCpu ? kernels::resolve_isa(mopt.isa) : kernels::Isa::kScalar),
               load_s, static_cast<long long>(n_prefill), prefill_s, rate(n_prefill, prefill_s),
               static_cast<long long>(n_decode), decode_s, rate(n_decode, decode_s), peak_rss_bytes() / 1048576.0,
               anon_rss_bytes() / 1048576.0);
  return Status::ok();
}

int cmd_generate(int argc, char** argv) {
  // --batch-file switches to the engine-driven batch mode, which has its own flags.
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--batch-file" || std::string_view(argv[i]).starts_with("--batch-file="))
      return run_generate_batch(argc, argv);
  // The shared parser knows only "--flags": spell the short "-n" as "--n" for it.
  std::vector<std::string> storage(argv, argv + argc);
  std::vector<char*> av;
  for (auto& a : storage) {
    if (a == "-n") a = "--n";
    av.push_back(a.data());
  }
  std::vector<std::string> flags = {"--model", "--prompt", "--prompt-ids", "--n", "--temperature", "--seed",
                                    "--tokenizer", "--ctx-size"};
  flags.insert(flags.end(), model_flag_names().begin(), model_flag_names().end());
  auto args = Args::parse(argc, av.data(), flags, {"--ignore-eos", "--help", "--dry-run", "--timings"});
  if (args.is_ok() && !args->positional().empty())
    args = Result<Args>(invalid_argument("cli.positional", "unexpected argument '" + args->positional()[0] + "'"));
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    std::fputs(model_flags_usage(), stderr);
    return report_error("generate", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    std::fputs(model_flags_usage(), stdout);
    return 0;
  }
  const Status s = run(*args);
  if (!s.is_ok()) return report_error("generate", s);
  return 0;
}

}  // namespace

DSV4_COMMAND("generate", "generate tokens (greedy or sampled) with a timing summary", cmd_generate);

}  // namespace dsv4::cli
