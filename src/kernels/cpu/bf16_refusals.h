// kernels: a process-wide count of calls in which a kernel found activations that bf16 cannot hold
// exactly and took its fallback path (AMX GEMM → vector tiles, FP4 nibble-plane tile → block-order tile,
// AMX indexer scores → AVX-512, or the MoE layer's packs, which assume exactness), or, for the FP4
// VDPBF16PS tile, nonzero activations below 2^-100 that its flush-to-zero could touch (→ AVX-512 tiles),
// and the BF16 VDPBF16PS tile's guard (per call: a token with inexact or below-2^-56 activations; per
// tile: a weight row with nonzero weights below 2^-56; it decides per token and per row, so it keeps batch
// invariance). The other decisions are made per call (or per 16-key group), so a refusal caused by one row
// would move every other row of the call to another summation order: batch invariance rests on the model
// rounding every activation these kernels see to bf16 first (spec §2.0). Tests and benches assert the count stays zero across real
// forwards; the refusal paths are the only ones that touch it.
#pragma once

#include <cstdint>

namespace dsv4::kernels {

// Refusals since the process started (relaxed: a monotonic tally, read between forwards).
uint64_t bf16_refusals();

namespace detail {
void note_bf16_refusal();
}  // namespace detail

}  // namespace dsv4::kernels
