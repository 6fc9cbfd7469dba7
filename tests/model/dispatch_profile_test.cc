// tests/model: the forward's dispatch profile (model/deepseek_v4/dispatch_profile.h) on the tiny golden
// checkpoint — each matmul phase, and the mHC mixes for their fn, charges exactly the weight bytes the
// checkpoint holds for its tensors (summed from the safetensors table, an independent count), the scopes
// fire once per layer, the phases'
// exclusive times add up to the profiled wall time, and profiling changes no logit bit. CPU time: a phase is
// charged CPU time its threads provably spent in it (spun on their own CPU clocks), the pool workers' too.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <cstring>
#include <set>
#include <string>

#include "golden_case.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/dispatch_profile.h"
#include "model/model.h"
#include "test_util.h"

namespace dsv4::test {
namespace {

using v4::DispatchProfile;
using v4::Phase;

std::filesystem::path checkpoint() { return shared_dir() / "golden/tiny/checkpoint"; }

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Burns `ns` of this thread's CPU time (not wall time: a preempted thread spins longer), so a profile
// must charge at least that much CPU time to the phase it ran in, however loaded the machine is.
void spin_cpu(int64_t ns) {
  const int64_t end = thread_cpu_ns() + ns;
  while (thread_cpu_ns() < end) {
  }
}

// Bytes of every tensor whose name starts with `prefix` and contains one of `parts` (weights and scales).
int64_t tensor_bytes(const Checkpoint& ck, const std::string& prefix, std::initializer_list<const char*> parts) {
  int64_t b = 0;
  for (const TensorInfo& t : ck.tensors()) {
    if (t.name.rfind(prefix, 0) != 0) continue;
    for (const char* p : parts)
      if (t.name.find(p) != std::string::npos && (t.name.ends_with(".weight") || t.name.ends_with(".scale"))) {
        b += static_cast<int64_t>(t.data.size());
        break;
      }
  }
  return b;
}

std::unique_ptr<Model> load_cpu(int threads) {
  ModelOptions o;
  o.backend = Backend::kCpu;
  o.isa = kernels::Isa::kAvx512;
  o.threads = threads;
  auto m = Model::load(checkpoint(), o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

TEST(DispatchProfile, DecodeStepChargesEachRoleTheCheckpointsBytes) {
  const auto ids = golden_tokens(24);
  ASSERT_EQ(ids.size(), 24u);
  auto ck = Checkpoint::open(checkpoint());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  for (int threads : {1, 2}) {  // 2: the fused one-dispatch path of linear_jobs; 1: linear() per job
    auto m = load_cpu(threads);
    ASSERT_TRUE(m);
    const ModelConfig& c = m->config();
    auto seq = m->new_sequence();
    SequenceState* st[] = {seq.get()};
    std::vector<BatchToken> prompt;
    for (size_t i = 0; i + 1 < ids.size(); ++i) prompt.push_back({0, static_cast<int32_t>(i), ids[i], false});
    ASSERT_TRUE(m->forward(prompt, st, nullptr).is_ok());
    // The decode step twice on copies of the state: traced (for its routing), then profiled.
    auto copy = std::make_unique<SequenceState>(*seq);
    SequenceState* st2[] = {copy.get()};
    const BatchToken tok{0, static_cast<int32_t>(ids.size() - 1), ids.back(), true};
    ForwardTrace trace;
    std::vector<float> traced, profiled;
    ASSERT_TRUE(m->forward({&tok, 1}, st, &traced, nullptr, &trace).is_ok());
    const ThreadPool* pool = m->context().exec.pool;
    ASSERT_NE(pool, nullptr);
    DispatchProfile prof(pool->worker_cpu_clocks());
    EXPECT_EQ(prof.n_clocks(), threads);
    const auto t0 = std::chrono::steady_clock::now();
    {
      const DispatchProfile::Install on(&prof);
      ASSERT_TRUE(m->forward({&tok, 1}, st2, &profiled).is_ok());
    }
    const int64_t wall = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(traced.size(), profiled.size());
    EXPECT_EQ(std::memcmp(traced.data(), profiled.data(), traced.size() * sizeof(float)), 0) << "threads " << threads;

    // Oracle: the checkpoint's own tensor sizes for each role.
    int64_t attn = 0, gate = 0, experts = 0;
    for (int64_t il = 0; il < c.n_layers; ++il) {
      const std::string l = "layers." + std::to_string(il) + ".";
      attn += tensor_bytes(*ck, l + "attn.", {"wq_a", "wq_b", "wkv", "wo_a", "wo_b", "weights_proj", "wgate"});
      // Hash layers too: their route weights come from the gate's scores.
      gate += tensor_bytes(*ck, l + "ffn.gate.", {"weight"});
      experts += tensor_bytes(*ck, l + "ffn.shared_experts.", {"w1", "w2", "w3"});
      std::set<int32_t> used(trace.layers[static_cast<size_t>(il)].gate_indices.begin(),
                             trace.layers[static_cast<size_t>(il)].gate_indices.end());
      for (int32_t e : used) experts += tensor_bytes(*ck, l + "ffn.experts." + std::to_string(e) + ".", {"w1", "w2", "w3"});
    }
    EXPECT_EQ(prof.totals(Phase::kAttnLinear).bytes, attn) << "threads " << threads;
    EXPECT_EQ(prof.totals(Phase::kMoeGate).bytes, gate);
    EXPECT_EQ(prof.totals(Phase::kMoeExperts).bytes, experts);
    EXPECT_EQ(prof.totals(Phase::kHeadLinear).bytes, tensor_bytes(*ck, "head.", {"weight"}));
    EXPECT_EQ(prof.totals(Phase::kOther).bytes, 0);
    // The mHC mixes read their fp32 fn once per step (one token: one 8-token group), the head's likewise.
    const auto named_bytes = [&](const std::string& name) {
      int64_t b = 0;
      for (const TensorInfo& t : ck->tensors())
        if (t.name == name) b += static_cast<int64_t>(t.data.size());
      return b;
    };
    int64_t mhc = 0;
    for (int64_t il = 0; il < c.n_layers; ++il)
      mhc += named_bytes("layers." + std::to_string(il) + ".hc_attn_fn") +
             named_bytes("layers." + std::to_string(il) + ".hc_ffn_fn");
    EXPECT_GT(mhc, 0);
    EXPECT_EQ(prof.totals(Phase::kMhc).bytes, mhc);
    EXPECT_EQ(prof.totals(Phase::kHeadMix).bytes, named_bytes("hc_head_fn"));
    // One scope per layer (attention, routing, experts), two mHC mixes per sublayer, one head.
    EXPECT_EQ(prof.totals(Phase::kAttnCore).calls, c.n_layers);
    EXPECT_EQ(prof.totals(Phase::kMoeRoute).calls, c.n_layers);
    EXPECT_EQ(prof.totals(Phase::kMoeExperts).calls, c.n_layers);
    EXPECT_EQ(prof.totals(Phase::kMhc).calls, 4 * c.n_layers);
    EXPECT_EQ(prof.totals(Phase::kHeadLinear).calls, 1);
    EXPECT_EQ(prof.totals(Phase::kHeadMix).calls, 1);
    // Exclusive times: they add up to the installed span, which the outer clock reads brackets.
    EXPECT_GT(prof.total_ns(), 0);
    EXPECT_LE(prof.total_ns(), wall);
    int64_t calls = 0, cpu = 0;
    for (int p = 0; p < static_cast<int>(Phase::kCount); ++p) {
      const auto& t = prof.totals(static_cast<Phase>(p));
      EXPECT_GE(t.ns, 0);
      EXPECT_GE(t.cpu_ns, 0);
      calls += t.calls;
      cpu += t.cpu_ns;
    }
    EXPECT_EQ(prof.total_cpu_ns(), cpu);
    EXPECT_GT(cpu, 0);
    // The clocks are read at the install, at every scope's entry and exit, and at the uninstall.
    EXPECT_EQ(prof.boundaries(), 2 + 2 * calls);
    EXPECT_GT(prof.read_cost_ns(), 0);
  }
}

TEST(DispatchProfile, NestedScopesChargeExclusiveTime) {
  const auto spin = [](int64_t ns) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
    while (std::chrono::steady_clock::now() < end) {
    }
  };
  DispatchProfile prof;
  {
    const DispatchProfile::Install on(&prof);
    const DispatchProfile::Scope outer(Phase::kAttnCore);
    EXPECT_EQ(DispatchProfile::matmul_phase(), Phase::kAttnLinear);
    {
      const DispatchProfile::Scope inner(DispatchProfile::matmul_phase(), 1234);
      spin(2'000'000);
      spin_cpu(2'000'000);
    }
    spin(1'000'000);
    spin_cpu(1'000'000);
  }
  // Lower bounds only (a spin lasts at least its span); the inner 2 ms is not in the outer phase's total.
  EXPECT_GE(prof.totals(Phase::kAttnLinear).ns, 2'000'000);
  EXPECT_GE(prof.totals(Phase::kAttnCore).ns, 1'000'000);
  // CPU time likewise, from the installing thread's own clock: the inner scope's 2 ms are not the outer's.
  EXPECT_GE(prof.totals(Phase::kAttnLinear).cpu_ns, 2'000'000);
  EXPECT_GE(prof.totals(Phase::kAttnCore).cpu_ns, 1'000'000);
  EXPECT_EQ(prof.total_cpu_ns(), prof.totals(Phase::kAttnLinear).cpu_ns + prof.totals(Phase::kAttnCore).cpu_ns +
                                     prof.totals(Phase::kOther).cpu_ns);
  EXPECT_EQ(prof.totals(Phase::kAttnLinear).bytes, 1234);
  EXPECT_EQ(prof.totals(Phase::kAttnLinear).calls, 1);
  EXPECT_EQ(prof.total_ns(), prof.totals(Phase::kAttnLinear).ns + prof.totals(Phase::kAttnCore).ns +
                                 prof.totals(Phase::kOther).ns);
  // Outside an Install nothing is recorded, and no phase is current.
  EXPECT_EQ(DispatchProfile::active(), nullptr);
  EXPECT_EQ(DispatchProfile::matmul_phase(), Phase::kOther);
  DispatchProfile idle;
  { const DispatchProfile::Scope s(Phase::kMhc, 99); }
  EXPECT_EQ(idle.total_ns(), 0);
  EXPECT_EQ(prof.totals(Phase::kMhc).calls, 0);
}

// A pool worker's CPU time is charged to the phase its chunk ran in: the worker spins 20 ms of its own CPU
// time while the calling thread sleeps, so only the worker's clock can account for it (the caller's own
// clock sees microseconds). reset() keeps the clocks.
TEST(DispatchProfile, ChargesPoolWorkersCpuTime) {
  ThreadPool pool(2);
  if (pool.worker_cpu_clocks().empty()) GTEST_SKIP() << "no per-thread CPU clocks on this platform";
  constexpr int64_t kWorkerNs = 20'000'000;
  // Chunk 0 is the caller's (thread_pool.h), and while it sleeps in it only the worker can claim chunk 1.
  const auto run_job = [&] {
    std::atomic<uint32_t> done{0};
    const DispatchProfile::Scope s(Phase::kMoeExperts);
    pool.parallel_for(2, 1, [&](int64_t b, int64_t, int) {
      if (b == 0) {
        done.wait(0);
      } else {
        spin_cpu(kWorkerNs);
        done.store(1);
        done.notify_all();
      }
    });
  };
  DispatchProfile prof(pool.worker_cpu_clocks());
  EXPECT_EQ(prof.n_clocks(), 2);
  {
    const DispatchProfile::Install on(&prof);
    run_job();
  }
  EXPECT_GE(prof.totals(Phase::kMoeExperts).cpu_ns, kWorkerNs);
  prof.reset();
  EXPECT_EQ(prof.total_cpu_ns(), 0);
  EXPECT_EQ(prof.n_clocks(), 2);
  {
    const DispatchProfile::Install on(&prof);
    run_job();
  }
  EXPECT_GE(prof.totals(Phase::kMoeExperts).cpu_ns, kWorkerNs);
  // The same job profiled with the caller's clock only: the worker's 20 ms are not seen.
  DispatchProfile caller_only;
  EXPECT_EQ(caller_only.n_clocks(), 1);
  {
    const DispatchProfile::Install on(&caller_only);
    run_job();
  }
  EXPECT_LT(caller_only.totals(Phase::kMoeExperts).cpu_ns, kWorkerNs);
}

}  // namespace
}  // namespace dsv4::test
