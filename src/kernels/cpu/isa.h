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
  // kAvx512 plus AVX512_BF16 + VBMI: the quantized GEMV/GEMM tiles do their products with VDPBF16PS (32 bf16
  // pairs per instruction) on weights decoded to bf16 by byte/word table lookups. The best tier on CPUs
  // that have it without AMX (AMD Zen 4/5: VDPBF16PS issues as often as an fp32 FMA and does twice the
  // products). Intel CPUs with AMX support it too but stay on kAmx: there VDPBF16PS costs two cycles of
  // both vector ports, and the fp32 tiles measured faster (quant_tiles_fp4_avx512.cc).
  kAvx512Bf16,
  kAmx,  // kAvx512 plus AMX-BF16 tiles for prefill-sized GEMMs (Linux, after the XTILEDATA permission)
};

// The best ISA this CPU (and this build) supports; detected once.
Isa best_isa();
bool isa_supported(Isa isa);
// kAuto → best_isa(); an unsupported request falls back to best_isa() (never executes illegal code).
Isa resolve_isa(Isa requested);
const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512", "avx512bf16", "amx"
// AVX512_BF16 (vdpbf16ps) on top of kAvx512 (the compute probe's vdpbf16ps row; kAvx512Bf16 needs it).
bool has_avx512_bf16();
// AVX512_VNNI (vpdpbusd) and AVX512_VBMI (byte permutes) on top of kAvx512: the integer indexer of the AVX-512
// tiers (indexer_int8_avx512.cc). Ice Lake, Sapphire Rapids, Zen 4 and later have both; Skylake-SP and
// Cascade Lake do not (their tiers score packed keys on AVX2's integer path, indexer.cc packed_path).
bool has_avx512_vnni_vbmi();
// AVX512_VBMI alone on top of kAvx512 (every kAvx512Bf16 and kAmx CPU has it; Ice Lake too): the FP8 KV row
// decode's byte permutes (kv_row_decode.h).
bool has_avx512_vbmi();
// The CPU's vendor (CPUID leaf 0) and display family (leaf 1): where a tuning measured differently on one
// kind of core (row_pairs.h stream_prefetch_bytes, quant_tiles.h fp8_avx2_rebias). AMD Zen 3 and Zen 4
// report family 0x19, Zen 5 0x1A. {kOther, 0} off x86-64.
enum class CpuVendor { kOther, kIntel, kAmd };
struct CpuModel {
  CpuVendor vendor = CpuVendor::kOther;
  int family = 0;
};
CpuModel cpu_model();
// The display family of a CPUID leaf-1 EAX: the base family (bits 8..11), plus the extended family (bits
// 20..27) where the base is 0xF, as Intel's and AMD's manuals define it (and Linux's "cpu family").
int cpu_family_from_leaf1(unsigned eax);
bool is_intel_cpu();  // cpu_model().vendor == CpuVendor::kIntel
// The fastest ISA whose results do not depend on which requests share a batch: best_isa() except that
// AMX (which sums GEMMs of >= 16 rows in another order) gives way to kAvx512. Engines that batch
// independent requests (serve, generate-batch, bench-engine) default to it.
Isa batch_invariant_isa();
// Parses isa_name() output plus "auto"; returns false for anything else.
bool parse_isa(const char* name, Isa* out);

}  // namespace dsv4::kernels
