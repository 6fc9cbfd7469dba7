// unit: the BPE lookup structures (tokenizer/bpe_tables.h) against std::map / recomputation, and the
// word cache's effect on encode: results are identical cold, warm and after the cache is dropped.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "test_util.h"
#include "tokenizer/bpe_tables.h"
#include "tokenizer/tokenizer.h"

namespace dsv4 {
namespace {

TEST(MergeTable, MatchesStdMapThroughGrowthAndOverwrites) {
  tok::MergeTable t;  // starts small: inserting 50k pairs rehashes many times
  std::map<std::pair<int32_t, int32_t>, tok::MergeInfo> ref;
  std::mt19937 rng(7);
  for (int32_t i = 0; i < 50000; ++i) {
    const int32_t a = static_cast<int32_t>(rng() % 3000), b = static_cast<int32_t>(rng() % 3000);
    t.insert_or_assign(a, b, {i, a + b});
    ref[{a, b}] = {i, a + b};
  }
  EXPECT_EQ(t.size(), ref.size());
  for (const auto& [k, v] : ref) {
    const tok::MergeInfo* got = t.find(k.first, k.second);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->rank, v.rank);
    EXPECT_EQ(got->new_id, v.new_id);
  }
  for (int32_t a = 3000; a < 3100; ++a) EXPECT_EQ(t.find(a, 1), nullptr);
  EXPECT_EQ(t.find(0x7fffffff, 0x7fffffff), nullptr);
}

TEST(WordCache, StoresLooksUpAndSurvivesBeingDropped) {
  tok::WordCache c;
  std::vector<int32_t> out{99};
  const std::string w = "hello";
  EXPECT_FALSE(c.lookup(w, tok::WordCache::hash(w), out));
  const int32_t ids[] = {1, 2, 3};
  c.store(w, tok::WordCache::hash(w), ids, 3);
  ASSERT_TRUE(c.lookup(w, tok::WordCache::hash(w), out));
  EXPECT_EQ(out, (std::vector<int32_t>{99, 1, 2, 3}));
  // 200k distinct words overflow the index (and the arena) several times; the latest are found and
  // each found entry is the one stored for that word.
  for (int i = 0; i < 200000; ++i) {
    const std::string k = "w" + std::to_string(i);
    const int32_t v[] = {i, -i};
    c.store(k, tok::WordCache::hash(k), v, 2);
  }
  int found = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::string k = "w" + std::to_string(i);
    std::vector<int32_t> got;
    if (!c.lookup(k, tok::WordCache::hash(k), got)) continue;
    ++found;
    EXPECT_EQ(got, (std::vector<int32_t>{i, -i})) << k;
  }
  EXPECT_GT(found, 0);
  std::vector<int32_t> got;
  const std::string last = "w199999";
  EXPECT_TRUE(c.lookup(last, tok::WordCache::hash(last), got));
  const std::string too_long(tok::WordCache::kMaxWordBytes + 1, 'x');
  c.store(too_long, tok::WordCache::hash(too_long), ids, 3);
  EXPECT_FALSE(c.lookup(too_long, tok::WordCache::hash(too_long), got));
}

TEST(WordCache, EncodeIsTheSameColdWarmAndAfterTheCacheIsDropped) {
  auto t = Tokenizer::load(test::shared_dir() / "tokenizer" / "tokenizer.json");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  // 100k distinct words: more than the cache holds, so it is dropped at least once mid-text.
  std::string text;
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    text += ' ';
    const int len = 2 + static_cast<int>(rng() % 8);
    for (int j = 0; j < len; ++j) text += static_cast<char>('a' + rng() % 26);
  }
  const auto cold = t->encode(text);
  const auto warm = t->encode(text);
  EXPECT_EQ(cold, warm);
  EXPECT_EQ(t->decode(cold), text);
  // A fresh tokenizer encoding word by word (its cache only ever holds the current word) agrees.
  auto fresh = Tokenizer::load(test::shared_dir() / "tokenizer" / "tokenizer.json");
  ASSERT_TRUE(fresh.is_ok());
  std::vector<int32_t> by_word;
  for (size_t i = 0; i < 2000;) {
    const size_t j = text.find(' ', i + 1);
    const auto ids = fresh->encode(std::string_view(text).substr(i, j - i));
    by_word.insert(by_word.end(), ids.begin(), ids.end());
    i = j;
  }
  ASSERT_LE(by_word.size(), cold.size());
  EXPECT_TRUE(std::equal(by_word.begin(), by_word.end(), cold.begin()));
}

}  // namespace
}  // namespace dsv4
