// kernels: the bf16-refusal tally (bf16_refusals.h). One relaxed atomic increment, on refusal paths only.
#include "kernels/cpu/bf16_refusals.h"

#include <atomic>

namespace dsv4::kernels {
namespace {
std::atomic<uint64_t> g_refusals{0};
}  // namespace

uint64_t bf16_refusals() { return g_refusals.load(std::memory_order_relaxed); }

namespace detail {
void note_bf16_refusal() { g_refusals.fetch_add(1, std::memory_order_relaxed); }
}  // namespace detail

}  // namespace dsv4::kernels
