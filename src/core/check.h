// core: invariant checks. DSV4_CHECK is always on (programmer errors only, never user input);
// DSV4_DCHECK compiles away in release builds and is the only check allowed in hot loops.
#pragma once

#include <string>
#include <string_view>

namespace dsv4::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* expr, std::string_view msg);
}  // namespace dsv4::detail

#define DSV4_CHECK(cond, ...)                                                          \
  do {                                                                                 \
    if (!(cond)) [[unlikely]]                                                          \
      ::dsv4::detail::check_failed(__FILE__, __LINE__, #cond, ::std::string{__VA_ARGS__}); \
  } while (0)

#ifdef NDEBUG
#define DSV4_DCHECK(cond, ...) \
  do {                         \
  } while (0)
#else
#define DSV4_DCHECK(cond, ...) DSV4_CHECK(cond, __VA_ARGS__)
#endif
