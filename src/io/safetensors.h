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
  // (faster decode: fewer TLB misses; never reclaimed; costs a read of the checkpoint at load). kAuto: a
  // copy when it fits with margin, else a mapping (io/residency_policy.h says why, with measurements).
  Residency residency = Residency::kMmap;
  // A mapping: fault every page in at open when the checkpoint fits, so decode does not page-fault (a
  // checkpoint that does not fit would evict its own pages: it stays lazy); kMmap then also mlocks it
  // where the lock limit allows. Tools that only read the tensor table leave this off.
  bool populate = false;
  double auto_copy_fraction = 0.75;  // ResidencyRequest::copy_fraction: the margin a copy must leave
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
  bool lock = false;                      // kMmap: mlock asked (populate implied)
  std::string reason;                     // why this mode, in words (ResidencyDecision::reason)
  bool proactive_reclaim = false;         // the host pages out cold memory (host_memory.h)
  uint64_t file_bytes = 0;                // all shards' file sizes
  std::optional<uint64_t> mem_available;  // as read at open
  // As it turned out (Checkpoint::open): bytes of shards held as copies and as file mappings.
  uint64_t copied_bytes = 0, mapped_bytes = 0;
  uint64_t locked_bytes = 0;  // of mapped_bytes, mlocked
  std::string lock_note;      // empty, or why a shard could not be locked (first shard that said so)
  MemoryPlacement placement;   // as asked (CheckpointOptions::placement)
  std::string placement_note;  // empty, or why the placement was not applied (first shard that said so)
};
// "copy", "mmap", or "mixed" (some shards of each) — how a checkpoint's bytes ended up.
const char* resident_mode_name(const ResidencyChoice& c);
// The decision alone (no file is touched): decide_residency over this host's facts (MemAvailable from
// options.mem_available, the lock limit, proactive reclaim). kCopy with file_bytes > MemAvailable is
// kResourceExhausted (rule "checkpoint.copy_no_memory", hint: --weights mmap) before any byte is read.
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
  // Bytes of the shards in memory now (MappedFile::resident_bytes summed): below total_bytes() on a
  // mapping the kernel has reclaimed from (or a lazy one not yet read); nullopt where unknown.
  std::optional<uint64_t> resident_bytes() const;

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
