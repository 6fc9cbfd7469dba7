// kernels: runtime selection of the CPU instruction set. Kernels are compiled for several ISAs (per-file
// flags in src/kernels/CMakeLists.txt) and one dispatch point picks the best one the CPU supports, so
// the default build runs on any x86-64 CPU.
#pragma once

namespace dsv4::kernels {

enum class Isa {
  kAuto,    // the best supported ISA (resolve_isa)
  kScalar,  // portable C++; also the plain reference the fast kernels are tested against
  kAvx2,    // AVX2 + FMA + F16C
  kAvx512,  // AVX-512 F/BW/VL/DQ (+ F16C)
  kAmx,     // kAvx512 plus AMX-BF16 tiles for prefill-sized GEMMs (Linux, after the XTILEDATA permission)
};

// The best ISA this CPU (and this build) supports; detected once.
Isa best_isa();
bool isa_supported(Isa isa);
// kAuto → best_isa(); an unsupported request falls back to best_isa() (never executes illegal code).
Isa resolve_isa(Isa requested);
const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512", "amx"
// AVX512_BF16 (vdpbf16ps) on top of kAvx512: a sub-feature the kAvx512 / kAmx tiers use when present.
bool has_avx512_bf16();
// Parses isa_name() output plus "auto"; returns false for anything else.
bool parse_isa(const char* name, Isa* out);

}  // namespace dsv4::kernels
