// bench: tokenizer throughput in MB/s of input text, single thread (goal ≥ 5 MB/s, issue 4).
// Cases: the oracle corpus (mixed scripts, code, special tokens, invalid UTF-8), English prose,
// CJK, and never-repeating synthetic words (a cold word cache: every word goes through BPE).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

const dsv4::Tokenizer& tokenizer() {
  static const dsv4::Tokenizer* t = [] {
    auto r = dsv4::Tokenizer::load(fs::path(DSV4_SHARED_DIR) / "tokenizer" / "tokenizer.json");
    if (!r.is_ok()) {
      std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
      std::abort();
    }
    return new dsv4::Tokenizer(std::move(r).value());
  }();
  return *t;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string& corpus() {
  static const std::string c = read_file(fs::path(DSV4_SOURCE_DIR) / "tests" / "data" / "tokenizer_corpus.txt");
  return c;
}

std::string repeat_to(const std::string& s, size_t n) {
  std::string out;
  while (out.size() < n) out += s;
  return out;
}

void encode_case(benchmark::State& state, const std::string& text) {
  const auto& t = tokenizer();
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = t.encode(text);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.counters["bytes/token"] = static_cast<double>(text.size()) / static_cast<double>(n_tokens ? n_tokens : 1);
}

void BM_tokenizer_encode_corpus(benchmark::State& state) {
  encode_case(state, corpus());
}

void BM_tokenizer_encode_english(benchmark::State& state) {
  static const std::string text = repeat_to(
      read_file("/usr/share/common-licenses/GPL-3") +
          "The quick brown fox jumps over the lazy dog. Tokenizers split text into pieces before merging bytes.\n",
      1 << 20);
  encode_case(state, text);
}

void BM_tokenizer_encode_cjk(benchmark::State& state) {
  static const std::string text = repeat_to(
      "深度学习模型的推理速度取决于内存带宽和计算能力。吾輩は猫である。名前はまだ無い。안녕하세요, 반갑습니다. ",
      1 << 20);
  encode_case(state, text);
}

// Words that never repeat: each goes through the BPE merge loop (no cache hit).
void BM_tokenizer_encode_unique_words(benchmark::State& state) {
  const auto& t = tokenizer();
  uint32_t seed = 1;
  auto make = [&] {
    std::string s;
    while (s.size() < (1 << 20)) {
      const int len = 3 + static_cast<int>(seed % 9);
      s.push_back(' ');
      for (int i = 0; i < len; ++i) {
        seed = seed * 1664525u + 1013904223u;
        s.push_back(static_cast<char>('a' + (seed >> 24) % 26));
      }
    }
    return s;
  };
  for (auto _ : state) {
    state.PauseTiming();
    const std::string text = make();  // fresh words every iteration
    state.ResumeTiming();
    auto ids = t.encode(text);
    benchmark::DoNotOptimize(ids.data());
    state.SetBytesProcessed(state.bytes_processed() + static_cast<int64_t>(text.size()));
  }
}

void BM_tokenizer_decode_stream(benchmark::State& state) {
  const auto& t = tokenizer();
  const auto ids = t.encode(corpus());
  for (auto _ : state) {
    dsv4::StreamDecoder sd(t);
    size_t n = 0;
    for (const int32_t id : ids) n += sd.push(id).size();
    n += sd.flush().size();
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus().size()));
}

BENCHMARK(BM_tokenizer_encode_corpus)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tokenizer_encode_english)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tokenizer_encode_cjk)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tokenizer_encode_unique_words)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tokenizer_decode_stream)->Unit(benchmark::kMillisecond);

}  // namespace
