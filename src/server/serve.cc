// server: backend creation and the signal-driven serve loop.
#include "server/serve.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>

namespace dsv4::server {

Result<ServeBackend> load_model_backend(const BackendOptions& options) {
  // NOTE: the switch point. When src/runtime provides create_engine(...) and src/tokenizer the chat
  // layer, build both here; nothing else in the server changes.
  return unimplemented("serve.no_engine",
                       "this build has no inference engine yet (src/runtime create_engine has not landed), so "
                       "'dsv4 serve' cannot load " + (options.model_dir.empty() ? std::string("a model") : options.model_dir));
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
