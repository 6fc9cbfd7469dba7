// io: streaming sharded safetensors writer (header first from known shapes, then data).
#include "io/safetensors_writer.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checked_math.h"

namespace dsv4 {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

Result<std::unique_ptr<ShardedCheckpointWriter>> ShardedCheckpointWriter::create(const fs::path& dir,
                                                                                  std::vector<TensorHeader> tensors,
                                                                                  uint64_t max_shard_bytes, int min_shards) {
  if (tensors.empty()) return invalid_argument("safetensors.write_empty", "no tensors to write");
  if (max_shard_bytes == 0 || min_shards < 1) return invalid_argument("safetensors.shards", "bad shard limits");
  std::unique_ptr<ShardedCheckpointWriter> w(new ShardedCheckpointWriter());
  w->dir_ = dir;
  for (const auto& t : tensors) {
    const auto elems = checked_product(t.shape);
    const auto bytes = elems ? checked_mul(*elems, dtype_size(t.dtype)) : std::nullopt;
    if (!bytes) return invalid_argument("safetensors.write_size", t.name + ": shape overflows");
    w->tensor_bytes_.push_back(*bytes);
    w->total_bytes_ += *bytes;
  }
  uint64_t n_shards = std::max<uint64_t>(min_shards, (w->total_bytes_ + max_shard_bytes - 1) / max_shard_bytes);
  n_shards = std::min<uint64_t>(n_shards, tensors.size());
  const uint64_t target = (w->total_bytes_ + n_shards - 1) / n_shards;
  size_t shard = 0;
  uint64_t in_shard = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    // Move on once this shard is full, keeping enough tensors for the shards still to fill.
    if (in_shard > 0 && in_shard + w->tensor_bytes_[i] > target && shard + 1 < n_shards) {
      ++shard;
      in_shard = 0;
    }
    w->shard_of_.push_back(shard);
    in_shard += w->tensor_bytes_[i];
  }
  n_shards = shard + 1;
  for (size_t s = 0; s < n_shards; ++s) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", s + 1, static_cast<size_t>(n_shards));
    w->shard_names_.push_back(buf);
    w->shard_data_bytes_.push_back(0);
  }
  for (size_t i = 0; i < tensors.size(); ++i) w->shard_data_bytes_[w->shard_of_[i]] += w->tensor_bytes_[i];
  w->tensors_ = std::move(tensors);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error("safetensors.write_dir", dir.string() + ": " + ec.message());
  return w;
}

ShardedCheckpointWriter::~ShardedCheckpointWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) {
    std::error_code ec;  // an abandoned write leaves no half-written shard behind
    for (const auto& n : shard_names_) fs::remove(dir_ / (n + ".tmp"), ec);
  }
}

Status ShardedCheckpointWriter::open_shard(size_t shard) {
  const fs::path tmp = dir_ / (shard_names_[shard] + ".tmp");
  file_ = std::fopen(tmp.c_str(), "wb");
  if (file_ == nullptr) return io_error("safetensors.write_open", tmp.string() + ": cannot open for writing");
  std::setvbuf(file_, nullptr, _IOFBF, 4 << 20);
  open_shard_ = shard;
  ordered_json header = ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (shard_of_[i] != shard) continue;
    header[tensors_[i].name] = {{"dtype", std::string(dtype_name(tensors_[i].dtype))},
                                {"shape", tensors_[i].shape},
                                {"data_offsets", {offset, offset + tensor_bytes_[i]}}};
    offset += tensor_bytes_[i];
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // 8-byte aligned data section, as the reference lib
  const uint64_t n = text.size();
  if (std::fwrite(&n, 8, 1, file_) != 1 || std::fwrite(text.data(), 1, text.size(), file_) != text.size())
    return io_error("safetensors.write", tmp.string() + ": write failed");
  return Status::ok();
}

Status ShardedCheckpointWriter::close_shard() {
  if (file_ == nullptr) return Status::ok();
  const bool ok = std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) return io_error("safetensors.write", shard_names_[open_shard_] + ": flush failed (disk full?)");
  return Status::ok();
}

Status ShardedCheckpointWriter::write(std::span<const uint8_t> bytes) {
  if (finished_) return internal_error("safetensors.write_order", "write after finish");
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (cur_tensor_ >= tensors_.size())
      return invalid_argument("safetensors.write_overflow", "more bytes written than the declared tensors hold");
    const size_t shard = shard_of_[cur_tensor_];
    if (shard != open_shard_) {
      DSV4_RETURN_IF_ERROR(close_shard());
      DSV4_RETURN_IF_ERROR(open_shard(shard));
    }
    const uint64_t room = tensor_bytes_[cur_tensor_] - cur_offset_;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(room, bytes.size() - pos));
    if (n > 0 && std::fwrite(bytes.data() + pos, 1, n, file_) != n)
      return io_error("safetensors.write", shard_names_[shard] + ": write failed (disk full?)");
    pos += n;
    cur_offset_ += n;
    // Advance past this tensor and any zero-byte tensors that follow it.
    while (cur_tensor_ < tensors_.size() && cur_offset_ == tensor_bytes_[cur_tensor_]) {
      ++cur_tensor_;
      cur_offset_ = 0;
    }
  }
  return Status::ok();
}

Status ShardedCheckpointWriter::finish() {
  while (cur_tensor_ < tensors_.size() && cur_offset_ == 0 && tensor_bytes_[cur_tensor_] == 0) ++cur_tensor_;
  if (cur_tensor_ != tensors_.size())
    return invalid_argument("safetensors.write_short",
                            "tensor '" + tensors_[cur_tensor_].name + "' and later ones were not fully written");
  // Shards holding only zero-byte tensors were never opened by write(): emit their headers now.
  for (size_t s = 0; s < shard_names_.size(); ++s) {
    std::error_code ec;
    if (!fs::exists(dir_ / (shard_names_[s] + ".tmp"), ec)) {
      DSV4_RETURN_IF_ERROR(close_shard());
      DSV4_RETURN_IF_ERROR(open_shard(s));
    }
  }
  DSV4_RETURN_IF_ERROR(close_shard());
  for (const auto& n : shard_names_) {
    std::error_code ec;
    fs::rename(dir_ / (n + ".tmp"), dir_ / n, ec);
    if (ec) return io_error("safetensors.write_rename", (dir_ / n).string() + ": " + ec.message());
  }
  finished_ = true;
  ordered_json weight_map = ordered_json::object();
  for (size_t i = 0; i < tensors_.size(); ++i) weight_map[tensors_[i].name] = shard_names_[shard_of_[i]];
  const ordered_json index = {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", weight_map}};
  const fs::path index_path = dir_ / "model.safetensors.index.json";
  std::ofstream f(index_path, std::ios::trunc);
  if (!f) return io_error("safetensors.write_index", index_path.string() + ": cannot open");
  f << index.dump(2) << "\n";
  f.close();
  return f.good() ? Status::ok() : io_error("safetensors.write_index", index_path.string() + ": write failed");
}

}  // namespace dsv4
