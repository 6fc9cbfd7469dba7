// tools: `dsv4 inspect DIR` — what a model is and what it costs: layer table, parameters, bytes by dtype,
// KV/state bytes, FLOPs per token (model/cost_model.h); with weights present, the checkpoint checked
// against the spec §3 tensor table (model/tensor_layout.h). Exit 1 when the checkpoint does not match.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "args.h"
#include "command.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/cost_model.h"
#include "model/tensor_layout.h"

namespace dsv4::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr int64_t k1M = 1 << 20;

const char* kUsage =
    "usage: dsv4 inspect DIR|CONFIG.json [--json] [--context N] [--compare-v32]\n"
    "  DIR holds config.json (and inference/config.json) and optionally the safetensors weights.\n"
    "  --context N     context length for the FLOPs/KV figures (default 4096)\n"
    "  --json          print one JSON object instead of text\n"
    "  --compare-v32   also model V3.2-Exp DSA (spec §5) and print the V4/V3.2 ratios at 1M context\n";

std::string human(double v, const char* unit, double base = 1000.0) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (v >= base && i < 5) {
    v /= base;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s%s", v, prefixes[i], unit);
  return buf;
}

// The weights live next to config.json: an index or any .safetensors file there.
bool has_weights(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "model.safetensors.index.json", ec)) return true;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") return true;
  return false;
}

ordered_json kv_json(const KvCost& k) {
  return {{"bytes_per_token", k.bytes_per_token}, {"bytes_at_context", k.bytes_at_context},
          {"window_bytes", k.window_bytes},       {"compressed_bytes", k.compressed_bytes},
          {"indexer_bytes", k.indexer_bytes},     {"state_bytes", k.state_bytes}};
}

ordered_json flops_json(const FlopCost& f) {
  return {{"total", f.total()},         {"projections", f.projections}, {"attention", f.attention},
          {"indexer", f.indexer},       {"compressors", f.compressors}, {"moe", f.moe},
          {"mhc", f.mhc},               {"head", f.head}};
}

void print_mismatches(const char* what, const std::vector<TensorMismatch>& v) {
  for (const auto& m : v) std::printf("  %s %s: %s, expected %s\n", what, m.name.c_str(), m.actual.c_str(), m.expected.c_str());
}

int run_inspect(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"--context"}, {"--json", "--compare-v32", "--help"});
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    return report_error("inspect", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args->positional().size() != 1) {
    std::fputs(kUsage, stderr);
    return report_error("inspect", invalid_argument("cli.positional", "expected exactly one DIR or config.json path"));
  }
  auto context = args->get_int("--context", 4096, 1, int64_t{1} << 40);
  if (!context.is_ok()) return report_error("inspect", context.status());
  const fs::path target = args->positional()[0];
  std::error_code ec;
  if (!fs::exists(target, ec))
    return report_error("inspect", not_found("inspect.missing", target.string() + ": no such file or directory"));
  auto cfg = load_model_config(target);
  if (!cfg.is_ok()) return report_error("inspect", cfg.status());
  const fs::path dir = fs::is_directory(target, ec) ? target : target.parent_path().empty() ? fs::path(".") : target.parent_path();

  const ParamCost params = param_cost(*cfg);
  const KvCost kv_bf16 = kv_cost(*cfg, k1M, KvLayout::kBf16Reference);
  const KvCost kv_fp8 = kv_cost(*cfg, k1M, KvLayout::kFp8);
  const KvCost kv_ctx_bf16 = kv_cost(*cfg, *context, KvLayout::kBf16Reference);
  const KvCost kv_ctx_fp8 = kv_cost(*cfg, *context, KvLayout::kFp8);
  const FlopCost flops = flops_per_token(*cfg, *context);
  const bool compare = args->has("--compare-v32");

  // Weights, when present, are checked against the table.
  std::optional<Checkpoint> ckpt;
  std::optional<CheckpointCheck> check;
  if (has_weights(dir)) {
    auto opened = Checkpoint::open(dir);
    if (!opened.is_ok()) return report_error("inspect", opened.status());
    ckpt = std::move(*opened);
    check = check_checkpoint(*cfg, *ckpt);
  }

  ordered_json layers = ordered_json::array();
  for (int64_t il = 0; il < cfg->n_total_layers(); ++il) {
    const bool mtp = il >= cfg->n_layers;
    layers.push_back({{"index", il},
                      {"name", mtp ? "mtp." + std::to_string(il - cfg->n_layers) : "layers." + std::to_string(il)},
                      {"attention", std::string(attention_kind_name(cfg->attention_kind(il)))},
                      {"compress_ratio", cfg->compress_ratio(il)},
                      {"routing", !mtp && cfg->is_hash_layer(il) ? "hash" : "score"},
                      {"mtp", mtp}});
  }

  if (args->has("--json")) {
    ordered_json j;
    j["config"] = (fs::is_directory(target, ec) ? target / "config.json" : target).string();
    j["model_type"] = cfg->model_type;
    j["variant"] = cfg->has_dspark() ? "dspark" : (cfg->n_mtp_layers > 0 ? "mtp" : "none");
    j["n_layers"] = cfg->n_layers;
    j["n_mtp_layers"] = cfg->n_mtp_layers;
    j["layers"] = layers;
    j["params_total"] = params.params_total;
    j["params_active_per_token"] = params.params_active_per_token;
    j["params_active_with_embedding"] = params.params_active_with_embedding;
    j["params_mtp"] = params.params_mtp;
    j["params_embedding"] = params.params_embedding;
    j["params_routed_experts"] = params.params_routed_experts;
    j["n_tensors_expected"] = params.n_tensors;
    j["n_tensors"] = ckpt ? ckpt->tensors().size() : params.n_tensors;
    j["bytes_total"] = params.bytes_total;
    j["bytes_by_dtype"] = params.bytes_by_dtype;
    j["context"] = *context;
    j["kv"] = {{"bf16", {{"at_context", kv_json(kv_ctx_bf16)}, {"at_1m", kv_json(kv_bf16)}}},
               {"fp8", {{"at_context", kv_json(kv_ctx_fp8)}, {"at_1m", kv_json(kv_fp8)}}}};
    j["kv_bytes_per_token"] = kv_bf16.bytes_per_token;
    j["kv_bytes_at_1m"] = kv_bf16.bytes_at_context;
    j["flops_per_token"] = flops_json(flops);
    if (ckpt) {
      ordered_json mis = ordered_json::array(), dt = ordered_json::array();
      for (const auto& m : check->misshaped) mis.push_back({{"name", m.name}, {"expected", m.expected}, {"actual", m.actual}});
      for (const auto& m : check->wrong_dtype) dt.push_back({{"name", m.name}, {"expected", m.expected}, {"actual", m.actual}});
      j["checkpoint"] = {{"present", true},          {"ok", check->ok()},
                         {"n_tensors", check->n_present}, {"bytes", ckpt->total_bytes()},
                         {"n_shards", ckpt->shard_paths().size()},
                         {"missing", check->missing},  {"extra", check->extra},
                         {"misshaped", mis},           {"wrong_dtype", dt}};
    } else {
      j["checkpoint"] = {{"present", false}};
    }
    if (compare) {
      const V32Config v32;
      const FlopCost v4f = flops_per_token(*cfg, k1M), v3f = v32_flops_per_token(v32, k1M);
      const KvCost v3bf = v32_kv_cost(v32, k1M, KvLayout::kBf16Reference), v3f8 = v32_kv_cost(v32, k1M, KvLayout::kFp8);
      j["compare_v32"] = {{"context", k1M},
                          {"v4_flops_per_token", flops_json(v4f)},
                          {"v32_flops_per_token", flops_json(v3f)},
                          {"flops_ratio", v4f.total() / v3f.total()},
                          {"v4_kv_bytes_bf16", kv_bf16.bytes_at_context},
                          {"v32_kv_bytes_bf16", v3bf.bytes_at_context},
                          {"kv_ratio_bf16", static_cast<double>(kv_bf16.bytes_at_context) / v3bf.bytes_at_context},
                          {"v4_kv_bytes_fp8", kv_fp8.bytes_at_context},
                          {"v32_kv_bytes_fp8", v3f8.bytes_at_context},
                          {"kv_ratio_fp8", static_cast<double>(kv_fp8.bytes_at_context) / v3f8.bytes_at_context}};
    }
    std::printf("%s\n", j.dump(2).c_str());
    return check && !check->ok() ? 1 : 0;
  }

  std::printf("model: %s (%s), %lld layers + %lld %s, d_model %lld, vocab %lld\n", cfg->model_type.c_str(),
              (fs::is_directory(target, ec) ? target / "config.json" : target).string().c_str(),
              static_cast<long long>(cfg->n_layers), static_cast<long long>(cfg->n_mtp_layers),
              cfg->has_dspark() ? "DSpark stages" : "MTP", static_cast<long long>(cfg->dim),
              static_cast<long long>(cfg->vocab_size));
  std::printf("experts: %lld routed (top-%lld, %s) + %lld shared; heads %lld x %lld; window %lld; index top-%lld\n\n",
              static_cast<long long>(cfg->n_routed_experts), static_cast<long long>(cfg->n_activated_experts),
              cfg->expert_dtype.c_str(), static_cast<long long>(cfg->n_shared_experts),
              static_cast<long long>(cfg->n_heads), static_cast<long long>(cfg->head_dim),
              static_cast<long long>(cfg->window_size), static_cast<long long>(cfg->index_topk));
  std::printf("  %-9s %-9s %6s  %s\n", "layer", "attention", "ratio", "routing");
  for (const auto& l : layers)
    std::printf("  %-9s %-9s %6lld  %s\n", l["name"].get<std::string>().c_str(), l["attention"].get<std::string>().c_str(),
                static_cast<long long>(l["compress_ratio"].get<int64_t>()), l["routing"].get<std::string>().c_str());
  std::printf("\nparameters: total %s (backbone), active %s per token (%s with the embedding), MTP %s\n",
              human(params.params_total, "").c_str(), human(params.params_active_per_token, "").c_str(),
              human(params.params_active_with_embedding, "").c_str(), human(params.params_mtp, "").c_str());
  std::printf("bytes: %s in %llu tensors;", human(params.bytes_total, "B").c_str(),
              static_cast<unsigned long long>(params.n_tensors));
  for (const auto& [dt, b] : params.bytes_by_dtype) std::printf(" %s %s;", dt.c_str(), human(b, "B").c_str());
  std::printf("\nKV/state per sequence (bf16 reference | FP8 584-B rows):\n");
  std::printf("  per token      %10.1f B | %10.1f B\n", kv_bf16.bytes_per_token, kv_fp8.bytes_per_token);
  std::printf("  at %-10lld %12s | %s\n", static_cast<long long>(*context), human(kv_ctx_bf16.bytes_at_context, "B").c_str(),
              human(kv_ctx_fp8.bytes_at_context, "B").c_str());
  std::printf("  at 1M          %12s | %s\n", human(kv_bf16.bytes_at_context, "B").c_str(), human(kv_fp8.bytes_at_context, "B").c_str());
  std::printf("FLOPs per token at context %lld: %s (projections %s, attention %s, indexer %s, compressors %s, MoE %s, mHC %s, head %s)\n",
              static_cast<long long>(*context), human(flops.total(), "FLOP").c_str(), human(flops.projections, "").c_str(),
              human(flops.attention, "").c_str(), human(flops.indexer, "").c_str(), human(flops.compressors, "").c_str(),
              human(flops.moe, "").c_str(), human(flops.mhc, "").c_str(), human(flops.head, "").c_str());
  if (compare) {
    const V32Config v32;
    const FlopCost v4f = flops_per_token(*cfg, k1M), v3f = v32_flops_per_token(v32, k1M);
    const KvCost v3bf = v32_kv_cost(v32, k1M, KvLayout::kBf16Reference), v3f8 = v32_kv_cost(v32, k1M, KvLayout::kFp8);
    std::printf("vs V3.2-Exp at 1M: FLOPs/token %s vs %s (%.1f%%); KV bf16 %s vs %s (%.1f%%); KV fp8 %s vs %s (%.1f%%)\n",
                human(v4f.total(), "").c_str(), human(v3f.total(), "").c_str(), 100.0 * v4f.total() / v3f.total(),
                human(kv_bf16.bytes_at_context, "B").c_str(), human(v3bf.bytes_at_context, "B").c_str(),
                100.0 * kv_bf16.bytes_at_context / v3bf.bytes_at_context, human(kv_fp8.bytes_at_context, "B").c_str(),
                human(v3f8.bytes_at_context, "B").c_str(), 100.0 * kv_fp8.bytes_at_context / v3f8.bytes_at_context);
  }
  if (!ckpt) {
    std::printf("weights: none in %s (config only)\n", dir.string().c_str());
    return 0;
  }
  std::printf("weights: %zu tensors, %s in %zu shard(s); expected %zu: %zu missing, %zu extra, %zu mis-shaped, %zu wrong dtype\n",
              check->n_present, human(ckpt->total_bytes(), "B").c_str(), ckpt->shard_paths().size(), check->n_expected,
              check->missing.size(), check->extra.size(), check->misshaped.size(), check->wrong_dtype.size());
  for (const auto& n : check->missing) std::printf("  missing %s\n", n.c_str());
  for (const auto& n : check->extra) std::printf("  extra %s\n", n.c_str());
  print_mismatches("mis-shaped", check->misshaped);
  print_mismatches("wrong dtype", check->wrong_dtype);
  std::printf("checkpoint: %s\n", check->ok() ? "OK (matches the config's tensor layout)" : "DOES NOT MATCH");
  return check->ok() ? 0 : 1;
}

}  // namespace

DSV4_COMMAND("inspect", "describe a model: layers, params, bytes, KV, FLOPs; check its checkpoint", run_inspect);

}  // namespace dsv4::cli
