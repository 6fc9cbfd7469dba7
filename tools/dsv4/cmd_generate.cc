// tools: `dsv4 generate` — generate tokens from a model on the reference forward path: prefill the
// prompt, then decode one token at a time, greedy (temperature 0) or sampled, printing ids as they come.
// Text prompts need the tokenizer (src/tokenizer), which this build does not have yet: use --prompt-ids.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "command.h"
#include "model/model.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage =
    "usage: dsv4 generate --model DIR (--prompt TEXT | --prompt-ids IDS) [-n N] [--temperature T] [--seed S]\n"
    "                     [--ignore-eos]\n"
    "  IDS: token ids separated by commas or spaces, or a file holding them\n"
    "  -n N            tokens to generate (default 16)\n"
    "  --temperature   0 = greedy (default); > 0 samples from softmax(logits / T)\n"
    "  --seed          sampling seed (default 0)\n"
    "  --ignore-eos    keep going after the end-of-sequence token\n";

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
  if (a.get("--prompt"))
    return unimplemented("cli.no_tokenizer", "text prompts need the tokenizer, not in this build yet; use --prompt-ids");
  auto ids_arg = a.get("--prompt-ids");
  if (!ids_arg) return invalid_argument("cli.missing_flag", "--prompt or --prompt-ids is required");
  std::string ids_text = *ids_arg;
  if (std::ifstream f(*ids_arg); f) {
    std::stringstream ss;
    ss << f.rdbuf();
    ids_text = ss.str();
  }
  DSV4_ASSIGN_OR_RETURN(auto prompt, parse_token_ids(ids_text));
  if (prompt.empty()) return invalid_argument("cli.prompt_empty", "the prompt holds no token ids");
  DSV4_ASSIGN_OR_RETURN(int64_t n_new, a.get_int("--n", 16, 0, int64_t{1} << 30));
  DSV4_ASSIGN_OR_RETURN(double temperature, a.get_double("--temperature", 0.0, 0.0, 100.0));
  DSV4_ASSIGN_OR_RETURN(int64_t seed, a.get_int("--seed", 0, 0, INT64_MAX));
  const bool ignore_eos = a.has("--ignore-eos");

  DSV4_ASSIGN_OR_RETURN(auto model, Model::load(*model_dir));
  const int64_t V = model->config().vocab_size;
  auto seq = model->new_sequence();
  SequenceState* states[] = {seq.get()};
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i)
    batch.push_back({0, static_cast<int32_t>(i), prompt[i], i + 1 == prompt.size()});
  std::vector<float> logits;
  for (int64_t k = 0; k < n_new; ++k) {
    DSV4_RETURN_IF_ERROR(model->forward(batch, states, &logits));
    const int32_t next = pick_token(logits.data(), V, temperature, rng);
    std::printf("%s%d", k ? " " : "", next);
    std::fflush(stdout);
    if (next == model->config().eos_token_id && !ignore_eos) break;
    batch = {{0, static_cast<int32_t>(seq->n_tokens()), next, true}};
  }
  std::printf("\n");
  return Status::ok();
}

int cmd_generate(int argc, char** argv) {
  // The shared parser knows only "--flags": spell the short "-n" as "--n" for it.
  std::vector<std::string> storage(argv, argv + argc);
  std::vector<char*> av;
  for (auto& a : storage) {
    if (a == "-n") a = "--n";
    av.push_back(a.data());
  }
  auto args = Args::parse(argc, av.data(), {"--model", "--prompt", "--prompt-ids", "--n", "--temperature", "--seed"},
                          {"--ignore-eos", "--help"});
  if (args.is_ok() && !args->positional().empty())
    args = Result<Args>(invalid_argument("cli.positional", "unexpected argument '" + args->positional()[0] + "'"));
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    return report_error("generate", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const Status s = run(*args);
  if (!s.is_ok()) return report_error("generate", s);
  return 0;
}

}  // namespace

DSV4_COMMAND("generate", "generate tokens on the reference forward path (greedy or sampled)", cmd_generate);

}  // namespace dsv4::cli
