// io: strict JSON parsing (see strict_json.h).
#include "io/strict_json.h"

#include <algorithm>
#include <set>
#include <vector>

namespace dsv4 {

int json_nesting_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[')
      max_depth = std::max(max_depth, ++depth);
    else if (c == '}' || c == ']')
      --depth;
  }
  return max_depth;
}

StrictJson parse_strict_json(std::string_view text, int max_depth) {
  StrictJson out;
  if (json_nesting_depth(text) > max_depth) {
    out.error = StrictJson::Error::kTooDeep;
    return out;
  }
  using nlohmann::json;
  // nlohmann reports an object's start at depth d and its keys at depth d + 1; one key set per open
  // object level (depth is bounded above, so this vector is small).
  std::vector<std::set<std::string>> keys_by_depth(static_cast<size_t>(max_depth) + 2);
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth < 0 || depth + 1 >= static_cast<int>(keys_by_depth.size())) return true;  // unreachable
    if (ev == json::parse_event_t::object_start) {
      keys_by_depth[static_cast<size_t>(depth) + 1].clear();
    } else if (ev == json::parse_event_t::key && out.error == StrictJson::Error::kNone) {
      std::string k = parsed.get<std::string>();
      if (!keys_by_depth[static_cast<size_t>(depth)].insert(k).second) {
        out.error = StrictJson::Error::kDuplicateKey;
        out.duplicate_depth = depth;
        out.duplicate_key = std::move(k);
      }
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    out.error = StrictJson::Error::kSyntax;
    return out;
  }
  if (out.error == StrictJson::Error::kNone) out.value = std::move(j);
  return out;
}

}  // namespace dsv4
