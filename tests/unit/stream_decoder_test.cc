// unit: the streaming detokenizer emits only complete UTF-8 and, concatenated, equals decode().
#include "tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include "deepseek_tokenizer.h"
#include "test_util.h"
#include "tokenizer/utf8.h"

namespace dsv4 {
namespace {

const Tokenizer& deepseek() { return test::deepseek_tokenizer(); }

TEST(StreamDecoder, ChunksAreCompleteUtf8AndConcatenateToDecode) {
  const Tokenizer& t = deepseek();
  for (const std::string text :
       {"Hello, 世界! 👨‍👩‍👧‍👦 🇯🇵 é", "龘齉鱻 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀😀😀 ok",
        "<think>推理</think>答案<｜end▁of▁sentence｜>", "plain ascii only", "ع ر ب ي ة ١٢٣ नमस्ते"}) {
    const auto ids = t.encode(text);
    StreamDecoder sd(t);
    std::string all;
    size_t split_chars = 0;
    for (const int32_t id : ids) {
      const std::string chunk = sd.push(id);
      EXPECT_TRUE(tok::is_valid_utf8(chunk)) << text;
      if (t.token_bytes(id).size() != chunk.size()) ++split_chars;
      all += chunk;
    }
    all += sd.flush();
    EXPECT_EQ(all, t.decode(ids));
    EXPECT_EQ(all, text);
  }
}

TEST(StreamDecoder, HoldsAPartialCharacterUntilItCompletes) {
  const Tokenizer& t = deepseek();
  // 中 is E4 B8 AD: feed its bytes as three single-byte tokens.
  const int32_t b0 = *t.token_id("ä"), b1 = *t.token_id("¸"), b2 = *t.token_id("Ń");  // E4, B8, AD (AD is remapped)
  ASSERT_EQ(t.token_bytes(b2), "\xAD");
  StreamDecoder sd(t);
  EXPECT_EQ(sd.push(b0), "");
  EXPECT_EQ(sd.pending_bytes(), 1u);
  EXPECT_EQ(sd.push(b1), "");
  EXPECT_EQ(sd.push(b2), "中");
  EXPECT_EQ(sd.pending_bytes(), 0u);
  // An incomplete character at the end becomes U+FFFD on flush, as decode() gives.
  EXPECT_EQ(sd.push(b0), "");
  EXPECT_EQ(sd.flush(), "\uFFFD");
  // A byte that can never start a character is replaced at once, and the next text still flows.
  EXPECT_EQ(sd.push(b1), "\uFFFD");
  EXPECT_EQ(sd.push(*t.token_id("a")), "a");
  EXPECT_EQ(sd.push(b0), "");
  EXPECT_EQ(sd.push(*t.token_id("a")), "\uFFFDa");
}

}  // namespace
}  // namespace dsv4
