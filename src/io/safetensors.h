// io: safetensors checkpoints, single file or sharded (model.safetensors.index.json). Shards are mapped
// (lazily or populated) or copied to huge pages (CheckpointOptions), then validated strictly as untrusted
// input (docs/reliability.md §A) by the same code whatever the residency: every rejection is a Status with
// code kInvalidFile and a stable rule id naming the broken rule, the file and the tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/mapped_file.h"

namespace dsv4 {

inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;  // 100 MB, as the reference lib
inline constexpr size_t kMaxTensorRank = 8;
inline constexpr int kMaxHeaderJsonDepth = 16;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;     // outermost first
  uint64_t n_elements = 0;
  std::span<const std::byte> data;  // points into the mapping; valid while the owner lives
  int shard = 0;                    // index into Checkpoint::shard_paths()
};

// One .safetensors file, header parsed and validated; tensor data stays in the mapping.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::filesystem::path& path);
  // Validates a header + data section held in memory (used by open and by the fuzz target).
  static Result<std::vector<TensorInfo>> parse(std::span<const std::byte> file_bytes, std::string_view source);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::filesystem::path& path() const { return file_->path(); }

 private:
  std::unique_ptr<MappedFile> file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// How Checkpoint::open holds the shards' bytes.
struct CheckpointOptions {
  // kMmap: a read-only file mapping per shard. kCopy: a copy per shard in anonymous memory on huge pages
  // (faster decode: fewer TLB misses; costs a read of the checkpoint at load and unreclaimable memory).
  // kAuto: when the checkpoint fits comfortably (below), huge pages by the cheapest route per shard — the
  // populated mapping where the page cache holds the shard in 2 MiB folios (PMD-mapped: no copy, loads
  // in a blink when cached), else a copy; when it does not fit, a lazy mapping. Measured on the medium
  // model (2 threads, load average 7-14): decode 2.35-2.99 tokens per CPU-second on PMD-mapped file
  // folios, 2.72-2.85 on the copy, 2.08 on 4 KiB file pages; load 9-13 s mapped, 44-108 s copied.
  Residency residency = Residency::kMmap;
  // kMmap: fault every page in at open when the checkpoint fits comfortably, so decode never page-faults
  // (a checkpoint that does not fit would evict its own pages: it stays lazy). Tools that only read the
  // tensor table leave this off.
  bool populate = false;
  // "Fits comfortably": total shard bytes <= auto_copy_fraction × MemAvailable. 0.75 leaves a quarter of
  // what the kernel could give for the sequences' state pages, activations and the rest of the system
  // (and MemAvailable already counts the checkpoint's own page cache, which a copy drops as it reads).
  double auto_copy_fraction = 0.75;
  // MemAvailable in bytes (nullopt: unknown → kAuto maps, kCopy skips its memory check); tests inject a
  // limit. Default: /proc/meminfo.
  std::function<std::optional<uint64_t>()> mem_available;
  uint64_t copy_chunk_bytes = 64ull << 20;  // kCopy: pread size (each chunk then leaves the page cache)
  // NUMA placement of the shards' bytes (FileLoadOptions::placement); Model::load sets it from --numa.
  MemoryPlacement placement;
};

// What Checkpoint::open decided, and from what.
struct ResidencyChoice {
  Residency requested = Residency::kMmap;
  Residency resolved = Residency::kMmap;  // per shard: kMmap, kCopy, or kAuto (huge mapping, else copy)
  bool populate = false;                  // kMmap: pages faulted in at open
  uint64_t file_bytes = 0;                // all shards' file sizes
  std::optional<uint64_t> mem_available;  // as read at open
  // As it turned out (Checkpoint::open): bytes of shards held as copies and as file mappings.
  uint64_t copied_bytes = 0, mapped_bytes = 0;
  MemoryPlacement placement;   // as asked (CheckpointOptions::placement)
  std::string placement_note;  // empty, or why the placement was not applied (first shard that said so)
};
// "copy", "mmap", or "mixed" (some shards of each) — how a checkpoint's bytes ended up.
const char* resident_mode_name(const ResidencyChoice& c);
// The decision alone (no file is touched): kCopy with file_bytes > MemAvailable is kResourceExhausted
// (rule "checkpoint.copy_no_memory", hint: --weights mmap) before any byte is read.
Result<ResidencyChoice> choose_residency(const CheckpointOptions& options, uint64_t file_bytes);

// A model's weights: DIR/model.safetensors.index.json + shards, or DIR/*.safetensors, or one file.
class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::filesystem::path& dir_or_file, const CheckpointOptions& options = {});

  const ResidencyChoice& residency() const { return residency_; }

  const TensorInfo* find(std::string_view name) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const std::vector<std::filesystem::path>& shard_paths() const { return shard_paths_; }
  uint64_t total_bytes() const;
  // The shards' bytes in memory, [begin, end) per shard: where to look up which node holds the weights.
  std::vector<AddressRange> resident_ranges() const;

  // Loading progress (a progress bar): once set, find() reports each tensor the first time it is
  // looked up, as (bytes of the tensors reached so far, total_bytes()). A loader that decodes tensors
  // in the order it finds them thus reports the share of the checkpoint it has reached. Thread-safe.
  using Progress = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;
  void set_progress(Progress progress);

 private:
  struct ProgressState;
  void note_found(const TensorInfo& t) const;

  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::filesystem::path> shard_paths_;
  std::vector<TensorInfo> tensors_;
  ResidencyChoice residency_;
  std::shared_ptr<ProgressState> progress_;  // null: no progress reporting
};

// Writing (make-tiny, tests). Tensors are written in the given order, data packed back to back.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  std::vector<std::byte> bytes;
};
Status write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});
// Splits tensors across n_shards files "model-0000i-of-0000n.safetensors" and writes the index.
Status write_sharded_checkpoint(const std::filesystem::path& dir, const std::vector<TensorToWrite>& tensors,
                                int n_shards);

}  // namespace dsv4
