// tools: the embedded default model of `dsv4 serve` (see default_model.h).
#include "default_model.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/make_tiny.h"

namespace dsv4::cli {

namespace fs = std::filesystem;

Result<fs::path> cache_dir() {
  if (const char* d = std::getenv("DSV4_CACHE_DIR"); d && *d) return fs::path(d);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "dsv4";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "dsv4";
  return invalid_argument("cli.no_cache_dir", "no cache directory: set DSV4_CACHE_DIR (or HOME), or give --model DIR");
}

Result<fs::path> ensure_default_model() {
  DSV4_ASSIGN_OR_RETURN(fs::path root, cache_dir());
  const fs::path dir = root / "tiny-seed1";
  std::error_code ec;
  if (fs::exists(dir / "config.json", ec) && fs::exists(dir / "tokenizer.json", ec)) return dir;

  std::fprintf(stderr, "dsv4 serve: no --model given: generating the embedded tiny model (random weights, "
                       "spec §6 'tiny' preset, ~150 MB) once into %s\n", dir.string().c_str());
  fs::create_directories(root, ec);
  if (ec) return io_error("cli.cache_dir", root.string() + ": cannot create the cache directory: " + ec.message());
  const fs::path tmp = root / ("tiny-seed1.partial-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  DSV4_ASSIGN_OR_RETURN(ModelConfig cfg, make_tiny_preset("tiny"));
  MakeTinyOptions opt;  // seed 1, as `dsv4 make-tiny --preset tiny`
  opt.tokenizer_dir = fs::path(DSV4_DEFAULT_SHARED_DIR) / "tokenizer";
  auto rep = make_tiny_checkpoint(cfg, tmp, opt);
  if (!rep.is_ok()) {
    fs::remove_all(tmp, ec);
    return rep.status();
  }
  if (!rep->tokenizer_copied) {
    fs::remove_all(tmp, ec);
    return not_found("cli.default_tokenizer",
                     "the embedded default model needs the DeepSeek tokenizer, expected in " +
                         opt.tokenizer_dir.string() + (rep->note.empty() ? "" : " (" + rep->note + ")") +
                         "; give --model DIR instead");
  }
  fs::rename(tmp, dir, ec);
  if (ec) {
    // Another process finished first: keep its copy.
    fs::remove_all(tmp, ec);
    if (!fs::exists(dir / "config.json", ec))
      return io_error("cli.cache_dir", dir.string() + ": cannot move the generated model into place");
  }
  std::fprintf(stderr, "dsv4 serve: generated %s (%.1f MB in %.1f s)\n", dir.string().c_str(),
               static_cast<double>(rep->bytes) / 1e6, rep->seconds);
  return dir;
}

}  // namespace dsv4::cli
