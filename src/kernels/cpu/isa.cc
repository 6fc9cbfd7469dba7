// kernels: CPU feature detection for the kernel dispatch point.
#include "kernels/cpu/isa.h"

#include <cstring>
#include <initializer_list>

namespace dsv4::kernels {
namespace {

Isa detect() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("f16c"))
    return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

}  // namespace

Isa best_isa() {
  static const Isa kBest = detect();
  return kBest;
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return best_isa() == Isa::kAvx2 || best_isa() == Isa::kAvx512;
    case Isa::kAvx512:
      return best_isa() == Isa::kAvx512;
  }
  return false;
}

Isa resolve_isa(Isa requested) {
  if (requested == Isa::kAuto || !isa_supported(requested)) return best_isa();
  return requested;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
      return "auto";
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

bool parse_isa(const char* name, Isa* out) {
  for (Isa isa : {Isa::kAuto, Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (std::strcmp(name, isa_name(isa)) == 0) {
      *out = isa;
      return true;
    }
  }
  return false;
}

}  // namespace dsv4::kernels
