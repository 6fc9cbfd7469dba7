// tests/server: HttpServer start/stop bounds (reliability.md §B6). A stop that comes before the listener
// is up must still stop it (a test failing right after starting its server used to hang in ~HttpServer);
// neither an idle keep-alive connection nor a request the engine never serves holds the stop open.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "server_fixture.h"

namespace dsv4::server::test {
namespace {

using namespace std::chrono_literals;

// A hang guard, not a speed check: how long a stop that should be immediate may take before the test
// reports the hang instead of stalling the suite.
constexpr auto kHangGuard = 60s;

// An ephemeral port and one connection thread: these tests start many servers and send nothing.
ServerOptions ephemeral_one_thread() {
  ServerOptions so;
  so.port = 0;
  so.http_threads = 1;
  return so;
}

// The interleaving that hung: shutdown() lands before run() has begun listening. run() must then return
// on its own. Deterministic: run() is only called after shutdown() has returned.
TEST(ServerLifecycle, ShutdownBeforeRunMakesRunReturn) {
  testing::FakeEngine engine;
  testing::SimpleCodec codec;
  HttpServer server(engine, codec, ephemeral_one_thread());
  ASSERT_TRUE(server.bind().is_ok());
  server.shutdown(0ms);
  auto ran = std::async(std::launch::async, [&] { server.run(); });
  const bool returned = ran.wait_for(kHangGuard) == std::future_status::ready;
  EXPECT_TRUE(returned) << "run() kept listening after shutdown() had already been called";
  if (!returned) server.shutdown(0ms);  // the listener is up by now: this stop reaches it, so ran can end
  ran.wait();
}

// A server destroyed the moment start_background() returns (the race above, without forcing its order):
// every one of many tries ends.
TEST(ServerLifecycle, DestroyedRightAfterStartingAlwaysStops) {
  testing::FakeEngine engine;
  testing::SimpleCodec codec;
  for (int i = 0; i < 200; ++i) {
    auto server = std::make_unique<HttpServer>(engine, codec, ephemeral_one_thread());
    ASSERT_TRUE(server->start_background().is_ok());
    server.reset();
  }
}

// A client that keeps its connection open and idle after a response: shutdown and destruction finish
// (cpp-httplib closes it after the keep-alive timeout), and the client then sees the connection closed.
TEST(ServerLifecycle, IdleKeepAliveConnectionDoesNotHoldShutdown) {
  auto ts = std::make_unique<TestServer>();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(ts->server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string req = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n";
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[1024];
  while (got.find("{\"status\":\"ok\"}") == std::string::npos) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    ASSERT_GT(n, 0) << "connection closed before the answer: " << got;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(got.find("Keep-Alive"), std::string::npos) << got;  // the server holds the connection open

  const auto t0 = std::chrono::steady_clock::now();
  auto stopped = std::async(std::launch::async, [&] {
    ts->server->shutdown(0ms);
    ts.reset();
  });
  const bool done = stopped.wait_for(kHangGuard) == std::future_status::ready;
  EXPECT_TRUE(done) << "an idle keep-alive connection kept the server from stopping";
  if (done) {
    EXPECT_EQ(::read(fd, buf, sizeof(buf)), 0) << "the server left the connection open";
  }
  ::close(fd);  // (if the stop hung, this lets it end, so the test fails instead of hanging)
  stopped.wait();
  std::printf("stopped with an idle keep-alive connection open in %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - t0)
                                         .count()));
}

// A request waiting on an engine that never runs it, and a server destroyed without shutdown(): the
// destructor ends the wait (the handler answers 503 and cancels the request) instead of joining forever.
TEST(ServerLifecycle, DestroyingTheServerEndsARequestTheEngineNeverServes) {
  auto ts = std::make_unique<TestServer>();
  ts->engine.set_paused(true);
  httplib::Client cli = ts->client();
  auto answer = std::async(std::launch::async, [&] {
    return cli.Post("/v1/chat/completions", chat_body(ts->model, "never served", {{"max_tokens", 4}}), "application/json");
  });
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (ts->server->inflight_sequences() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(ts->server->inflight_sequences(), 1);
  auto destroyed = std::async(std::launch::async, [&] { ts->server.reset(); });
  const bool done = destroyed.wait_for(kHangGuard) == std::future_status::ready;
  EXPECT_TRUE(done) << "~HttpServer kept waiting for a request the engine never served";
  if (!done) ts->engine.set_paused(false);  // lets it finish, so the test fails instead of hanging
  destroyed.wait();
  auto r = answer.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(Json::parse(r->body)["error"]["code"], "shutting_down") << r->body;
  // The engine request was cancelled, not left queued (the fake applies a cancel on its own thread).
  while (ts->engine.cancels_applied() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(ts->engine.cancels_applied(), 1);
}

}  // namespace
}  // namespace dsv4::server::test
