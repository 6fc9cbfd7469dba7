// fuzz: corpus replay runner, built in every build: `dsv4_fuzz_replay TARGET DIR` feeds every file under
// DIR to TARGET's entry point, so seeds and minimized crashers run under ctest (and ASan in CI) without
// libFuzzer. A crash or a failed invariant aborts; an empty or missing corpus is an error too.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "fuzz_targets.h"

int main(int argc, char** argv) {
  using Entry = int (*)(const uint8_t*, size_t);
  const std::map<std::string, Entry> targets = {
      {"safetensors", dsv4::fuzz::safetensors_entry},
      {"index", dsv4::fuzz::index_entry},
      {"config", dsv4::fuzz::config_entry},
      {"npy", dsv4::fuzz::npy_entry},
      {"tokenizer_load", dsv4::fuzz::tokenizer_load_entry},
      {"tokenizer_encode", dsv4::fuzz::tokenizer_encode_entry},
      {"output_parser", dsv4::fuzz::output_parser_entry},
      {"chat_render", dsv4::fuzz::chat_render_entry},
  };
  if (argc != 3 || !targets.count(argv[1])) {
    std::fprintf(stderr, "usage: dsv4_fuzz_replay TARGET CORPUS_DIR; TARGET is one of:");
    for (const auto& [name, entry] : targets) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  const Entry entry = targets.at(argv[1]);
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(argv[2], ec))
    if (e.is_regular_file()) files.push_back(e.path());
  if (ec || files.empty()) {
    std::fprintf(stderr, "%s: no corpus files (%s)\n", argv[2], ec.message().c_str());
    return 1;
  }
  for (const auto& p : files) {
    std::ifstream f(p, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: replayed %zu inputs\n", argv[1], files.size());
  return 0;
}
