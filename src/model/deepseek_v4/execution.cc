// model/deepseek_v4: backend names (CLI flags, logs).
#include "model/deepseek_v4/execution.h"

#include <cstring>

namespace dsv4 {

const char* backend_name(Backend b) { return b == Backend::kCpu ? "cpu" : "reference"; }

bool parse_backend(const char* name, Backend* out) {
  if (std::strcmp(name, "cpu") == 0) {
    *out = Backend::kCpu;
  } else if (std::strcmp(name, "reference") == 0) {
    *out = Backend::kReference;
  } else {
    return false;
  }
  return true;
}

}  // namespace dsv4
