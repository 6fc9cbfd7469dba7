// runtime: the threaded Engine. Callers' threads only touch the inbox (bounded) and the cancel list
// under a mutex; the loop thread moves them into EngineCore, runs steps and delivers updates.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/engine_factory.h"

namespace dsv4 {

class EngineImpl : public Engine {
 public:
  EngineImpl(std::unique_ptr<ModelRunner> runner, const EngineOptions& options,
             std::shared_ptr<const Detokenizer> detokenizer);
  ~EngineImpl() override;

  Result<RequestId> submit(GenerationRequest request, UpdateCallback on_update) override;
  void cancel(RequestId id) override;
  EngineStats stats() const override;
  const EngineInfo& info() const override { return info_; }

 private:
  struct Pending {
    RequestId id;
    GenerationRequest request;
    UpdateCallback on_update;
  };
  void loop();
  void publish_stats();  // called on the loop thread with mu_ not held

  std::unique_ptr<ModelRunner> runner_;
  std::shared_ptr<const Detokenizer> detok_;
  EngineOptions opt_;
  EngineInfo info_;
  EngineCore core_;  // touched only by the loop thread (and validate(), which reads immutable state)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> inbox_;
  std::vector<RequestId> cancels_;
  bool stop_ = false;
  int64_t core_waiting_ = 0;  // the core's queue length as of the last step (for the bound)
  EngineStats stats_;
  std::atomic<RequestId> next_id_{1};
  std::thread thread_;
};

}  // namespace dsv4
