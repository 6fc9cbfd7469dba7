// runtime: builds the public dsv4::Engine (include/dsv4/engine.h) over a ModelRunner: one engine loop
// thread owns the runner; submit/cancel/stats are safe from any thread.
#pragma once

#include <memory>

#include "dsv4/engine.h"
#include "runtime/detokenizer.h"
#include "runtime/engine_core.h"
#include "runtime/model_runner.h"

namespace dsv4 {

struct EngineOptions {
  EngineCoreOptions core;
  int32_t max_queue = 256;  // requests submitted but not yet admitted; beyond it submit() fails
  std::string model_name;   // empty: the runner's name
};

// kInvalidArgument when the options cannot work with this runner (pool budget too small, speculation
// without an MTP head).
Result<std::unique_ptr<Engine>> create_engine(std::unique_ptr<ModelRunner> runner, const EngineOptions& options,
                                              std::shared_ptr<const Detokenizer> detokenizer = nullptr);

}  // namespace dsv4
