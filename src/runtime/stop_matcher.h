// runtime: stop strings matched on detokenized text across token boundaries. Text that could still be
// the start of a stop string is held back, so a client never sees a partial stop string; on a match the
// text before it is released and the stop string itself is dropped (OpenAI semantics).
#pragma once

#include <string>
#include <vector>

namespace dsv4 {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends the text released by one token. Returns the text that is now safe to emit; sets *stopped
  // when a stop string completed (the returned text then ends right before it and nothing follows).
  std::string push(const std::string& text, bool* stopped);
  // At the end of generation (length, EOS, stop token): everything held back.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  size_t hold_ = 0;      // longest stop string - 1: the tail that may still become a match
  std::string pending_;  // text not yet released
};

}  // namespace dsv4
