// kernels: CPU feature detection for the kernel dispatch point.
#include "kernels/cpu/isa.h"

#include <cstring>
#include <initializer_list>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dsv4::kernels {
namespace {

// AMX needs the CPU bits (CPUID.7.0:EDX AMX-TILE bit 24, AMX-BF16 bit 22) and, on Linux, a one-time
// per-process permission for the 8 KB tile state (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
// The AMX GEMMs' weight decode also uses AVX512_VBMI byte permutes (CPUID.7.0:ECX bit 1; every AMX CPU
// so far has it).
bool amx_usable() {
#if defined(__x86_64__) && defined(__linux__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!((d >> 24) & 1u) || !((d >> 22) & 1u) || !((c >> 1) & 1u)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// AVX512_BF16: CPUID.(EAX=7, ECX=1):EAX bit 5 (the caller has checked the AVX-512 base).
bool avx512_bf16_cpuid() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1u) != 0;
#else
  return false;
#endif
}

// kAvx512Bf16 also needs AVX512_VBMI (CPUID.7.0:ECX bit 1): its tiles decode FP8 with byte permutes.
// (Cooper Lake has AVX512_BF16 without it.)
bool avx512_bf16_tier_cpuid() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  return avx512_bf16_cpuid() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 1) & 1u) != 0;
#else
  return false;
#endif
}

Isa detect() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("f16c"))
    return amx_usable() ? Isa::kAmx : avx512_bf16_tier_cpuid() ? Isa::kAvx512Bf16 : Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

}  // namespace

bool has_avx512_bf16() {
#if defined(__x86_64__) && defined(__linux__)
  // CPUID.(EAX=7, ECX=1):EAX bit 5; the zmm state itself is covered by the kAvx512 detection.
  static const bool kHas = isa_supported(Isa::kAvx512) && avx512_bf16_cpuid();
  return kHas;
#else
  return false;
#endif
}

int cpu_family_from_leaf1(unsigned eax) {
  const int base = static_cast<int>((eax >> 8) & 0xFu);
  return base == 0xF ? base + static_cast<int>((eax >> 20) & 0xFFu) : base;
}

CpuModel cpu_model() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const CpuModel kModel = [] {
    CpuModel m;
    // Leaf 0: the vendor string in EBX, EDX, ECX ("Genu" "ineI" "ntel", "Auth" "enti" "cAMD").
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return m;
    char vendor[12];
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    if (std::memcmp(vendor, "GenuineIntel", 12) == 0) m.vendor = CpuVendor::kIntel;
    if (std::memcmp(vendor, "AuthenticAMD", 12) == 0) m.vendor = CpuVendor::kAmd;
    if (__get_cpuid(1, &a, &b, &c, &d)) m.family = cpu_family_from_leaf1(a);
    return m;
  }();
  return kModel;
#else
  return {};
#endif
}

bool is_intel_cpu() { return cpu_model().vendor == CpuVendor::kIntel; }

bool has_avx512_vnni_vbmi() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // CPUID.(EAX=7, ECX=0):ECX bit 11 (AVX512_VNNI) and bit 1 (AVX512_VBMI).
  static const bool kHas = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return isa_supported(Isa::kAvx512) && __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 11) & 1u) != 0 &&
           ((c >> 1) & 1u) != 0;
  }();
  return kHas;
#else
  return false;
#endif
}

bool has_avx512_vbmi() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // CPUID.(EAX=7, ECX=0):ECX bit 1 (AVX512_VBMI).
  static const bool kHas = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return isa_supported(Isa::kAvx512) && __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 1) & 1u) != 0;
  }();
  return kHas;
#else
  return false;
#endif
}

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
      return best_isa() != Isa::kScalar;
    case Isa::kAvx512:
      return best_isa() == Isa::kAvx512 || best_isa() == Isa::kAvx512Bf16 || best_isa() == Isa::kAmx;
    case Isa::kAvx512Bf16: {
      static const bool kHas = has_avx512_bf16() && avx512_bf16_tier_cpuid();
      return kHas;
    }
    case Isa::kAmx:
      return best_isa() == Isa::kAmx;
  }
  return false;
}

Isa batch_invariant_isa() { return best_isa() == Isa::kAmx ? Isa::kAvx512 : best_isa(); }

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
    case Isa::kAvx512Bf16:
      return "avx512bf16";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

bool parse_isa(const char* name, Isa* out) {
  for (Isa isa : {Isa::kAuto, Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    if (std::strcmp(name, isa_name(isa)) == 0) {
      *out = isa;
      return true;
    }
  }
  return false;
}

}  // namespace dsv4::kernels
