// tools: the flags every model-running subcommand shares — --backend, --threads, --isa, --weights — parsed into
// ModelOptions, so logits, generate and generate-batch (and bench) construct the model the same way.
#pragma once

#include <string>
#include <vector>

#include "args.h"
#include "core/status.h"
#include "model/model.h"

namespace dsv4::cli {

// Flag names to add to Args::parse's value flags.
const std::vector<std::string>& model_flag_names();
// Usage lines for them (each ends in '\n').
const char* model_flags_usage();
// --weights alone (bench parses its own flags): mmap | copy | auto, default auto.
Result<Residency> parse_weights_flag(const Args& a);
// --numa alone: auto | distribute | isolate | off, default auto.
Result<NumaMode> parse_numa_flag(const Args& a);
// Defaults: --backend cpu, --threads 0 (one per CPU), --isa `default_isa`, --weights auto.
// Commands that batch independent requests together (serve, generate-batch, bench-engine) pass
// kernels::batch_invariant_isa(): the best ISA below AMX. Why: with AMX, GEMMs of >= 16 rows sum on bf16
// tiles in another order than the row kernels, so a request's tokens would depend on how many other
// requests share its step. --isa amx opts back in.
Result<ModelOptions> parse_model_options(const Args& a, kernels::Isa default_isa = kernels::Isa::kAuto);

}  // namespace dsv4::cli
