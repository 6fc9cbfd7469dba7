// tools: `dsv4 make-tiny OUT_DIR` — writes a random model in the official on-disk format (configs,
// sharded safetensors + index, tokenizer) from a preset or any config.json (model/make_tiny.h).
#include <cstdio>
#include <filesystem>
#include <string>

#include "args.h"
#include "command.h"
#include "io/model_config.h"
#include "model/make_tiny.h"

namespace dsv4::cli {
namespace {

namespace fs = std::filesystem;

const char* kUsage =
    "usage: dsv4 make-tiny OUT_DIR [--preset tiny|small|medium] [--seed N] [--config FILE] [--threads N]\n"
    "  --preset   tiny (spec §6, ~150 MB, default), small (d 1024, ~0.7 GB), medium (real layer dims, ~11 GB)\n"
    "  --config   generate for this config.json instead of a preset (inference/config.json beside it is read)\n"
    "  --seed     weights depend only on (config, seed) (default 1)\n"
    "  --threads  generator threads (default 2)\n";

int run_make_tiny(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"--preset", "--seed", "--config", "--threads"}, {"--help"});
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    return report_error("make-tiny", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args->positional().size() != 1) {
    std::fputs(kUsage, stderr);
    return report_error("make-tiny", invalid_argument("cli.positional", "expected exactly one OUT_DIR"));
  }
  if (args->has("--preset") && args->has("--config"))
    return report_error("make-tiny", invalid_argument("cli.conflict", "--preset and --config are mutually exclusive"));
  auto seed = args->get_int("--seed", 1, 0, INT64_MAX);
  if (!seed.is_ok()) return report_error("make-tiny", seed.status());
  auto threads = args->get_int("--threads", 2, 1, 256);
  if (!threads.is_ok()) return report_error("make-tiny", threads.status());

  Result<ModelConfig> cfg = args->has("--config") ? load_model_config(*args->get("--config"))
                                                  : make_tiny_preset(args->get_or("--preset", "tiny"));
  if (!cfg.is_ok()) return report_error("make-tiny", cfg.status());

  MakeTinyOptions opt;
  opt.seed = static_cast<uint64_t>(*seed);
  opt.n_threads = static_cast<int>(*threads);
  opt.tokenizer_dir = fs::path(DSV4_DEFAULT_SHARED_DIR) / "tokenizer";
  const fs::path out = args->positional()[0];
  auto rep = make_tiny_checkpoint(*cfg, out, opt);
  if (!rep.is_ok()) return report_error("make-tiny", rep.status());
  const double mb = static_cast<double>(rep->bytes) / 1e6;
  std::printf("make-tiny: wrote %s: %llu tensors, %.1f MB in %d shard(s), seed %llu, %.2f s (%.1f MB/s)\n",
              out.string().c_str(), static_cast<unsigned long long>(rep->n_tensors), mb, rep->n_shards,
              static_cast<unsigned long long>(opt.seed), rep->seconds, rep->seconds > 0 ? mb / rep->seconds : 0.0);
  if (!rep->note.empty()) std::printf("make-tiny: note: %s\n", rep->note.c_str());
  return 0;
}

}  // namespace

DSV4_COMMAND("make-tiny", "write a random model in the official checkpoint format (tests, demos)", run_make_tiny);

}  // namespace dsv4::cli
