// runtime: the threaded Engine and its factory (see engine_impl.h, engine_factory.h).
#include "runtime/engine_impl.h"

#include <string>

namespace dsv4 {

EngineImpl::EngineImpl(std::unique_ptr<ModelRunner> runner, const EngineOptions& options,
                       std::shared_ptr<const Detokenizer> detokenizer)
    : runner_(std::move(runner)),
      detok_(std::move(detokenizer)),
      opt_(options),
      core_(runner_.get(), detok_.get(), options.core) {
  const RunnerInfo& ri = runner_->info();
  info_.model_name = opt_.model_name.empty() ? ri.model_name : opt_.model_name;
  info_.context_size = ri.context_size;
  info_.vocab_size = ri.vocab_size;
  info_.eos_token_id = ri.eos_token_id;
  info_.bos_token_id = ri.bos_token_id;
  publish_stats();
  thread_ = std::thread([this] { loop(); });
}

EngineImpl::~EngineImpl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Result<RequestId> EngineImpl::submit(GenerationRequest request, UpdateCallback on_update) {
  DSV4_RETURN_IF_ERROR(core_.validate(request));
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return resource_exhausted("engine.shutting_down", "the engine is shutting down");
  if (static_cast<int64_t>(inbox_.size()) + core_waiting_ >= opt_.max_queue) {
    return resource_exhausted("engine.queue_full",
                              "the request queue is full (" + std::to_string(opt_.max_queue) + " waiting)");
  }
  const RequestId id = next_id_++;
  inbox_.push_back({id, std::move(request), std::move(on_update)});
  ++stats_.queued;
  cv_.notify_all();
  return id;
}

void EngineImpl::cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(id);
  }
  cv_.notify_all();
}

EngineStats EngineImpl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void EngineImpl::publish_stats() {
  const CoreStats& cs = core_.stats();
  EngineStats s;
  s.running = core_.n_running();
  s.prompt_tokens_total = cs.prompt_tokens;
  s.generated_tokens_total = cs.generated_tokens;
  s.pool_blocks_total = core_.pool().total();
  s.pool_blocks_free = core_.pool().free_count();
  s.spec_acceptance = cs.spec.acceptance();
  s.steps = cs.steps;
  s.preemptions = cs.preemptions;
  s.prefix_cache_hits = cs.prefix_hits;
  s.prefix_cache_hit_tokens = cs.prefix_hit_tokens;
  for (size_t i = 0; i < cs.spec.proposed.size(); ++i) {
    s.spec_acceptance_by_position.push_back(
        cs.spec.proposed[i] == 0 ? 0.0 : static_cast<double>(cs.spec.accepted[i]) / static_cast<double>(cs.spec.proposed[i]));
  }
  const StateFootprint used = core_.bytes_in_use();
  const RunnerMemory mem = runner_->memory();
  s.kv_pages_in_use = mem.kv_pages_in_use + mem.index_pages_in_use;
  s.kv_page_bytes_in_use = mem.kv_bytes_in_use();
  s.kv_page_bytes_held = mem.kv_bytes_held();
  s.window_page_bytes_in_use = mem.window_bytes_in_use;
  s.window_page_bytes_held = mem.window_bytes_held;
  s.partial_page_bytes_in_use = mem.partial_bytes_in_use;
  s.partial_page_bytes_held = mem.partial_bytes_held;
  s.scratch_bytes_held = mem.scratch_bytes_held;
  // What the state pages (window, partial blocks, rows, keys; checkpoints share them) really hold when the
  // runner has them, else the estimate.
  s.state_bytes_in_use = mem.kv_page_bytes > 0 ? mem.bytes_in_use()
                                               : used.window_ring_per_seq + used.compressor_partial_per_seq +
                                                     used.per_token() + used.kv_page_slack_per_seq +
                                                     core_.checkpoint_bytes_in_use();
  s.state_bytes_budget = static_cast<int64_t>(core_.plan().n_blocks) * core_.plan().block_bytes;
  std::lock_guard<std::mutex> lock(mu_);
  core_waiting_ = core_.n_waiting();
  s.queued = core_waiting_ + static_cast<int64_t>(inbox_.size());
  stats_ = std::move(s);
}

void EngineImpl::loop() {
  for (;;) {
    std::deque<Pending> inbox;
    std::vector<RequestId> cancels;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || core_.has_work(); });
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      stopping = stop_;
    }
    for (Pending& p : inbox) {
      UpdateCallback cb = p.on_update;
      const Status st = core_.add(p.id, std::move(p.request), std::move(p.on_update));
      if (!st.is_ok() && cb) {  // validated at submit; only a duplicate id could land here
        GenerationUpdate u;
        u.id = p.id;
        u.finish = FinishReason::kError;
        u.error = st;
        cb(u);
      }
    }
    for (RequestId id : cancels) core_.cancel(id);
    if (stopping) {
      core_.cancel_all();
      publish_stats();
      return;
    }
    if (core_.has_work()) (void)core_.step();  // a runner failure is reported on each request's update
    publish_stats();
  }
}

Result<std::unique_ptr<Engine>> create_engine(std::unique_ptr<ModelRunner> runner, const EngineOptions& options,
                                              std::shared_ptr<const Detokenizer> detokenizer) {
  if (runner == nullptr) return invalid_argument("engine.no_runner", "create_engine needs a model runner");
  const RunnerInfo& ri = runner->info();
  if (options.core.speculative_k > 0 && !ri.has_mtp) {
    return invalid_argument("engine.no_mtp", "speculative decoding needs a model with an MTP head");
  }
  if (options.core.max_batch_tokens < 1 + std::min(options.core.speculative_k, ri.max_rollback) || options.core.max_running < 1 || options.max_queue < 1) {
    return invalid_argument("engine.bad_options", "batch tokens must be >= 1 + speculative_k; running sequences and queue >= 1");
  }
  if (options.core.runner_budget_bytes < -1) {
    return invalid_argument("engine.bad_options", "runner_budget_bytes must be -1 (pool_bytes), 0 (unlimited) or a budget");
  }
  if (options.core.pool_blocks <= 0) {
    auto plan = plan_pool(ri.footprint, options.core.pool_bytes, options.core.block_tokens);
    if (!plan.is_ok()) return plan.status();
  } else if (options.core.block_tokens < 1) {
    return invalid_argument("engine.bad_options", "block_tokens must be >= 1");
  }
  return std::unique_ptr<Engine>(new EngineImpl(std::move(runner), options, std::move(detokenizer)));
}

}  // namespace dsv4
