// unit: the threaded Engine (include/dsv4/engine.h) over the fake model: results equal the synchronous
// core, the queue is bounded (kResourceExhausted), over-long requests are kOutOfRange, cancellation from
// another thread returns every block.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <thread>
#include <mutex>

#include "runtime/engine_factory.h"
#include "runtime/testing/fake_model_runner.h"

namespace dsv4 {
namespace {

using testing::FakeModelOptions;
using testing::FakeModelRunner;

// A fake whose forward waits at a gate, so a test can hold the engine thread mid-step.
class GatedRunner : public FakeModelRunner {
 public:
  explicit GatedRunner(FakeModelOptions o) : FakeModelRunner(o) {}
  Status forward(std::span<const RunnerToken> batch, std::vector<float>* logits) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    lock.unlock();
    return FakeModelRunner::forward(batch, logits);
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return entered_ > 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int entered_ = 0;
};

struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, FinishReason> finish;
  UpdateCallback callback() {
    return [this](const GenerationUpdate& u) {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& e : u.tokens) tokens[u.id].push_back(e.token);
      if (u.finish != FinishReason::kNone) {
        finish[u.id] = u.finish;
        cv.notify_all();
      }
    };
  }
  void wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finish.size() >= n; });
  }
};

// Stats are published after the step whose callbacks ended the last request: wait until they settle.
EngineStats settled_stats(const Engine& e) {
  EngineStats st = e.stats();
  for (int i = 0; i < 5000 && (st.running != 0 || st.queued != 0 || st.pool_blocks_free != st.pool_blocks_total); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    st = e.stats();
  }
  return st;
}

GenerationRequest request(int i) {
  GenerationRequest r;
  for (int j = 0; j < 3 + 7 * i; ++j) r.prompt_ids.push_back(2 + (i * 31 + j * 17) % 60);
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = 12 + i;
  r.stop.ignore_eos = true;
  return r;
}

TEST(RuntimeEngine, ThreadedEngineMatchesCoreAndReturnsThePool) {
  EngineOptions opt;
  opt.core.max_batch_tokens = 32;
  opt.core.block_tokens = 8;
  opt.core.pool_blocks = 512;
  opt.core.speculative_k = 2;
  // Oracle: each request alone through the synchronous core.
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 16; ++i) {
    FakeModelRunner runner{FakeModelOptions{}};
    EngineCore core(&runner, nullptr, opt.core);
    std::vector<int32_t> toks;
    ASSERT_TRUE(core.add(1, request(i), [&](const GenerationUpdate& u) {
                      for (const auto& e : u.tokens) toks.push_back(e.token);
                    }).is_ok());
    while (core.has_work()) ASSERT_TRUE(core.step().is_ok());
    expected.push_back(toks);
  }
  auto engine = create_engine(std::make_unique<FakeModelRunner>(FakeModelOptions{}), opt);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  Collector c;
  std::vector<RequestId> ids;
  for (int i = 0; i < 16; ++i) {
    auto id = (*engine)->submit(request(i), c.callback());
    ASSERT_TRUE(id.is_ok());
    ids.push_back(*id);
  }
  c.wait_for(16);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(c.tokens[ids[static_cast<size_t>(i)]], expected[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(c.finish[ids[static_cast<size_t>(i)]], FinishReason::kLength);
  }
  const EngineStats st = settled_stats(**engine);
  EXPECT_EQ(st.pool_blocks_free, st.pool_blocks_total);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.spec_acceptance_by_position.size(), 2u);
  EXPECT_GT(st.spec_acceptance, 0.0);
  EXPECT_EQ((*engine)->info().vocab_size, 64);
}

TEST(RuntimeEngine, BoundedQueueContextAndCancel) {
  FakeModelOptions fo;
  fo.context_size = 200;
  auto gated = std::make_unique<GatedRunner>(fo);
  GatedRunner* gate = gated.get();
  EngineOptions opt;
  opt.max_queue = 3;
  opt.core.pool_blocks = 256;
  opt.core.block_tokens = 8;
  auto engine = create_engine(std::move(gated), opt);
  ASSERT_TRUE(engine.is_ok());
  Collector c;
  GenerationRequest too_long = request(1);
  too_long.stop.max_tokens = 200;
  EXPECT_EQ((*engine)->submit(too_long, c.callback()).status().code(), StatusCode::kOutOfRange);
  auto first = (*engine)->submit(request(0), c.callback());
  ASSERT_TRUE(first.is_ok());
  gate->wait_entered();  // the engine thread holds request 1 inside forward()
  std::vector<RequestId> queued;
  for (int i = 0; i < 3; ++i) {
    auto id = (*engine)->submit(request(i + 1), c.callback());
    ASSERT_TRUE(id.is_ok()) << i;
    queued.push_back(*id);
  }
  const auto full = (*engine)->submit(request(5), c.callback());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.status().rule(), "engine.queue_full");
  (*engine)->cancel(queued[1]);
  (*engine)->cancel(*first);
  (*engine)->cancel(*first);  // idempotent
  gate->open();
  c.wait_for(4);
  EXPECT_EQ(c.finish[*first], FinishReason::kCancelled);
  EXPECT_EQ(c.finish[queued[1]], FinishReason::kCancelled);
  EXPECT_EQ(c.finish[queued[0]], FinishReason::kLength);
  EXPECT_EQ(c.finish[queued[2]], FinishReason::kLength);
  const EngineStats st = settled_stats(**engine);
  EXPECT_EQ(st.pool_blocks_free, st.pool_blocks_total);
}

}  // namespace
}  // namespace dsv4
