// tools: `dsv4 logits` — the acceptance interface of the forward pass: logits of a token sequence (one
// prefill, prefill + decode, or chunked), MTP logits, golden-layout intermediates, and module-level
// teacher forcing against a golden directory (golden/README.md).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "args.h"
#include "model_flags.h"
#include "command.h"
#include "io/npy.h"
#include "model/deepseek_v4/teacher.h"
#include "model/model.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage =
    "usage: dsv4 logits --model DIR --ids FILE --out OUT.npy [--prefill N] [--chunk C] [--mtp-out MTP.npy]\n"
    "                   [--teacher GOLDEN_DIR] [--dump-intermediates DIR] [--backend cpu|reference] [--threads N]\n"
    "                   [--isa ISA]\n"
    "  FILE: whitespace-separated token ids. OUT.npy: float32 [n_ids, vocab], the logits after each position.\n"
    "  --prefill N   prefill the first N ids, then feed the rest one at a time (decode path)\n"
    "  --chunk C     prefill in chunks of C ids\n"
    "  --mtp-out     float32 [n_ids-1, vocab]: MTP fed the final streams at i and the embedding of id i+1\n"
    "  --teacher     module-level teacher forcing on the golden inputs in GOLDEN_DIR; --out / --mtp-out then\n"
    "                hold the head and MTP logits on the golden final streams\n"
    "  --dump-intermediates DIR  write the golden intermediates (L{L}_*.npy) of a one-shot prefill\n";

Result<std::vector<int32_t>> read_ids(const std::string& path) {
  std::ifstream f(path);
  if (!f) return not_found("cli.ids_file", "cannot open ids file " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  DSV4_ASSIGN_OR_RETURN(auto ids, parse_token_ids(ss.str()));
  if (ids.empty()) return invalid_argument("cli.ids_empty", path + " holds no token ids");
  return ids;
}

Status run(const Args& a) {
  const auto model_dir = a.get("--model"), ids_path = a.get("--ids"), out = a.get("--out");
  if (!model_dir || !ids_path || !out) return invalid_argument("cli.missing_flag", "--model, --ids and --out are required");
  DSV4_ASSIGN_OR_RETURN(auto ids, read_ids(*ids_path));
  const auto n = static_cast<int64_t>(ids.size());
  DSV4_ASSIGN_OR_RETURN(int64_t prefill, a.get_int("--prefill", n, 1, n));
  DSV4_ASSIGN_OR_RETURN(int64_t chunk, a.get_int("--chunk", n, 1, int64_t{1} << 30));
  DSV4_ASSIGN_OR_RETURN(ModelOptions mopt, parse_model_options(a));
  DSV4_ASSIGN_OR_RETURN(auto model, Model::load(*model_dir, mopt));
  const ModelConfig& c = model->config();
  const auto V = static_cast<uint64_t>(c.vocab_size);
  const auto mtp_out = a.get("--mtp-out");
  const auto dump = a.get("--dump-intermediates");

  if (auto teacher = a.get("--teacher")) {
    DSV4_ASSIGN_OR_RETURN(auto res, v4::run_teacher_forced(*model, *teacher, ids));
    DSV4_RETURN_IF_ERROR(write_npy_f32(*out, {static_cast<uint64_t>(n), V}, res.head_logits.data()));
    if (mtp_out) DSV4_RETURN_IF_ERROR(write_npy_f32(*mtp_out, {static_cast<uint64_t>(n - 1), V}, res.mtp_logits.data()));
    if (dump) DSV4_RETURN_IF_ERROR(v4::write_intermediates(*dump, res.layers, n, c.hc_mult, c.dim, c.n_activated_experts));
    return Status::ok();
  }

  auto seq = model->new_sequence();
  SequenceState* states[] = {seq.get()};
  std::vector<float> logits, part;
  ForwardCapture cap;
  std::vector<float> streams;
  const bool one_shot = prefill == n && chunk >= n;
  ForwardTrace trace;
  // Prefill [0, prefill) in chunks, then one token at a time.
  int64_t done = 0;
  while (done < n) {
    const int64_t step = done < prefill ? std::min(chunk, prefill - done) : 1;
    std::vector<BatchToken> batch;
    for (int64_t i = done; i < done + step; ++i)
      batch.push_back({0, static_cast<int32_t>(i), ids[static_cast<size_t>(i)], true});
    DSV4_RETURN_IF_ERROR(model->forward(batch, states, &part, mtp_out ? &cap : nullptr, dump && one_shot ? &trace : nullptr));
    logits.insert(logits.end(), part.begin(), part.end());
    streams.insert(streams.end(), cap.final_streams.begin(), cap.final_streams.end());
    done += step;
  }
  DSV4_RETURN_IF_ERROR(write_npy_f32(*out, {static_cast<uint64_t>(n), V}, logits.data()));
  if (dump) {
    if (!one_shot) {  // the goldens are a one-shot prefill: trace a separate one
      auto seq2 = model->new_sequence();
      SequenceState* st2[] = {seq2.get()};
      std::vector<BatchToken> batch;
      for (int64_t i = 0; i < n; ++i) batch.push_back({0, static_cast<int32_t>(i), ids[static_cast<size_t>(i)], false});
      DSV4_RETURN_IF_ERROR(model->forward(batch, st2, nullptr, nullptr, &trace));
    }
    DSV4_RETURN_IF_ERROR(v4::write_intermediates(*dump, trace.layers, n, c.hc_mult, c.dim, c.n_activated_experts));
  }
  if (mtp_out) {
    if (n < 2) return invalid_argument("cli.mtp_short", "--mtp-out needs at least 2 ids");
    std::vector<BatchToken> batch;
    for (int64_t i = 0; i + 1 < n; ++i) batch.push_back({0, static_cast<int32_t>(i), ids[static_cast<size_t>(i + 1)], true});
    const size_t per = static_cast<size_t>(c.hc_mult * c.dim);
    std::vector<float> mtp;
    DSV4_RETURN_IF_ERROR(model->forward_mtp(batch, std::span<const float>(streams.data(), static_cast<size_t>(n - 1) * per),
                                            states, &mtp));
    DSV4_RETURN_IF_ERROR(write_npy_f32(*mtp_out, {static_cast<uint64_t>(n - 1), V}, mtp.data()));
  }
  return Status::ok();
}

int cmd_logits(int argc, char** argv) {
  std::vector<std::string> flags = {"--model", "--ids", "--out", "--prefill", "--chunk", "--mtp-out", "--teacher",
                                    "--dump-intermediates"};
  flags.insert(flags.end(), model_flag_names().begin(), model_flag_names().end());
  auto args = Args::parse(argc, argv, flags, {"--help"});
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    std::fputs(model_flags_usage(), stderr);
    return report_error("logits", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    std::fputs(model_flags_usage(), stdout);
    return 0;
  }
  const Status s = run(*args);
  if (!s.is_ok()) return report_error("logits", s);
  return 0;
}

}  // namespace

DSV4_COMMAND("logits", "logits of a token sequence (prefill / decode / chunked / MTP / teacher forcing)", cmd_logits);

}  // namespace dsv4::cli
