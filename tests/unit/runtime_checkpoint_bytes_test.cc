// unit: what a prefix-reuse checkpoint costs (RunnerInfo::checkpoint_bytes, checkpoint_state_bytes) on
// the real forward pass (the tiny golden checkpoint: window 16, compression ratios 4, 128 and 8, an MTP
// layer). Oracle: the model's own page pools — a sequence fed well past its checkpoints holds
// M_on bytes of pages; dropping its checkpoints (keep_checkpoints(false)) leaves M_off: the difference is
// what the checkpoints really hold alone, which the charge must never fall below.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/model_model_runner.h"
#include "test_util.h"

namespace dsv4 {
namespace {

ModelModelRunner& tiny() {
  static std::unique_ptr<ModelModelRunner> runner = [] {
    ModelOptions options;
    options.isa = kernels::Isa::kAvx512;  // as the other tiny-runner tests (no AMX row-count effects)
    auto r = ModelModelRunner::load(test::shared_dir() / "golden/tiny/checkpoint", options);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? std::move(r).value() : nullptr;
  }();
  return *runner;
}

// Bytes of pages the checkpoints of one sequence of `length` tokens hold that the sequence does not.
int64_t measured_checkpoint_pages(ModelModelRunner& runner, int32_t interval, int32_t length, int64_t* n_checkpoints) {
  runner.set_checkpoint_interval(interval);
  runner.keep_checkpoints(true);
  const SeqSlot seq = *runner.create_sequence();
  std::vector<float> logits;
  for (int32_t from = 0; from < length; from += 37) {  // chunks that straddle checkpoint positions
    std::vector<RunnerToken> batch;
    for (int32_t i = from; i < std::min(length, from + 37); ++i) batch.push_back({seq, i, 2 + (i * 7919) % 1000, false});
    EXPECT_TRUE(runner.forward(batch, &logits).is_ok());
  }
  *n_checkpoints = runner.checkpoints_held();
  const int64_t with = runner.memory().bytes_in_use();
  runner.keep_checkpoints(false);
  const int64_t without = runner.memory().bytes_in_use();
  runner.free_sequence(seq);
  EXPECT_EQ(runner.memory().bytes_in_use(), 0);
  return with - without;
}

TEST(RuntimeCheckpointBytes, TheChargeCoversWhatCheckpointsReallyHoldAlone) {
  ModelModelRunner& runner = tiny();
  const ModelConfig& c = runner.model().config();
  const int64_t streams = static_cast<int64_t>(c.hc_mult * c.dim) * 4;
  // Intervals aligned to every ratio and to none; the sequence runs past the last checkpoint by more
  // than a window and a block of the largest ratio, so every page that can leave it has.
  for (int32_t interval : {16, 40, 128, 256}) {
    int64_t n = 0;
    const int32_t length = 3 * interval + 16 + 128 + 40;
    const int64_t measured = measured_checkpoint_pages(runner, interval, length, &n);
    const int64_t charged = runner.info().checkpoint_bytes;
    const int64_t whole_state = runner.info().footprint.per_seq() + streams;  // the former charge
    std::printf("interval %d: %lld checkpoints hold %lld B alone (%lld B each); charge %lld B each (a whole "
                "sequence's fixed state: %lld B)\n",
                interval, static_cast<long long>(n), static_cast<long long>(measured),
                static_cast<long long>(n > 0 ? measured / n : 0), static_cast<long long>(charged),
                static_cast<long long>(whole_state));
    EXPECT_EQ(n, length / interval) << interval;
    EXPECT_GT(measured, 0) << "checkpoints behind the sequence hold pages of their own";
    EXPECT_LE(measured, n * (charged - streams)) << "interval " << interval << ": the charge under-counts";
    EXPECT_LE(charged, whole_state) << interval;
    EXPECT_EQ(charged, checkpoint_state_bytes(c, runner.model().kv_pages().page_rows(), interval,
                                              runner.model().max_context()));
  }
  // At the default interval (a multiple of the window and every ratio) the window of a checkpoint starts
  // on a fresh lap: its charge is strictly below a whole sequence's fixed-size state.
  runner.set_checkpoint_interval(default_checkpoint_interval(c));
  EXPECT_LT(runner.info().checkpoint_bytes, runner.info().footprint.per_seq() + streams);
}

// Negative control: a charge that left out the window pages (as if the rows a checkpoint shares with its
// sequence were all it held) falls below what the checkpoints hold alone. At interval 128 (window 16,
// 64-row pages) a checkpoint's window rows [c - 16, c) lie in one page per layer, MTP layer included.
TEST(RuntimeCheckpointBytes, NegativeControlACheckpointWithoutItsWindowPagesUnderCounts) {
  ModelModelRunner& runner = tiny();
  const ModelConfig& c = runner.model().config();
  ASSERT_EQ(c.window_size, 16);
  ASSERT_EQ(runner.model().kv_pages().page_rows(), 64);
  const int64_t streams = static_cast<int64_t>(c.hc_mult * c.dim) * 4;
  int64_t n = 0;
  const int64_t measured = measured_checkpoint_pages(runner, 128, 3 * 128 + 200, &n);
  const int64_t window = (c.n_layers + c.n_mtp_layers) * 64 * KvRowLayout{c.head_dim, c.rope_head_dim}.bytes();
  const int64_t without_window = runner.info().checkpoint_bytes - streams - window;
  std::printf("%lld checkpoints hold %lld B alone; charged without the window pages: %lld B\n",
              static_cast<long long>(n), static_cast<long long>(measured), static_cast<long long>(n * without_window));
  EXPECT_GT(without_window, 0);
  EXPECT_GT(measured, n * without_window);
}

}  // namespace
}  // namespace dsv4
