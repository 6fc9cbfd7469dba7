// tools: --backend / --threads / --isa / --weights / --numa.
#include "model_flags.h"

namespace dsv4::cli {

const std::vector<std::string>& model_flag_names() {
  static const std::vector<std::string> names = {"--backend", "--threads", "--isa", "--weights", "--numa"};
  return names;
}

const char* model_flags_usage() {
  return "  --backend B   cpu (default: packed-weight kernels on the mapped checkpoint) or reference (the\n"
         "                fp32 scalar oracle; decodes every weight to fp32 at load)\n"
         "  --threads N   worker threads including the caller (default 0 = one per CPU)\n"
         "  --isa I       cpu kernels' ISA: auto, amx, avx512bf16, avx512, avx2, scalar; an unsupported one falls\n"
         "                back to the best. Below amx, a row's logits do not depend on the rest of the batch, so\n"
         "                serve and generate-batch default to the best below amx; the others to auto\n"
         "  --weights W   how the checkpoint is held in memory: copy (read into anonymous memory on 2 MiB huge\n"
         "                pages: never reclaimed without swap, fewer TLB misses; load reads the whole checkpoint),\n"
         "                mmap (a read-only file mapping, faulted in at load and mlocked when it fits and the lock\n"
         "                limit allows; shares the page cache; for checkpoints near or above RAM) or auto\n"
         "                (default: copy when it takes at most 3/4 of MemAvailable; else mmap, faulted in when it\n"
         "                fits at all, lazy when it does not). The bench prints the choice and why, and after\n"
         "                its runs the weights' resident bytes and major faults (mapped weights reclaimed)\n";
}

Result<Residency> parse_weights_flag(const Args& a) {
  const std::string w = a.get_or("--weights", "auto");
  Residency r = Residency::kAuto;
  if (!parse_residency(w, &r))
    return invalid_argument("cli.weights", "--weights must be mmap, copy or auto, got '" + w + "'");
  return r;
}

Result<NumaMode> parse_numa_flag(const Args& a) {
  const std::string v = a.get_or("--numa", "auto");
  NumaMode m = NumaMode::kAuto;
  if (!parse_numa_mode(v, &m))
    return invalid_argument("cli.numa", "--numa must be auto, distribute, isolate or off, got '" + v + "'");
  return m;
}

Result<ModelOptions> parse_model_options(const Args& a, kernels::Isa default_isa) {
  ModelOptions o;
  const std::string backend = a.get_or("--backend", "cpu");
  if (!parse_backend(backend.c_str(), &o.backend))
    return invalid_argument("cli.backend", "--backend must be cpu or reference, got '" + backend + "'");
  DSV4_ASSIGN_OR_RETURN(int64_t threads, a.get_int("--threads", 0, 0, 1024));
  o.threads = static_cast<int>(threads);
  o.isa = default_isa;
  const std::string isa = a.get_or("--isa", "");
  if (!isa.empty() && !kernels::parse_isa(isa.c_str(), &o.isa))
    return invalid_argument("cli.isa", "--isa must be auto, amx, avx512bf16, avx512, avx2 or scalar, got '" + isa + "'");
  DSV4_ASSIGN_OR_RETURN(o.weights.residency, parse_weights_flag(a));
  DSV4_ASSIGN_OR_RETURN(o.numa, parse_numa_flag(a));
  return o;
}

}  // namespace dsv4::cli
