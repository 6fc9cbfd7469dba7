// tests/server: the official `openai` npm client (a script in tests/js) run by node against a server on
// 127.0.0.1, bounded in time, so a client that cannot start, connect or finish fails its test quickly.
#pragma once

#include <chrono>
#include <string>

namespace dsv4::server::test {

// Runs `node tests/js/<script> http://127.0.0.1:<port>/v1 <args>` and checks that it exits 0 having
// printed "checks passed"; prints its output. Fatal failures (check with ASSERT_NO_FATAL_FAILURE):
// tests/js/node_modules missing, the client still running after `limit` (it is killed).
void run_openai_client(const std::string& script, int port, const std::string& args, std::chrono::seconds limit);

}  // namespace dsv4::server::test
