// tests/server: an in-process server on 127.0.0.1:<ephemeral> over the FakeEngine, plus small HTTP and
// SSE helpers shared by the server tests.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/chat_codec.h"
#include "server/http_server.h"
#include "server/testing/fake_engine.h"
#include "server/testing/simple_codec.h"

namespace dsv4::server::test {

using Json = nlohmann::json;

struct TestServer {
  explicit TestServer(testing::FakeEngineOptions engine_options = {}, ServerOptions options = {},
                      std::unique_ptr<ChatCodec> codec = nullptr);
  ~TestServer();

  httplib::Client client() const;  // a fresh connection (keep-alive off)
  httplib::Result post(const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {}) const;
  httplib::Result get(const std::string& path, const httplib::Headers& headers = {}) const;
  // Free/total blocks as /metrics reports them.
  int64_t metric(const std::string& line_prefix) const;

  testing::FakeEngine engine;
  std::unique_ptr<ChatCodec> codec;
  std::unique_ptr<HttpServer> server;
  std::string model;
};

// "data: ..." payloads of an SSE body, in order; fails the test on framing errors.
std::vector<std::string> sse_payloads(const std::string& body);

std::string chat_body(const std::string& model, const std::string& user, const Json& extra = Json::object());

// POSTs a streaming request and hangs up after `chunks` received chunks, as a client that goes away
// mid-stream. Returns whether the exchange completed (false: the client aborted it, as meant).
bool post_and_hang_up(httplib::Client& client, const std::string& path, const std::string& body, int chunks,
                      const httplib::Headers& headers = {});

}  // namespace dsv4::server::test
