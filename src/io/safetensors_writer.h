// io: streaming writer for sharded safetensors checkpoints. Every header is known up front (names,
// dtypes, shapes), so each shard's header is written first and tensor data is then appended piece by
// piece: a multi-GB model is written without ever holding it in memory. Produces the official layout:
// model-0000i-of-0000n.safetensors + model.safetensors.index.json (weight_map, metadata.total_size).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace dsv4 {

struct TensorHeader {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
};

class ShardedCheckpointWriter {
 public:
  // Plans shards of at most ~total/n_shards bytes each (a tensor is never split; tensors keep their
  // order) with n_shards = max(min_shards, ceil(total / max_shard_bytes)), clamped to the tensor count.
  static Result<std::unique_ptr<ShardedCheckpointWriter>> create(const std::filesystem::path& dir,
                                                                 std::vector<TensorHeader> tensors,
                                                                 uint64_t max_shard_bytes, int min_shards);
  ~ShardedCheckpointWriter();
  ShardedCheckpointWriter(const ShardedCheckpointWriter&) = delete;
  ShardedCheckpointWriter& operator=(const ShardedCheckpointWriter&) = delete;

  // Appends bytes to the stream of tensor data, in the declared tensor order; a call may span tensors.
  Status write(std::span<const uint8_t> bytes);
  // Checks every byte was written, publishes the shards (atomic renames) and writes the index.
  Status finish();

  int n_shards() const { return static_cast<int>(shard_names_.size()); }
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  ShardedCheckpointWriter() = default;
  Status open_shard(size_t shard);
  Status close_shard();

  std::filesystem::path dir_;
  std::vector<TensorHeader> tensors_;
  std::vector<uint64_t> tensor_bytes_;
  std::vector<size_t> shard_of_;            // tensor -> shard
  std::vector<std::string> shard_names_;
  std::vector<uint64_t> shard_data_bytes_;  // data-section size of each shard
  uint64_t total_bytes_ = 0;
  size_t cur_tensor_ = 0;
  uint64_t cur_offset_ = 0;  // bytes of tensors_[cur_tensor_] written so far
  std::FILE* file_ = nullptr;
  size_t open_shard_ = SIZE_MAX;
  bool finished_ = false;
};

}  // namespace dsv4
