// tools: the embedded default model of `dsv4 serve` — the spec §6 tiny preset (random weights, the real
// tokenizer), generated once into a cache directory and reused by every later run.
#pragma once

#include <filesystem>

#include "core/status.h"

namespace dsv4::cli {

// $DSV4_CACHE_DIR, else $XDG_CACHE_HOME/dsv4, else $HOME/.cache/dsv4.
Result<std::filesystem::path> cache_dir();

// CACHE/tiny-seed1 with config, weights and tokenizer.json: what `dsv4 make-tiny DIR --preset tiny`
// writes. Generated (with a note on stderr) when absent, into a temporary sibling renamed into place,
// so an interrupted or concurrent generation never leaves a half-written model behind.
Result<std::filesystem::path> ensure_default_model();

}  // namespace dsv4::cli
