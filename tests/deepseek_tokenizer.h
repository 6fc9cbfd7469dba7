// tests: the real DeepSeek tokenizer (../shared/tokenizer/tokenizer.json), loaded once per test process.
// A load failure is a test failure and aborts: every caller needs it, and nothing else can be checked.
#pragma once

#include <cstdlib>

#include <gtest/gtest.h>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::test {

inline const Tokenizer& deepseek_tokenizer() {
  static const Tokenizer* t = [] {
    auto r = Tokenizer::load(shared_dir() / "tokenizer" / "tokenizer.json");
    if (!r.is_ok()) {
      ADD_FAILURE() << r.status().to_string();
      std::abort();
    }
    return new Tokenizer(std::move(r).value());
  }();
  return *t;
}

}  // namespace dsv4::test
