// tools: `dsv4 detokenize` — token ids back to text, printed exactly (no added newline).
#include <cstdio>

#include "args.h"
#include "command.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage =
    "usage: dsv4 detokenize --tokenizer PATH --ids \"1,2,3\"\n"
    "  Ids may be separated by commas, spaces or both; [ ] are ignored, so JSON arrays work too.\n";

Result<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '[' || c == ']') {
      ++i;
      continue;
    }
    if (c < '0' || c > '9') return invalid_argument("cli.bad_ids", std::string("unexpected '") + c + "' in --ids");
    int64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      v = v * 10 + (s[i++] - '0');
      if (v > INT32_MAX) return invalid_argument("cli.bad_ids", "id too large in --ids");
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

int run_detokenize(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"--tokenizer", "--ids"}, {"--help"});
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    return report_error("detokenize", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!args->get("--tokenizer") || !args->get("--ids")) {
    std::fputs(kUsage, stderr);
    return report_error("detokenize", invalid_argument("cli.usage", "need --tokenizer and --ids"));
  }
  auto ids = parse_ids(*args->get("--ids"));
  if (!ids.is_ok()) return report_error("detokenize", ids.status());
  auto tok = Tokenizer::load(*args->get("--tokenizer"));
  if (!tok.is_ok()) return report_error("detokenize", tok.status());
  for (const int32_t id : *ids) {
    if (id >= tok->vocab_size() || tok->token_text(id).empty())
      return report_error("detokenize", out_of_range("cli.unknown_id", "id " + std::to_string(id) + " has no token"));
  }
  const std::string text = tok->decode(*ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace
DSV4_COMMAND("detokenize", "token ids -> text with a tokenizer.json", run_detokenize);
}  // namespace dsv4::cli
