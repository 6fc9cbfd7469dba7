// tools: `dsv4 tokenize` — text to token ids with a tokenizer.json (a debugging and oracle tool).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "args.h"
#include "command.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage =
    "usage: dsv4 tokenize --tokenizer PATH (--text T | --file F) [--json] [--no-special]\n"
    "  Prints the ids, space-separated (or a JSON array with --json). --no-special encodes\n"
    "  special-token strings in the text as plain text.\n";

int run_tokenize(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"--tokenizer", "--text", "--file"}, {"--json", "--no-special", "--help"});
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    return report_error("tokenize", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const auto path = args->get("--tokenizer");
  if (!path || args->has("--text") == args->has("--file")) {
    std::fputs(kUsage, stderr);
    return report_error("tokenize", invalid_argument("cli.usage", "need --tokenizer and exactly one of --text/--file"));
  }
  std::string text;
  if (auto t = args->get("--text")) {
    text = *t;
  } else {
    std::ifstream f(*args->get("--file"), std::ios::binary);
    if (!f) return report_error("tokenize", not_found("cli.file_not_found", "cannot open " + *args->get("--file")));
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  auto tok = Tokenizer::load(*path);
  if (!tok.is_ok()) return report_error("tokenize", tok.status());
  const std::vector<int32_t> ids = tok->encode(text, !args->has("--no-special"));
  std::string out;
  out.reserve(ids.size() * 7 + 2);
  const bool json = args->has("--json");
  if (json) out.push_back('[');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += json ? "," : " ";
    out += std::to_string(ids[i]);
  }
  if (json) out.push_back(']');
  out.push_back('\n');
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace
DSV4_COMMAND("tokenize", "text -> token ids with a tokenizer.json", run_tokenize);
}  // namespace dsv4::cli
