// unit: checkpoint residency (io/safetensors.h CheckpointOptions) — a huge-page copy and a file mapping
// hold byte-identical tensors; auto picks by the (injected) available memory (the policy itself:
// residency_policy_test.cc); resident bytes and mlock as reported; a copy that cannot fit is a
// clear kResourceExhausted before any byte is read; a truncated or corrupt shard is the same error in
// every mode (one validation path). Also the page-memory helpers the copy and the probe stand on.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/host_memory.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace dsv4 {
namespace {

std::filesystem::path golden_dir() { return test::shared_dir() / "golden/tiny/checkpoint"; }

uint64_t golden_file_bytes() {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(golden_dir()))
    if (e.path().extension() == ".safetensors") n += std::filesystem::file_size(e.path());
  return n;
}

CheckpointOptions with(Residency r, std::optional<uint64_t> mem_available) {
  CheckpointOptions o;
  o.residency = r;
  o.populate = true;
  o.mem_available = [mem_available] { return mem_available; };
  return o;
}

TEST(CheckpointResidency, AutoCopiesOnlyWhatFitsComfortably) {
  const uint64_t file = 1000ull << 20;
  // 3/4 of MemAvailable is the line: 1000 MiB fits in 1334 MiB available, not in 1333.
  auto big = choose_residency(with(Residency::kAuto, 1334ull << 20), file);
  auto small = choose_residency(with(Residency::kAuto, 1333ull << 20), file);
  auto tiny = choose_residency(with(Residency::kAuto, 4096), file);
  auto unknown = choose_residency(with(Residency::kAuto, std::nullopt), file);
  ASSERT_TRUE(big.is_ok() && small.is_ok() && tiny.is_ok() && unknown.is_ok());
  EXPECT_EQ(big->resolved, Residency::kCopy);
  EXPECT_NE(big->reason.find("auto: copy"), std::string::npos) << big->reason;
  EXPECT_EQ(small->resolved, Residency::kMmap);
  EXPECT_TRUE(small->populate);  // fits in MemAvailable, not with the margin: mapped and faulted in
  EXPECT_FALSE(small->lock);
  EXPECT_EQ(tiny->resolved, Residency::kMmap);
  EXPECT_FALSE(tiny->populate);  // does not fit: faulting it all in would evict its own pages
  EXPECT_EQ(unknown->resolved, Residency::kMmap);  // no figure: the mapping is the safe choice
  EXPECT_EQ(big->requested, Residency::kAuto);
  EXPECT_EQ(big->file_bytes, file);
  EXPECT_EQ(big->mem_available, 1334ull << 20);
  EXPECT_EQ(big->proactive_reclaim, proactive_reclaim_active());

  // mmap populates when it fits, and only when asked; it locks where this process's limit allows.
  auto mm = choose_residency(with(Residency::kMmap, 1334ull << 20), file);
  ASSERT_TRUE(mm.is_ok());
  EXPECT_EQ(mm->resolved, Residency::kMmap);
  EXPECT_TRUE(mm->populate);
  EXPECT_EQ(mm->lock, lockable_bytes() >= file);
  CheckpointOptions lazy = with(Residency::kMmap, 1334ull << 20);
  lazy.populate = false;
  EXPECT_FALSE(choose_residency(lazy, file)->populate);
  EXPECT_FALSE(choose_residency(lazy, file)->lock);
}

TEST(CheckpointResidency, CopyThatCannotFitIsAClearErrorBeforeReading) {
  auto r = choose_residency(with(Residency::kCopy, 999ull << 20), 1000ull << 20);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().rule(), "checkpoint.copy_no_memory");
  EXPECT_NE(r.status().message().find("--weights mmap"), std::string::npos) << r.status().message();
  // An explicit copy is allowed up to all of MemAvailable (auto keeps a quarter back).
  auto fits = choose_residency(with(Residency::kCopy, 1000ull << 20), 1000ull << 20);
  ASSERT_TRUE(fits.is_ok());
  EXPECT_EQ(fits->resolved, Residency::kCopy);

  // Through Checkpoint::open: refused with the checkpoint's own size.
  auto ck = Checkpoint::open(golden_dir(), with(Residency::kCopy, golden_file_bytes() - 1));
  ASSERT_FALSE(ck.is_ok());
  EXPECT_EQ(ck.status().rule(), "checkpoint.copy_no_memory");
}

// Every tensor of the golden checkpoint: same names, dtypes, shapes, shards and bytes in both modes.
TEST(CheckpointResidency, CopyAndMmapHoldIdenticalTensors) {
  auto mm = Checkpoint::open(golden_dir(), with(Residency::kMmap, 64ull << 30));
  auto auto_copy = Checkpoint::open(golden_dir(), with(Residency::kAuto, 64ull << 30));
  auto auto_map = Checkpoint::open(golden_dir(), with(Residency::kAuto, 4096));
  // An odd chunk size: reads straddle pages and end short of the file, so chunk edges are exercised.
  CheckpointOptions odd = with(Residency::kCopy, std::nullopt);
  odd.copy_chunk_bytes = 4096 * 3 + 17;
  auto chunked = Checkpoint::open(golden_dir(), odd);
  ASSERT_TRUE(mm.is_ok()) << mm.status().to_string();
  ASSERT_TRUE(auto_copy.is_ok()) << auto_copy.status().to_string();
  ASSERT_TRUE(auto_map.is_ok()) << auto_map.status().to_string();
  ASSERT_TRUE(chunked.is_ok()) << chunked.status().to_string();
  const uint64_t file_bytes = golden_file_bytes();
  EXPECT_EQ(mm->residency().resolved, Residency::kMmap);
  EXPECT_TRUE(mm->residency().populate);
  EXPECT_EQ(mm->residency().mapped_bytes, file_bytes);
  EXPECT_STREQ(resident_mode_name(mm->residency()), "mmap");
  EXPECT_EQ(auto_copy->residency().resolved, Residency::kCopy);
  EXPECT_EQ(auto_copy->residency().copied_bytes, file_bytes);
  EXPECT_EQ(auto_map->residency().resolved, Residency::kMmap);
  EXPECT_EQ(auto_map->residency().mapped_bytes, file_bytes);
  EXPECT_EQ(chunked->residency().resolved, Residency::kCopy);
  EXPECT_EQ(chunked->residency().copied_bytes, file_bytes);
  EXPECT_EQ(chunked->residency().mapped_bytes, 0u);
  EXPECT_STREQ(resident_mode_name(chunked->residency()), "copy");
  EXPECT_EQ(mm->residency().file_bytes, file_bytes);
  EXPECT_EQ(mm->resident_bytes(), file_bytes);  // populated: every page in memory
  EXPECT_EQ(chunked->resident_bytes(), file_bytes);

  for (const Checkpoint* c : {&*auto_copy, &*auto_map, &*chunked}) {
    ASSERT_EQ(c->tensors().size(), mm->tensors().size());
    for (size_t i = 0; i < c->tensors().size(); ++i) {
      const TensorInfo &a = mm->tensors()[i], &b = c->tensors()[i];
      ASSERT_EQ(a.name, b.name);
      EXPECT_EQ(a.dtype, b.dtype) << a.name;
      EXPECT_EQ(a.shape, b.shape) << a.name;
      EXPECT_EQ(a.shard, b.shard) << a.name;
      ASSERT_EQ(a.data.size(), b.data.size()) << a.name;
      EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size()), 0) << a.name;
      // The copy keeps the file's layout: each tensor sits at the same offset from a 4 KiB boundary, so
      // every alignment-dependent choice of the loader is the same in both modes.
      EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data.data()) % 4096, reinterpret_cast<uintptr_t>(b.data.data()) % 4096)
          << a.name;
    }
  }
  // Tensors of the copy do not point into any file mapping: they live in the 2 MiB-aligned copy.
  const TensorInfo* first = nullptr;
  for (const TensorInfo& t : chunked->tensors())
    if (first == nullptr || t.data.data() < first->data.data()) first = &t;
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first->data.data(), mm->find(first->name)->data.data());
}

// One file: auto is the checkpoint policy's to resolve, so MappedFile refuses it; a populated mapping
// is all resident (mincore), a lazy one only what has been read, a copy always all; a locked mapping is
// reported as locked (this process's lock limit allowing) and holds the same bytes.
TEST(CheckpointResidency, ResidentBytesAndLock) {
  const auto shard = golden_dir() / "model-00001-of-00002.safetensors";
  const uint64_t size = std::filesystem::file_size(shard);
  FileLoadOptions auto_opt;
  auto_opt.residency = Residency::kAuto;
  auto refused = MappedFile::open(shard, auto_opt);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().rule(), "file.options");

  FileLoadOptions populated;
  populated.populate = true;
  FileLoadOptions locked = populated;
  locked.lock = true;
  FileLoadOptions copy;
  copy.residency = Residency::kCopy;
  auto plain = MappedFile::open(shard);
  auto pop = MappedFile::open(shard, populated);
  auto lk = MappedFile::open(shard, locked);
  auto cp = MappedFile::open(shard, copy);
  ASSERT_TRUE(plain.is_ok() && pop.is_ok() && lk.is_ok() && cp.is_ok());
  EXPECT_EQ((*pop)->resident_bytes(), size);
  EXPECT_EQ((*cp)->resident_bytes(), size);
  EXPECT_FALSE((*pop)->locked());
  EXPECT_FALSE((*cp)->locked());
  // The lazy mapping: at most the file, and (the first page's byte read) at least one page.
  volatile std::byte first = (*plain)->bytes()[0];
  (void)first;
  const auto lazy = (*plain)->resident_bytes();
  ASSERT_TRUE(lazy.has_value());
  EXPECT_GE(*lazy, 1u);
  EXPECT_LE(*lazy, size);
  if (lockable_bytes() >= size) {
    EXPECT_TRUE((*lk)->locked()) << (*lk)->lock_note();
    EXPECT_TRUE((*lk)->lock_note().empty());
    EXPECT_EQ((*lk)->resident_bytes(), size);
  } else {
    EXPECT_EQ((*lk)->locked(), (*lk)->lock_note().empty());
  }
  for (const auto* f : {&pop, &lk, &cp})
    EXPECT_EQ(std::memcmp((**f)->bytes().data(), (*plain)->bytes().data(), size), 0);
}

// A copy of the golden checkpoint with one shard damaged by `damage`.
void damaged_checkpoint(const std::filesystem::path& dir, const std::function<void(const std::filesystem::path&)>& damage) {
  std::filesystem::create_directories(dir);
  for (const auto& e : std::filesystem::directory_iterator(golden_dir()))
    if (e.is_regular_file()) std::filesystem::copy_file(e.path(), dir / e.path().filename());
  for (const auto& e : std::filesystem::directory_iterator(dir))
    std::filesystem::permissions(e.path(), std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  damage(dir / "model-00002-of-00002.safetensors");
}

void expect_same_error_in_every_mode(const std::filesystem::path& dir, const std::string& rule) {
  auto mm = Checkpoint::open(dir, with(Residency::kMmap, 64ull << 30));
  auto lazy = Checkpoint::open(dir, CheckpointOptions{});
  auto copy = Checkpoint::open(dir, with(Residency::kCopy, 64ull << 30));
  auto autom = Checkpoint::open(dir, with(Residency::kAuto, 64ull << 30));
  for (const auto* r : {&mm, &lazy, &copy, &autom}) {
    ASSERT_FALSE(r->is_ok());
    EXPECT_EQ(r->status().code(), StatusCode::kInvalidFile);
    EXPECT_EQ(r->status().rule(), rule) << r->status().to_string();
    EXPECT_EQ(r->status().message(), mm.status().message());
  }
}

TEST(CheckpointResidency, TruncatedShardIsTheSameErrorInEveryMode) {
  test::TempDir tmp;
  damaged_checkpoint(tmp.path(), [](const std::filesystem::path& shard) {
    std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 1000);
  });
  expect_same_error_in_every_mode(tmp.path(), "safetensors.offsets_past_eof");
}

TEST(CheckpointResidency, CorruptHeaderIsTheSameErrorInEveryMode) {
  test::TempDir tmp;
  damaged_checkpoint(tmp.path(), [](const std::filesystem::path& shard) {
    std::fstream f(shard, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(8);  // the header's opening '{'
    f.put('[');
  });
  expect_same_error_in_every_mode(tmp.path(), "safetensors.json_syntax");
}

TEST(CheckpointResidency, ResidencyNamesRoundTrip) {
  for (Residency r : {Residency::kMmap, Residency::kCopy, Residency::kAuto}) {
    Residency back = Residency::kMmap;
    ASSERT_TRUE(parse_residency(residency_name(r), &back));
    EXPECT_EQ(back, r);
  }
  Residency out = Residency::kCopy;
  EXPECT_FALSE(parse_residency("bogus", &out));
  EXPECT_FALSE(parse_residency("", &out));
  EXPECT_EQ(out, Residency::kCopy);
}

TEST(HostMemory, HugeRegionsAreAlignedAndBackedWhereTheKernelAllows) {
  auto huge = PageMemory::allocate(5ull << 20, PageKind::kHuge);
  auto small = PageMemory::allocate(12345, PageKind::kSmall);
  ASSERT_TRUE(huge.is_ok() && small.is_ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(huge->data()) % kHugePageBytes, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small->data()) % 4096, 0u);
  EXPECT_EQ(huge->size(), 5ull << 20);
  std::memset(huge->data(), 0x5A, huge->size());
  std::memset(small->data(), 0x5A, small->size());
  // The small kind never gets huge pages (MADV_NOHUGEPAGE). The huge kind: where THP is enabled
  // ("always" or "madvise"), the two whole 2 MiB pages of its 5 MiB are huge unless memory is too
  // fragmented to find them, so only the 4 KiB kind's figure is asserted exactly.
  if (auto s = anon_huge_bytes_at(small->data())) {
    EXPECT_EQ(*s, 0u);
  }
  if (auto h = anon_huge_bytes_at(huge->data())) {
    EXPECT_LE(*h, 6ull << 20);
  }
  EXPECT_TRUE(huge->protect_read_only().is_ok());
  EXPECT_EQ(static_cast<unsigned char>(huge->data()[huge->size() - 1]), 0x5A);
  // Moving transfers ownership; the moved-from object owns nothing.
  PageMemory moved = std::move(*huge);
  EXPECT_EQ(huge->data(), nullptr);
  EXPECT_EQ(moved.size(), 5ull << 20);
  EXPECT_FALSE(PageMemory::allocate(0, PageKind::kHuge).is_ok());
}

TEST(HostMemory, ParsesProcFields) {
  const std::string meminfo = "MemTotal:       24683656 kB\nMemFree:  100 kB\nMemAvailable:   23862332 kB\nHugePages_Total: 7\n";
  EXPECT_EQ(parse_kb_field(meminfo, "MemAvailable:"), 23862332ull * 1024);
  EXPECT_EQ(parse_kb_field(meminfo, "MemFree:"), 100ull * 1024);
  EXPECT_EQ(parse_kb_field(meminfo, "HugePages_Total:"), 7u);  // a count, not kB
  EXPECT_EQ(parse_kb_field(meminfo, "Cached:"), std::nullopt);
  EXPECT_EQ(parse_kb_field("MemAvailable: x kB", "MemAvailable:"), std::nullopt);
  // This machine's own figures, where /proc exists.
  if (std::filesystem::exists("/proc/meminfo")) {
    auto avail = mem_available_bytes();
    ASSERT_TRUE(avail.has_value());
    EXPECT_GT(*avail, 0u);
  }
  if (std::filesystem::exists("/proc/self/smaps_rollup")) {
    EXPECT_TRUE(process_huge_pages().known);
  }
}

}  // namespace
}  // namespace dsv4
