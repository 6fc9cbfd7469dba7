// model/deepseek_v4: grow-only scratch vectors for the step loop. A warm decode step must not touch the
// heap, so per-thread buffers keep their capacity across calls; one that tracks a growing state table is
// given room for every row the table's held pages can take, so it reallocates only when the table takes a
// new page (a page crossing allocates anyway), not every time the state grows by a row.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/scratch.h"
#include "model/kv_pages.h"

namespace dsv4::v4 {

// Rows `t` can hold before it needs another page: its first held row plus its pages' capacity.
inline int64_t rows_until_next_page(const KvPageTable& t) {
  return t.bound() ? t.first_row() + t.n_pages() * t.pool().page_rows() : t.size();
}

// Resizes v to n elements; when that needs more capacity, reserves max(n, room) at once.
template <typename T>
T* grow_only(std::vector<T>& v, int64_t n, int64_t room = 0) {
  const auto need = static_cast<size_t>(n);
  if (v.capacity() < need) v.reserve(std::max(need, static_cast<size_t>(std::max<int64_t>(room, 0))));
  v.resize(need);
  return v.data();
}

// The trimmable per-thread buffer (core/scratch.h): the same growth, and memory given back a few steps
// after a large prefill.
template <typename T>
T* grow_only(ScratchVec<T>& v, int64_t n, int64_t room = 0) {
  return v.grow(n, room);
}

}  // namespace dsv4::v4
