// runtime: paged state pool and its byte budget (see block_pool.h).
#include "runtime/block_pool.h"

#include <algorithm>
#include <string>

namespace dsv4 {

BlockPool::BlockPool(int32_t n_blocks) : refs_(static_cast<size_t>(n_blocks), 0) {
  DSV4_CHECK(n_blocks >= 0, "BlockPool: negative size");
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t i = n_blocks - 1; i >= 0; --i) free_.push_back(i);
}

Status BlockPool::allocate(int32_t n, std::vector<int32_t>* out) {
  if (n < 0 || n > free_count()) {
    return resource_exhausted("pool.exhausted", "need " + std::to_string(n) + " blocks, " +
                                                    std::to_string(free_count()) + " free");
  }
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = free_.back();
    free_.pop_back();
    refs_[static_cast<size_t>(id)] = 1;
    out->push_back(id);
  }
  return Status::ok();
}

void BlockPool::retain(int32_t id) {
  DSV4_CHECK(id >= 0 && id < total() && refs_[static_cast<size_t>(id)] > 0, "retain of a free block");
  ++refs_[static_cast<size_t>(id)];
}

void BlockPool::release(int32_t id) {
  DSV4_CHECK(id >= 0 && id < total() && refs_[static_cast<size_t>(id)] > 0, "release of a free block");
  if (--refs_[static_cast<size_t>(id)] == 0) free_.push_back(id);
}

void BlockPool::release_all(std::vector<int32_t>* ids) {
  for (int32_t id : *ids) release(id);
  ids->clear();
}

int32_t BlockPool::refcount(int32_t id) const {
  DSV4_CHECK(id >= 0 && id < total(), "refcount: bad block id");
  return refs_[static_cast<size_t>(id)];
}

Result<PoolPlan> plan_pool(const StateFootprint& footprint, int64_t budget_bytes, int32_t block_tokens,
                           int32_t checkpoint_interval, int64_t checkpoint_bytes) {
  if (block_tokens < 1) return invalid_argument("pool.bad_block_tokens", "block_tokens must be >= 1");
  if (checkpoint_interval < 0 || checkpoint_bytes < 0) {
    return invalid_argument("pool.bad_checkpoints", "checkpoint interval and bytes must be >= 0");
  }
  PoolPlan plan;
  plan.footprint = footprint;
  plan.block_tokens = block_tokens;
  plan.block_bytes = std::max<int64_t>(1, footprint.per_token() * block_tokens);
  plan.seq_blocks = static_cast<int32_t>((footprint.per_seq() + plan.block_bytes - 1) / plan.block_bytes);
  if (checkpoint_interval > 0) {
    plan.checkpoint_interval = checkpoint_interval;
    plan.checkpoint_bytes = checkpoint_bytes;
    plan.checkpoint_blocks = static_cast<int32_t>((checkpoint_bytes + plan.block_bytes - 1) / plan.block_bytes);
  }
  const int64_t n = budget_bytes / plan.block_bytes;
  if (n < 1) {
    return invalid_argument("pool.budget_too_small", "state budget of " + std::to_string(budget_bytes) +
                                                         " bytes holds no block of " +
                                                         std::to_string(plan.block_bytes) + " bytes");
  }
  plan.n_blocks = static_cast<int32_t>(std::min<int64_t>(n, 1 << 30));
  return plan;
}

}  // namespace dsv4
