// tests/model: golden case cache.
#include "golden_case.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "io/npy.h"
#include "test_util.h"

namespace dsv4::test {

SequenceRun run_sequence(Model& model, const std::vector<int32_t>& ids, int64_t prefill, int64_t chunk,
                         ForwardTrace* trace) {
  SequenceRun r;
  auto seq = model.new_sequence();
  SequenceState* states[] = {seq.get()};
  const auto n = static_cast<int64_t>(ids.size());
  int64_t done = 0;
  std::vector<float> part;
  ForwardCapture cap;
  while (done < n) {
    const int64_t step = done < prefill ? std::min(chunk, prefill - done) : 1;
    std::vector<BatchToken> batch;
    for (int64_t i = done; i < done + step; ++i) batch.push_back({0, static_cast<int32_t>(i), ids[static_cast<size_t>(i)], true});
    const Status s = model.forward(batch, states, &part, &cap, trace);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    if (!s.is_ok()) return r;
    r.logits.insert(r.logits.end(), part.begin(), part.end());
    r.streams.insert(r.streams.end(), cap.final_streams.begin(), cap.final_streams.end());
    done += step;
  }
  return r;
}

std::vector<int32_t> golden_tokens(size_t n) {
  auto t = read_npy(shared_dir() / "golden/tiny/golden/tokens.npy");
  EXPECT_TRUE(t.is_ok());
  std::vector<int32_t> ids;
  if (!t.is_ok()) return ids;
  for (int64_t v : t->to_i64()) ids.push_back(static_cast<int32_t>(v));
  ids.resize(std::min(n, ids.size()));
  return ids;
}

std::vector<EngineVariant> engine_variants() {
  EngineVariant ref{"reference", {}, true};
  ref.options.backend = Backend::kReference;
  ref.options.threads = 2;
  EngineVariant cpu{"cpu_noamx", {}, true};
  cpu.options.backend = Backend::kCpu;
  cpu.options.threads = 2;
  cpu.options.isa = kernels::Isa::kAvx512;
  EngineVariant best = cpu;
  best.name = "cpu_best";
  best.options.isa = kernels::Isa::kAuto;
  best.exact_self = kernels::best_isa() != kernels::Isa::kAmx;
  std::vector<EngineVariant> out{ref, cpu, best};
  // The AVX2 tiles (the best ISA of CPUs without AVX-512) where AVX-512 hides them: their own fp32 orders.
  if (kernels::isa_supported(kernels::Isa::kAvx512) && kernels::isa_supported(kernels::Isa::kAvx2)) {
    EngineVariant avx2 = cpu;
    avx2.name = "cpu_avx2";
    avx2.options.isa = kernels::Isa::kAvx2;
    out.push_back(avx2);
  }
  return out;
}

std::string variant_name(const ::testing::TestParamInfo<EngineVariant>& info) { return info.param.name; }

CaseData& CaseData::get(const GoldenCase& gc, const EngineVariant& v) {
  static std::map<std::string, std::unique_ptr<CaseData>> cache;
  auto& slot = cache[gc.checkpoint.string() + "|" + v.name];
  if (!slot) {
    slot.reset(new CaseData(gc, v));
    auto m = Model::load(gc.checkpoint, v.options);
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
    if (m.is_ok()) slot->model = std::move(m).value();
    auto t = read_npy(gc.golden / "tokens.npy");
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    if (t.is_ok())
      for (int64_t v : t->to_i64()) slot->tokens.push_back(static_cast<int32_t>(v));
    if (slot->model) slot->vocab = slot->model->config().vocab_size;
  }
  return *slot;
}

std::vector<float> CaseData::golden_f32(const std::string& name) {
  auto p = gc.golden / (name + ".npy");
  if (!std::filesystem::exists(p)) p = gc.golden / "intermediates" / (name + ".npy");
  auto a = read_npy(p);
  EXPECT_TRUE(a.is_ok()) << a.status().to_string();
  return a.is_ok() ? a->to_f32() : std::vector<float>{};
}

std::vector<int32_t> CaseData::golden_i32(const std::string& name) {
  auto a = read_npy(gc.golden / "intermediates" / (name + ".npy"));
  EXPECT_TRUE(a.is_ok()) << a.status().to_string();
  std::vector<int32_t> r;
  if (a.is_ok())
    for (int64_t v : a->to_i64()) r.push_back(static_cast<int32_t>(v));
  return r;
}

const v4::TeacherResult& CaseData::teacher() {
  if (!teacher_) {
    auto r = v4::run_teacher_forced(*model, gc.golden, tokens);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    teacher_ = r.is_ok() ? std::move(r).value() : v4::TeacherResult{};
  }
  return *teacher_;
}

const SequenceRun& CaseData::prefill() {
  if (!prefill_) {
    const auto n = static_cast<int64_t>(tokens.size());
    prefill_ = run_sequence(*model, tokens, n, n, &trace_);
  }
  return *prefill_;
}

const ForwardTrace& CaseData::prefill_trace() {
  prefill();
  return trace_;
}

const SequenceRun& CaseData::run(int64_t prefill, int64_t chunk) {
  auto key = std::make_pair(prefill, chunk);
  auto it = runs_.find(key);
  if (it == runs_.end()) it = runs_.emplace(key, run_sequence(*model, tokens, prefill, chunk)).first;
  return it->second;
}

}  // namespace dsv4::test
