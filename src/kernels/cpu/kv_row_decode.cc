// kernels: FP8 KV row decode — ISA dispatch and the scalar tier (core/kv_row.cc itself).
#include "kernels/cpu/kv_row_decode.h"

#include <span>

#include "core/check.h"

namespace dsv4::kernels {

namespace detail {

void decode_kv_rows_scalar(const KvRowLayout& layout, const uint8_t* const* entries, int64_t n, float* out) {
  const auto bytes = static_cast<size_t>(layout.bytes()), dims = static_cast<size_t>(layout.dims);
  for (int64_t i = 0; i < n; ++i) decode_kv_row(layout, {entries[i], bytes}, {out + i * layout.dims, dims});
}

}  // namespace detail

namespace {

detail::KvRowDecodeFn decode_fn(Isa isa) {
  switch (resolve_isa(isa)) {
#if defined(__x86_64__)
    case Isa::kAmx:
    case Isa::kAvx512Bf16:  // both tiers imply VBMI (isa.h)
      return detail::decode_kv_rows_avx512_vbmi;
    case Isa::kAvx512:
      return has_avx512_vbmi() ? detail::decode_kv_rows_avx512_vbmi : detail::decode_kv_rows_avx2;
    case Isa::kAvx2:
      return detail::decode_kv_rows_avx2;
#endif
    default:
      return detail::decode_kv_rows_scalar;
  }
}

}  // namespace

void decode_kv_rows(const KvRowLayout& layout, const uint8_t* const* entries, int64_t n, float* out, Isa isa) {
  DSV4_CHECK(layout.valid() && n >= 0, "decode_kv_rows: bad layout or count");
  decode_fn(isa)(layout, entries, n, out);
}

}  // namespace dsv4::kernels
