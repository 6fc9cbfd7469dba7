// runtime: stop strings across token boundaries (see stop_matcher.h).
#include "runtime/stop_matcher.h"

#include <algorithm>
#include <string_view>

namespace dsv4 {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
  for (const std::string& s : stops_) hold_ = std::max(hold_, s.size() - 1);
}

std::string StopMatcher::push(const std::string& text, bool* stopped) {
  *stopped = false;
  if (stops_.empty()) return text;
  pending_ += text;
  // Earliest match wins; the scan starts where a match could still begin (the previous tail).
  size_t best = std::string::npos;
  for (const std::string& s : stops_) best = std::min(best, pending_.find(s));
  if (best != std::string::npos) {
    *stopped = true;
    std::string out = pending_.substr(0, best);
    pending_.clear();
    return out;
  }
  // Hold back only the longest tail that is still a prefix of some stop string; keep the cut on a UTF-8
  // character boundary so released text stays valid UTF-8.
  size_t keep = 0;
  for (size_t len = std::min(hold_, pending_.size()); len > 0 && keep == 0; --len) {
    const std::string_view tail(pending_.data() + pending_.size() - len, len);
    for (const std::string& s : stops_) {
      if (s.size() > len && std::string_view(s).substr(0, len) == tail) {
        keep = len;
        break;
      }
    }
  }
  size_t cut = pending_.size() - keep;
  while (cut > 0 && cut < pending_.size() && (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80) --cut;
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace dsv4
