// kernels: decoding stored FP8 KV rows (core/kv_row.h) back to floats on the attention's hot path. Every
// decoded token reads, per layer, the window's earlier rows (up to window_size − 1), and per CSA layer its
// top-k compressed rows (512) or per HCA layer every compressed row: core's scalar decode_kv_row takes
// ~190-240 ns per 512-dim row on Zen 5, ~150 µs for one CSA query's 639 rows (dsv4_bench decode_kv_rows/*;
// `dsv4 bench --attention-only` reports the decode in its "rows" column).
//
// Numerics: bit-identical with dsv4::decode_kv_row on every ISA and for every byte pattern: each nope value
// is e4m3_to_float(code) · e8m0_to_float(scale) as one fp32 multiply (subnormal products, NaN codes and
// the NaN scale included; both NaN codes decode to e4m3_to_float's +qNaN), each rope value the bf16's
// float (tests/unit/kernel_kv_row_decode_test.cc).
#pragma once

#include <cstdint>

#include "core/kv_row.h"
#include "kernels/cpu/isa.h"

namespace dsv4::kernels {

// out [n, layout.dims] ← entries[i] [layout.bytes()] (layout.valid()). Runs on the calling thread; no
// allocation.
void decode_kv_rows(const KvRowLayout& layout, const uint8_t* const* entries, int64_t n, float* out, Isa isa);

namespace detail {
using KvRowDecodeFn = void (*)(const KvRowLayout& layout, const uint8_t* const* entries, int64_t n, float* out);
void decode_kv_rows_scalar(const KvRowLayout& layout, const uint8_t* const* entries, int64_t n, float* out);
#if defined(__x86_64__)
void decode_kv_rows_avx2(const KvRowLayout& layout, const uint8_t* const* entries, int64_t n, float* out);
void decode_kv_rows_avx512_vbmi(const KvRowLayout& layout, const uint8_t* const* entries, int64_t n, float* out);
#endif
}  // namespace detail

}  // namespace dsv4::kernels
