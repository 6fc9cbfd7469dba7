// tests/model: one golden case loaded once per test process (model, tokens, reference outputs) with
// lazily computed engine runs shared by the tests that need them.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "golden_metrics.h"
#include "model/deepseek_v4/teacher.h"
#include "model/model.h"

namespace dsv4::test {

struct SequenceRun {
  std::vector<float> logits;   // [n, vocab]
  std::vector<float> streams;  // [n, hc, dim]
};

// Feeds ids through a fresh sequence: prefill [0, prefill) in chunks of `chunk`, then one token at a time.
SequenceRun run_sequence(Model& model, const std::vector<int32_t>& ids, int64_t prefill, int64_t chunk,
                         ForwardTrace* trace = nullptr);

class CaseData {
 public:
  static CaseData& get(const GoldenCase& gc);

  const GoldenCase gc;
  std::unique_ptr<Model> model;
  std::vector<int32_t> tokens;
  int64_t vocab = 0;

  std::vector<float> golden_f32(const std::string& name);  // golden/<name>.npy or golden/intermediates/<name>.npy
  std::vector<int32_t> golden_i32(const std::string& name);
  const v4::TeacherResult& teacher();
  const SequenceRun& prefill();         // one-shot prefill of all tokens (with trace)
  const ForwardTrace& prefill_trace();
  const SequenceRun& run(int64_t prefill, int64_t chunk);  // cached by (prefill, chunk)

 private:
  explicit CaseData(GoldenCase g) : gc(std::move(g)) {}
  std::optional<v4::TeacherResult> teacher_;
  std::optional<SequenceRun> prefill_;
  ForwardTrace trace_;
  std::map<std::pair<int64_t, int64_t>, SequenceRun> runs_;
};

}  // namespace dsv4::test
