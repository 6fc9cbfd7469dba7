// model/deepseek_v4: how a model runs its linears and MoE experts — the backend choice, the model's one
// persistent thread pool and the kernel ISA. Built once at load and carried in the ModelContext, so every
// module reaches it without extra parameters.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/quant_matmul.h"

namespace dsv4 {

// kReference: the scalar reference ops on weights decoded to fp32 at load (the oracle; needs RAM for
// every weight in fp32). kCpu: the kernels/cpu matmuls reading the checkpoint's packed FP8/FP4/BF16 weights
// in place (the engine's path).
enum class Backend { kReference, kCpu };

const char* backend_name(Backend b);                  // "reference", "cpu"
bool parse_backend(const char* name, Backend* out);  // false for anything else

namespace v4 {

struct Execution {
  Backend backend = Backend::kReference;
  ThreadPool* pool = nullptr;             // owned by the Model; nullptr runs on the calling thread
  kernels::Isa isa = kernels::Isa::kAuto;  // kCpu only
  kernels::AmxRouting amx;                 // kCpu with AMX: the fewest tokens per weight role that take it
};

// fn(i) for every i in [0, n) of independent items (tokens, head vectors): static chunks of at least
// `grain` items over the pool when there are more than `grain`, else a serial loop on the calling thread.
// Each item's work is the same either way, so the numbers are the serial loop's.
template <typename Fn>
void for_each_item(const Execution& ex, int64_t n, int64_t grain, Fn&& fn) {
  auto body = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) fn(i);
  };
  if (ex.pool != nullptr && n > grain) {
    ex.pool->parallel_for(n, grain, body);
  } else {
    body(0, n, 0);
  }
}

}  // namespace v4
}  // namespace dsv4
