// server: backend creation and the signal-driven serve loop.
#include "server/serve.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "io/model_config.h"
#include "runtime/engine_factory.h"
#include "runtime/model_model_runner.h"
#include "runtime/tokenizer_detokenizer.h"
#include "server/deepseek_codec.h"

namespace dsv4::server {
namespace {

namespace fs = std::filesystem;

// "\rloading: [#####.....]  50%  74.3/148.7 MB" on stderr, redrawn in place on a terminal; elsewhere
// (a log file, a test's pipe) one line per 10% so the log stays short.
class ProgressBar {
 public:
  explicit ProgressBar(std::string label) : label_(std::move(label)), tty_(::isatty(2) == 1) {}
  void update(uint64_t done, uint64_t total) {
    const int pct = total > 0 ? static_cast<int>(done * 100 / total) : 100;
    const int step = tty_ ? 1 : 10;
    if (pct / step == last_ / step) return;
    last_ = pct;
    constexpr int kWidth = 30;
    std::string bar(static_cast<size_t>(kWidth), '.');
    for (int i = 0; i < pct * kWidth / 100; ++i) bar[static_cast<size_t>(i)] = '#';
    std::fprintf(stderr, "%s%s: [%s] %3d%%  %.1f/%.1f MB%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(), pct,
                 static_cast<double>(done) / 1e6, static_cast<double>(total) / 1e6, tty_ ? "" : "\n");
    if (tty_ && pct == 100) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  std::string label_;
  bool tty_;
  int last_ = -1;
};

Status with_context(const Status& s, const std::string& prefix) {
  return Status(s.code(), s.rule(), prefix + s.message());
}

}  // namespace

Result<ServeBackend> load_model_backend(const BackendOptions& options) {
  const fs::path dir = options.model_dir;
  std::error_code ec;
  if (dir.empty()) return invalid_argument("serve.model_dir", "no model directory given");
  if (!fs::exists(dir, ec))
    return not_found("serve.model_dir", dir.string() + ": no such directory (give --model a model directory)");
  if (!fs::is_directory(dir, ec))
    return invalid_argument("serve.model_dir", dir.string() + ": not a directory (--model takes the model's directory)");
  if (!fs::exists(dir / "config.json", ec))
    return not_found("serve.no_config", dir.string() + ": no config.json here; is this a model directory?");
  auto cfg = load_model_config(dir);
  if (!cfg.is_ok()) return cfg.status();  // names the file already
  const int64_t model_ctx = cfg->max_position_embeddings > 0 ? cfg->max_position_embeddings : (int64_t{1} << 30);
  if (options.ctx_size > model_ctx) {
    return invalid_argument("serve.ctx_size", "--ctx-size " + std::to_string(options.ctx_size) +
                                                  " exceeds the model's maximum context of " +
                                                  std::to_string(model_ctx) + " tokens");
  }
  const int64_t ctx = options.ctx_size > 0 ? options.ctx_size : model_ctx;

  // The tokenizer before the weights: a missing or broken one fails in milliseconds, not after a load.
  const fs::path tok_path = dir / "tokenizer.json";
  if (!fs::exists(tok_path, ec)) {
    return not_found("serve.no_tokenizer", tok_path.string() +
                                               " is missing: the server needs the model's tokenizer to encode "
                                               "prompts (copy the checkpoint's tokenizer.json next to config.json)");
  }
  auto tok = Tokenizer::load(tok_path);
  if (!tok.is_ok()) return with_context(tok.status(), "cannot load the tokenizer: ");
  if (tok->vocab_size() > cfg->vocab_size) {
    return invalid_file("serve.tokenizer_vocab", tok_path.string() + " has " + std::to_string(tok->vocab_size()) +
                                                     " tokens, more than the model's vocabulary of " +
                                                     std::to_string(cfg->vocab_size));
  }
  auto tokenizer = std::make_shared<const Tokenizer>(std::move(tok).value());

  ProgressBar bar("dsv4 serve: loading " + dir.filename().string());
  ModelOptions mo = options.model;
  if (options.progress_bar) mo.progress = [&bar](uint64_t done, uint64_t total) { bar.update(done, total); };
  auto runner = ModelModelRunner::load(dir, mo);
  if (!runner.is_ok()) return with_context(runner.status(), "cannot load the model: ");
  if (options.progress_bar) bar.update(1, 1);  // tensors the loader never looked up count as read
  if (options.progress_bar && !(*runner)->info().placement.empty())
    std::fprintf(stderr, "dsv4 serve: numa: %s\n", (*runner)->info().placement.c_str());
  if (options.progress_bar && !(*runner)->info().weights.empty())
    std::fprintf(stderr, "dsv4 serve: weights: %s\n", (*runner)->info().weights.c_str());

  EngineOptions eo;
  eo.core.max_running = options.max_concurrency;
  // The server admits max_concurrency + max_queue requests; all of them may sit in the engine's inbox at once.
  eo.max_queue = options.max_concurrency + std::max<int32_t>(options.max_queue, 1);
  eo.model_name = options.served_model_name;
  // State budget: every running sequence can reach the full context, so admission never has to
  // preempt for lack of blocks (the pool is bookkeeping; the runner allocates as sequences grow).
  const StateFootprint fp = (*runner)->info().footprint;
  DSV4_ASSIGN_OR_RETURN(PoolPlan plan, plan_pool(fp, std::max<int64_t>(fp.per_seq() + fp.per_token(), 1) * 64,
                                                 eo.core.block_tokens));
  const int64_t blocks = static_cast<int64_t>(plan.blocks_for(ctx)) * options.max_concurrency;
  eo.core.pool_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, int64_t{1} << 30));
  eo.core.prefix_cache_entries = options.prefix_cache_entries;
  if (options.state_budget_bytes > 0) {  // a real budget: admission's pool and the model's pages
    eo.core.pool_blocks = 0;
    eo.core.pool_bytes = options.state_budget_bytes;
  }
  auto engine = create_engine(std::move(runner).value(), eo, std::make_shared<TokenizerDetokenizer>(tokenizer));
  if (!engine.is_ok()) return with_context(engine.status(), "cannot start the engine: ");
  ServeBackend backend;
  backend.engine = std::move(engine).value();
  backend.codec = std::make_unique<DeepSeekChatCodec>(tokenizer);
  return backend;
}

void block_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A client that hangs up mid-write must not kill the server; the write just fails.
  signal(SIGPIPE, SIG_IGN);
}

Status serve_until_signal(Engine& engine, const ChatCodec& codec, const ServerOptions& options,
                          std::chrono::milliseconds drain_timeout) {
  HttpServer server(engine, codec, options);
  DSV4_RETURN_IF_ERROR(server.start_background());
  std::printf("dsv4 serve: listening on http://%s:%d (model '%s')\n", options.host.c_str(), server.port(),
              options.served_model_name.empty() ? engine.info().model_name.c_str()
                                                : options.served_model_name.c_str());
  std::fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  std::printf("dsv4 serve: %s received, draining (up to %lld ms)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
              static_cast<long long>(drain_timeout.count()));
  std::fflush(stdout);
  server.shutdown(drain_timeout);
  std::printf("dsv4 serve: stopped\n");
  std::fflush(stdout);
  return Status::ok();
}

}  // namespace dsv4::server
