// tests/model: one golden case loaded once per test process (model, tokens, reference outputs) with
// lazily computed engine runs shared by the tests that need them.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "golden_metrics.h"
#include "model/deepseek_v4/teacher.h"
#include "model/model.h"

namespace dsv4::test {

// One way of running the model that the goldens must hold for (golden/README.md thresholds).
struct EngineVariant {
  std::string name;
  ModelOptions options;
  // Whether decode and chunked prefill reproduce one-shot prefill bit for bit: true for the reference
  // and for the cpu kernels without AMX (each output one fixed sequence of fp32 operations whatever
  // n_tokens). With AMX the dense projections still are (AMX at every token count, one order), but a
  // routed expert moves from the vector tiles to AMX at 16 tokens (kernels::AmxRouting), which sums in
  // another order, so a prefill's busy experts differ from decode's in the last bits.
  bool exact_self = true;
};
// reference; cpu with AMX excluded (AVX-512 requested: the best of AVX-512/AVX2/scalar the CPU has);
// cpu with the best ISA (AMX where present); cpu on AVX2 where AVX-512 is present (else one of the two
// above already runs it). Two threads each.
std::vector<EngineVariant> engine_variants();

// The first n (at most all) token ids of the tiny golden case (golden/tiny/golden/tokens.npy); empty with a
// test failure if the file cannot be read.
std::vector<int32_t> golden_tokens(size_t n);
std::string variant_name(const ::testing::TestParamInfo<EngineVariant>& info);

struct SequenceRun {
  std::vector<float> logits;   // [n, vocab]
  std::vector<float> streams;  // [n, hc, dim]
};

// Feeds ids through a fresh sequence: prefill [0, prefill) in chunks of `chunk`, then one token at a time.
SequenceRun run_sequence(Model& model, const std::vector<int32_t>& ids, int64_t prefill, int64_t chunk,
                         ForwardTrace* trace = nullptr);

class CaseData {
 public:
  static CaseData& get(const GoldenCase& gc, const EngineVariant& v);

  const GoldenCase gc;
  const EngineVariant variant;
  const std::string label;  // "<case>/<variant>" for the printed figures
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
  CaseData(GoldenCase g, EngineVariant v) : gc(std::move(g)), variant(std::move(v)), label(gc.name + "/" + variant.name) {}
  std::optional<v4::TeacherResult> teacher_;
  std::optional<SequenceRun> prefill_;
  ForwardTrace trace_;
  std::map<std::pair<int64_t, int64_t>, SequenceRun> runs_;
};

}  // namespace dsv4::test
