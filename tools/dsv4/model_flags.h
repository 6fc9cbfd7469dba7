// tools: the flags every model-running subcommand shares — --backend, --threads, --isa — parsed into
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
// Defaults: --backend cpu, --threads 0 (one per CPU), --isa auto.
Result<ModelOptions> parse_model_options(const Args& a);

}  // namespace dsv4::cli
