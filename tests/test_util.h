// tests: helpers shared by every suite — paths to ../shared and the CLI, temp dirs, running commands.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

namespace dsv4::test {

std::filesystem::path shared_dir();   // ../shared (golden, tokenizer, spec)
std::filesystem::path source_dir();   // the repository root
std::filesystem::path cli_path();     // the built `dsv4` binary

// A fresh, empty directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;      // 128 + signal if it was killed
  bool timed_out = false;  // it ran past its limit and was killed (output says so)
  std::string output;      // stdout and stderr interleaved
};
// Runs a shell command line, capturing its output. A command (and every process it started) still
// running after `limit` is killed, so a child that hangs — a client waiting for a server, a server
// waiting for a client — fails its test with the output so far instead of stalling the suite. The
// default only turns a hang into a message; pass a tighter one where a hang is a known failure mode.
CommandResult run_command(const std::string& command_line,
                          std::chrono::milliseconds limit = std::chrono::minutes(15));

std::string read_text_file(const std::filesystem::path& p);
void write_text_file(const std::filesystem::path& p, const std::string& text);

}  // namespace dsv4::test
