// server: a pre-parse scan of a request body's nesting depth, so a body like "[[[[…" is refused
// before the JSON parser recurses into it.
#pragma once

#include <string_view>

namespace dsv4::server {

// The maximum nesting depth of arrays/objects in `text`, ignoring brackets inside strings. Stops early
// (returning a value > limit) once `limit` is exceeded. Does not validate the JSON.
int json_nesting_depth(std::string_view text, int limit);

}  // namespace dsv4::server
