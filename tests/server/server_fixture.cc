// tests/server: the in-process test server.
#include "server_fixture.h"

#include <sstream>

namespace dsv4::server::test {

TestServer::TestServer(testing::FakeEngineOptions engine_options, ServerOptions options,
                       std::unique_ptr<ChatCodec> codec_in)
    : engine(engine_options), codec(codec_in ? std::move(codec_in) : std::make_unique<testing::SimpleCodec>()) {
  options.host = "127.0.0.1";
  options.port = 0;
  model = options.served_model_name.empty() ? engine.info().model_name : options.served_model_name;
  options.poll_interval = std::chrono::milliseconds(5);
  server = std::make_unique<HttpServer>(engine, *codec, options);
  Status st = server->start_background();
  if (!st.is_ok()) throw std::runtime_error(st.to_string());
}

TestServer::~TestServer() { server.reset(); }

httplib::Client TestServer::client() const {
  httplib::Client c("127.0.0.1", server->port());
  c.set_keep_alive(false);
  c.set_read_timeout(30);
  return c;
}

httplib::Result TestServer::post(const std::string& path, const std::string& body,
                                 const httplib::Headers& headers) const {
  return client().Post(path.c_str(), headers, body, "application/json");
}

httplib::Result TestServer::get(const std::string& path, const httplib::Headers& headers) const {
  return client().Get(path.c_str(), headers);
}

int64_t TestServer::metric(const std::string& line_prefix) const {
  auto r = get("/metrics");
  if (!r || r->status != 200) return -1;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(line_prefix + " ", 0) == 0) return std::stoll(line.substr(line_prefix.size() + 1));
  }
  return -1;
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "SSE event not terminated by a blank line: " << body.substr(pos);
    if (end == std::string::npos) break;
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind(":", 0) == 0) continue;  // comment
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << "SSE event without 'data: ': " << event;
    EXPECT_EQ(event.find('\n'), std::string::npos) << "multi-line SSE event: " << event;
    out.push_back(event.substr(6));
  }
  return out;
}

std::string chat_body(const std::string& model, const std::string& user, const Json& extra) {
  Json j = {{"model", model}, {"messages", Json::array({Json{{"role", "user"}, {"content", user}}})}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j.dump();
}

bool post_and_hang_up(httplib::Client& client, const std::string& path, const std::string& body, int chunks,
                      const httplib::Headers& headers) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.headers = headers;
  req.set_header("Content-Type", "application/json");
  int seen = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++seen < chunks; };
  httplib::Response res;
  httplib::Error err;
  return client.send(req, res, err);
}

}  // namespace dsv4::server::test
