// tools: `dsv4 serve` — the OpenAI-compatible HTTP server (src/server) over the inference engine.
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "args.h"
#include "command.h"
#include "default_model.h"
#include "model_flags.h"
#include "server/serve.h"
#include "server/testing/fake_engine.h"
#include "server/testing/simple_codec.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage = R"(usage: dsv4 serve [--model DIR] [options]

  --model DIR               model directory (config.json, *.safetensors, tokenizer.json); without it,
                            the embedded tiny model (random weights), generated once into
                            $DSV4_CACHE_DIR, else $XDG_CACHE_HOME/dsv4, else ~/.cache/dsv4
  --host H                  address to bind (default 127.0.0.1; use 0.0.0.0 deliberately)
  --port P                  port (default 8000; 0 picks a free one)
  --api-key K               require "Authorization: Bearer K" on every route but /health
  --max-concurrency N       sequences run at once (default 16)
  --max-queue N             sequences allowed to wait beyond that; more get 429 (default 64)
  --ctx-size N              context limit in tokens (default: the model's maximum; larger is an error)
  --state-budget-mib M      bytes of per-sequence state (rows, rings, checkpoints) the engine may hold,
                            binding admission and the model's page pools; past it sequences wait or are
                            preempted (default 0: room for --max-concurrency full contexts, pools unbounded)
  --prefix-cache N          finished sequences kept for prefix reuse (default 0: off)
  --served-model-name NAME  the model id clients use (default: the model directory's name)
  --cors-origin ORIGIN      send CORS headers for ORIGIN (default: off)
  --drain-timeout-s S       on SIGTERM, how long running requests may finish (default 30)
  --backend, --threads, --isa  how the model runs (below); --isa defaults to avx512 here: a request's
                            tokens must not depend on what else is in its step (AMX breaks that)
  --fake-engine             TEST HOOK: serve a model-free fake engine (no --model); used by tests only
)";

int cmd_serve(int argc, char** argv) {
  // Before any thread exists: the engine's and the server's threads inherit the blocked mask.
  server::block_shutdown_signals();
  std::vector<std::string> flags = {"--model", "--host", "--port", "--api-key", "--max-concurrency", "--max-queue",
                                     "--ctx-size", "--served-model-name", "--cors-origin", "--drain-timeout-s",
                                     "--state-budget-mib", "--prefix-cache"};
  flags.insert(flags.end(), model_flag_names().begin(), model_flag_names().end());
  auto parsed = Args::parse(argc, argv, flags, {"--fake-engine", "--help"});
  if (!parsed.is_ok()) {
    std::fprintf(stderr, "%s%s", kUsage, model_flags_usage());
    return report_error("serve", parsed.status());
  }
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::printf("%s%s", kUsage, model_flags_usage());
    return 0;
  }
  auto model_options = parse_model_options(args, kernels::batch_invariant_isa());
  if (!model_options.is_ok()) return report_error("serve", model_options.status());
  server::ServerOptions so;
  so.host = args.get_or("--host", "127.0.0.1");
  so.api_key = args.get_or("--api-key", "");
  so.served_model_name = args.get_or("--served-model-name", "");
  so.cors_origin = args.get_or("--cors-origin", "");
  auto port = args.get_int("--port", 8000, 0, 65535);
  auto conc = args.get_int("--max-concurrency", 16, 1, 4096);
  auto queue = args.get_int("--max-queue", 64, 0, 1 << 20);
  auto ctx = args.get_int("--ctx-size", 0, 0, int64_t{1} << 40);
  auto drain = args.get_int("--drain-timeout-s", 30, 0, 3600);
  auto budget_mib = args.get_int("--state-budget-mib", 0, 0, int64_t{1} << 30);
  auto prefix_cache = args.get_int("--prefix-cache", 0, 0, 1 << 16);
  for (const Status* s : {&port.status(), &conc.status(), &queue.status(), &ctx.status(), &drain.status(),
                          &budget_mib.status(), &prefix_cache.status()}) {
    if (!s->is_ok()) return report_error("serve", *s);
  }
  so.port = static_cast<int>(*port);
  so.max_concurrency = static_cast<int32_t>(*conc);
  so.max_queue = static_cast<int32_t>(*queue);
  so.ctx_size = *ctx;
  if (so.api_key.empty() && so.host != "127.0.0.1" && so.host != "localhost" && so.host != "::1") {
    std::fprintf(stderr, "dsv4 serve: warning: listening on %s without --api-key\n", so.host.c_str());
  }

  server::ServeBackend backend;
  if (args.has("--fake-engine")) {
    if (args.has("--model")) return report_error("serve", invalid_argument("cli.conflict", "--fake-engine takes no --model"));
    server::testing::FakeEngineOptions fo;
    fo.max_running = so.max_concurrency;
    if (so.ctx_size > 0) fo.context_size = so.ctx_size;
    backend.engine = std::make_unique<server::testing::FakeEngine>(fo);
    backend.codec = std::make_unique<server::testing::SimpleCodec>();
  } else {
    std::string model_dir;
    if (args.has("--model")) {
      model_dir = *args.get("--model");
    } else {
      auto made = ensure_default_model();
      if (!made.is_ok()) return report_error("serve", made.status());
      model_dir = made->string();
      std::fprintf(stderr, "dsv4 serve: serving the embedded tiny model %s (random weights: its text is gibberish)\n",
                   model_dir.c_str());
    }
    if (so.served_model_name.empty()) {
      // "/models/tiny/" names "tiny", like "/models/tiny".
      const std::filesystem::path p = std::filesystem::path(model_dir).lexically_normal();
      so.served_model_name = (p.has_filename() ? p.filename() : p.parent_path().filename()).string();
    }
    server::BackendOptions bo;
    bo.model_dir = model_dir;
    bo.max_concurrency = so.max_concurrency;
    bo.max_queue = so.max_queue;
    bo.ctx_size = so.ctx_size;
    bo.state_budget_bytes = *budget_mib << 20;
    bo.prefix_cache_entries = static_cast<int32_t>(*prefix_cache);
    bo.served_model_name = so.served_model_name;
    bo.model = *model_options;
    auto loaded = server::load_model_backend(bo);
    if (!loaded.is_ok()) return report_error("serve", loaded.status());
    backend = std::move(loaded).value();
  }
  Status st = server::serve_until_signal(*backend.engine, *backend.codec, so, std::chrono::seconds(*drain));
  if (!st.is_ok()) return report_error("serve", st);
  return 0;
}

}  // namespace

DSV4_COMMAND("serve", "OpenAI-compatible HTTP server (chat, completions, streaming, tools)", cmd_serve);

}  // namespace dsv4::cli
