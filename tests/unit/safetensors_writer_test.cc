// unit: the streaming sharded writer produces checkpoints the strict loader accepts, byte for byte,
// however the data stream is cut; misuse (short or long streams) is an error, never a bad file.
#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "test_util.h"

namespace dsv4 {
namespace {

std::vector<TensorHeader> headers() {
  return {{"a.weight", DType::kBF16, {3, 5}},
          {"b.scale", DType::kF8E8M0, {1, 2}},
          {"c", DType::kF32, {7}},
          {"d.tid2eid", DType::kI64, {4, 2}},
          {"e.weight", DType::kI8, {9, 4}}};
}

TEST(ShardedCheckpointWriter, StreamedPiecesReadBackExactly) {
  const auto hs = headers();
  uint64_t total = 0;
  for (const auto& h : hs) {
    uint64_t n = dtype_size(h.dtype);
    for (auto d : h.shape) n *= d;
    total += n;
  }
  std::vector<uint8_t> stream(total);
  for (size_t i = 0; i < stream.size(); ++i) stream[i] = static_cast<uint8_t>(i * 37 + 11);
  test::TempDir dir;
  auto w = ShardedCheckpointWriter::create(dir.path(), hs, /*max_shard_bytes=*/64, /*min_shards=*/2);
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_GE((*w)->n_shards(), 2);
  // Pieces of 1, 2, 3, ... bytes: boundaries fall inside and across tensors and shards.
  size_t pos = 0;
  for (size_t piece = 1; pos < stream.size(); ++piece) {
    const size_t n = std::min(piece, stream.size() - pos);
    ASSERT_TRUE((*w)->write(std::span<const uint8_t>(stream.data() + pos, n)).is_ok());
    pos += n;
  }
  ASSERT_TRUE((*w)->finish().is_ok());
  auto ck = Checkpoint::open(dir.path());  // validates offsets, tiling, index and total_size
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->total_bytes(), total);
  EXPECT_EQ(static_cast<int>(ck->shard_paths().size()), (*w)->n_shards());
  size_t off = 0;
  for (const auto& h : hs) {
    const TensorInfo* t = ck->find(h.name);
    ASSERT_NE(t, nullptr) << h.name;
    EXPECT_EQ(t->dtype, h.dtype);
    EXPECT_EQ(t->shape, h.shape);
    ASSERT_EQ(0, std::memcmp(t->data.data(), stream.data() + off, t->data.size())) << h.name;
    off += t->data.size();
  }
}

TEST(ShardedCheckpointWriter, ShortAndLongStreamsAreErrors) {
  test::TempDir dir;
  {
    auto w = ShardedCheckpointWriter::create(dir.path(), headers(), 1 << 20, 1);
    ASSERT_TRUE(w.is_ok());
    std::vector<uint8_t> some(10);
    ASSERT_TRUE((*w)->write(some).is_ok());
    const Status s = (*w)->finish();
    EXPECT_EQ(s.rule(), "safetensors.write_short");
  }
  // The abandoned writer removed its temporary shard; nothing looks like a checkpoint.
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) ADD_FAILURE() << "left behind " << e.path();
  auto w = ShardedCheckpointWriter::create(dir.path(), headers(), 1 << 20, 1);
  ASSERT_TRUE(w.is_ok());
  std::vector<uint8_t> too_much(1000);
  EXPECT_EQ((*w)->write(too_much).rule(), "safetensors.write_overflow");
}

}  // namespace
}  // namespace dsv4
