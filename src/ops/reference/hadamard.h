// ops/reference: the Sylvester (natural-order) Walsh–Hadamard rotation of the indexer (spec §2.6 step 2):
// y = H_n·x / √n, H[i][j] = (−1)^popcount(i & j). Input bf16 values; output rounded to bf16.
#pragma once

#include <cstdint>

namespace dsv4::ref {

// In place on x[n], n a power of two.
void hadamard_rotate(float* x, int64_t n);

}  // namespace dsv4::ref
