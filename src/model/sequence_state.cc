// model: the pools of per-sequence state (see sequence_state.h).
#include "model/sequence_state.h"

namespace dsv4 {

std::shared_ptr<KvPagePool> StatePools::partial_pool(int64_t dims, int32_t page_rows) {
  for (const auto& p : partial)
    if (p->layout().dims == dims && p->page_rows() == page_rows) return p;
  partial.push_back(std::make_shared<KvPagePool>(KvRowLayout{dims, 0}, KvStorage::kF32, page_rows, budget));
  return partial.back();
}

namespace {

void add(const KvPagePool& pool, StatePoolUsage* u) {
  const KvPoolStats s = pool.stats();
  u->pages_in_use += s.pages_in_use;
  u->pages_held += s.pages_created;
  u->bytes_in_use += s.bytes_in_use();
  u->bytes_held += s.bytes_held();
}

}  // namespace

StateMemory StatePools::usage() const {
  StateMemory m;
  if (window) add(*window, &m.window);
  if (main_rows) add(*main_rows, &m.main_rows);
  if (index_keys) add(*index_keys, &m.index_keys);
  for (const auto& p : partial) add(*p, &m.partial);
  m.budget_bytes = budget ? budget->max_bytes() : 0;
  return m;
}

}  // namespace dsv4
