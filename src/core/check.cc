// core: the failure path of DSV4_CHECK.
#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace dsv4::detail {

void check_failed(const char* file, int line, const char* expr, std::string_view msg) {
  std::fprintf(stderr, "dsv4: internal invariant failed at %s:%d: %s%s%.*s\n", file, line, expr,
               msg.empty() ? "" : " — ", static_cast<int>(msg.size()), msg.data());
  std::fflush(stderr);
  std::abort();
}

}  // namespace dsv4::detail
