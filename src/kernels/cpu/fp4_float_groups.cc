// kernels: the FP4 float-group tally (fp4_float_groups.h). One relaxed atomic add per preparing call that
// has any.
#include "kernels/cpu/fp4_float_groups.h"

#include <atomic>

namespace dsv4::kernels {
namespace {
std::atomic<uint64_t> g_groups{0};
}  // namespace

uint64_t fp4_float_groups() { return g_groups.load(std::memory_order_relaxed); }

namespace detail {
void note_fp4_float_groups(uint64_t n) { g_groups.fetch_add(n, std::memory_order_relaxed); }
}  // namespace detail

}  // namespace dsv4::kernels
