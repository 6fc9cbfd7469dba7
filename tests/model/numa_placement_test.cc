// tests/model: NUMA placement changes where threads run and pages live, never the numbers — the golden
// tiny model gives bit-identical logits with --numa off, distribute (a pinned pool, an interleaved weight
// copy) and isolate (a populated mapping read under a preferred-node policy); the plan and the weights'
// resident bytes per node are what the model reports, checked against the kernel's /proc/self/numa_maps.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/numa.h"
#include "io/npy.h"
#include "model/model.h"
#include "golden_case.h"
#include "test_util.h"

namespace dsv4 {
namespace {

std::filesystem::path tiny_dir() { return test::shared_dir() / "golden/tiny/checkpoint"; }

struct PlacedRun {
  NumaPlan plan;
  ResidencyChoice residency;
  std::optional<std::map<int, uint64_t>> per_node;
  std::string policy;  // numa_maps policy of the first shard's mapping
  std::string summary;
  std::vector<float> logits;
};

std::string numa_maps_policy_at(uintptr_t addr) {
  std::ifstream f("/proc/self/numa_maps");
  std::ostringstream key;
  key << std::hex << addr << ' ';
  std::string line;
  while (std::getline(f, line))
    if (line.starts_with(key.str())) return line.substr(key.str().size(), line.find(' ', key.str().size()) - key.str().size());
  return "";
}

// Loads and prefills on a thread of its own: the pool pins its caller on the first forward, and the
// test binary's main thread should keep its mask.
PlacedRun prefill(NumaMode numa, Residency residency, const std::vector<int32_t>& ids) {
  PlacedRun r;
  std::thread t([&] {
    ModelOptions o;
    o.threads = 2;
    o.isa = kernels::Isa::kAvx512;  // batch-invariant below AMX; every run uses the same kernels
    o.numa = numa;
    o.weights.residency = residency;
    o.weights.populate = true;
    o.weights.mem_available = [] { return std::optional<uint64_t>(64ull << 30); };
    auto m = Model::load(tiny_dir(), o);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    r.plan = (*m)->numa_plan();
    r.residency = (*m)->weights().checkpoint->residency();
    r.per_node = (*m)->weight_bytes_per_node();
    r.summary = (*m)->placement_summary();
    r.policy = numa_maps_policy_at((*m)->weights().checkpoint->resident_ranges().at(0).first);
    auto s = (*m)->new_sequence();
    SequenceState* st[] = {s.get()};
    std::vector<BatchToken> b;
    for (size_t i = 0; i < ids.size(); ++i) b.push_back({0, static_cast<int32_t>(i), ids[i], true});
    ASSERT_TRUE((*m)->forward(b, st, &r.logits).is_ok());
  });
  t.join();
  return r;
}

uint64_t total(const std::map<int, uint64_t>& m) {
  uint64_t s = 0;
  for (const auto& [node, bytes] : m) s += bytes;
  return s;
}

TEST(NumaPlacement, PinnedAndPlacedRunsGiveIdenticalLogits) {
  const std::vector<int32_t> ids = test::golden_tokens(64);  // crosses the sliding window and several compressed blocks
  ASSERT_EQ(ids.size(), 64u);

  const PlacedRun off = prefill(NumaMode::kOff, Residency::kCopy, ids);
  const PlacedRun dist = prefill(NumaMode::kDistribute, Residency::kCopy, ids);
  const PlacedRun iso = prefill(NumaMode::kIsolate, Residency::kMmap, ids);
  ASSERT_EQ(off.logits.size(), ids.size() * 1024);
  ASSERT_EQ(dist.logits.size(), off.logits.size());
  ASSERT_EQ(iso.logits.size(), off.logits.size());
  EXPECT_EQ(std::memcmp(off.logits.data(), dist.logits.data(), off.logits.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(off.logits.data(), iso.logits.data(), off.logits.size() * sizeof(float)), 0);

  // The plans as asked: off pins nothing and leaves placement to the kernel; distribute and isolate
  // pin every thread to its node's CPUs.
  EXPECT_EQ(off.plan.mode, NumaMode::kOff);
  EXPECT_FALSE(off.plan.pinned());
  EXPECT_TRUE(off.residency.placement.is_default());
  EXPECT_EQ(dist.plan.mode, NumaMode::kDistribute);
  EXPECT_EQ(dist.plan.n_threads, 2);
  EXPECT_TRUE(dist.plan.pinned());
  EXPECT_EQ(iso.plan.mode, NumaMode::kIsolate);
  EXPECT_TRUE(iso.plan.pinned());
  EXPECT_NE(dist.summary.find("distribute: 2 threads"), std::string::npos) << dist.summary;

  // Where the kernel supports it, the copy is bound as planned and every resident byte is on a planned
  // node; where it does not, the fallback says why and the run above still matched.
  ASSERT_TRUE(off.per_node.has_value() == dist.per_node.has_value());
  if (dist.plan.weights.is_default() || !dist.residency.placement_note.empty()) {
    EXPECT_TRUE(dist.plan.weights.is_default() || dist.residency.placement_note.find("not available") != std::string::npos)
        << dist.residency.placement_note;
    GTEST_SKIP() << "no NUMA memory policy here: " << dist.summary;
  }
  EXPECT_EQ(dist.residency.placement.policy, MemPolicy::kInterleave);
  EXPECT_EQ(dist.policy, "interleave:" + format_cpu_list(dist.plan.weights.nodes));
  EXPECT_EQ(off.policy, "default");
  ASSERT_TRUE(dist.per_node.has_value());
  // A copy is faulted in whole: at least the checkpoint's bytes are resident, all on the planned nodes.
  EXPECT_GE(total(*dist.per_node), dist.residency.file_bytes);
  for (const auto& [node, bytes] : *dist.per_node)
    EXPECT_TRUE(std::binary_search(dist.plan.weights.nodes.begin(), dist.plan.weights.nodes.end(), node)) << node;
  EXPECT_NE(dist.summary.find("weights resident: node"), std::string::npos) << dist.summary;
  EXPECT_EQ(iso.residency.placement.policy, MemPolicy::kPreferred);
}

// The CLI end to end: --numa reaches the model through every model command's flags.
TEST(NumaPlacement, LogitsCliIsBitIdenticalAcrossNumaModes) {
  const std::vector<int32_t> all = test::golden_tokens(40);
  ASSERT_EQ(all.size(), 40u);
  test::TempDir tmp;
  std::string ids;
  for (int32_t v : all) ids += std::to_string(v) + " ";
  test::write_text_file(tmp / "ids.txt", ids);
  const std::string base = "'" + test::cli_path().string() + "' logits --model '" + tiny_dir().string() + "' --ids '" +
                           (tmp / "ids.txt").string() + "' --isa avx512 --threads 2";
  auto r = test::run_command(base + " --numa off --out '" + (tmp / "off.npy").string() + "' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = test::run_command(base + " --numa distribute --weights copy --out '" + (tmp / "dist.npy").string() + "' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto a = read_npy(tmp / "off.npy"), b = read_npy(tmp / "dist.npy");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{40, 1024}));
  EXPECT_EQ(a->bytes, b->bytes);
  r = test::run_command(base + " --numa interleave --out '" + (tmp / "x.npy").string() + "' 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("cli.numa"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dsv4
