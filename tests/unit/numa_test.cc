// unit: core/numa — cpulist parsing, topology from fake sysfs trees (2 and 4 nodes, offline CPUs, a
// cpuset's masks, malformed files), the placement plan on 1/2/4-node topologies, the numa_maps reader,
// and on this machine: thread pinning and mbind actually take effect (checked against the kernel's own
// view: sched_getaffinity and /proc/self/numa_maps).
#include "core/numa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sched.h>
#include <set>
#include <sstream>
#include <thread>

#include "core/host_memory.h"
#include "core/thread_pool.h"
#include "test_util.h"

namespace dsv4 {
namespace {

std::vector<int> range(int lo, int hi) {  // [lo, hi]
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i) v.push_back(i);
  return v;
}

TEST(NumaCpuList, ParsesSysfsSyntax) {
  auto r = parse_cpu_list("0-3,8,10-11\n");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(*r, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(*parse_cpu_list(""), std::vector<int>{});
  EXPECT_EQ(*parse_cpu_list("\n"), std::vector<int>{});  // a memory-only node
  EXPECT_EQ(*parse_cpu_list("5"), std::vector<int>{5});
  EXPECT_EQ(*parse_cpu_list("4-5,1,5,0-1"), (std::vector<int>{0, 1, 4, 5}));  // sorted, unique
  EXPECT_EQ(format_cpu_list(*parse_cpu_list("0-3,8,10-11")), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list(std::vector<int>{}), "");
}

TEST(NumaCpuList, MalformedIsAnErrorNotACrash) {
  for (const char* bad : {"3-1", "a", "1,,2", "1-", "-1", "1 2", "0-99999999", ",", "1,", "0x3", "1-2-3"}) {
    auto r = parse_cpu_list(bad);
    ASSERT_FALSE(r.is_ok()) << "'" << bad << "' parsed";
    EXPECT_EQ(r.status().rule(), "numa.cpulist") << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidFile) << bad;
  }
}

// A fake /sys and /proc/self/status under a temp dir.
class FakeSys {
 public:
  void node(int id, const std::string& cpulist) {
    const auto d = tmp_.path() / "sys/devices/system/node" / ("node" + std::to_string(id));
    std::filesystem::create_directories(d);
    test::write_text_file(d / "cpulist", cpulist);
  }
  void node_dir_without_cpulist(int id) {
    std::filesystem::create_directories(tmp_.path() / "sys/devices/system/node" / ("node" + std::to_string(id)));
  }
  void node_root_file(const std::string& name, const std::string& text) {
    const auto d = tmp_.path() / "sys/devices/system/node";
    std::filesystem::create_directories(d);
    test::write_text_file(d / name, text);
  }
  void online(const std::string& cpulist) {
    const auto d = tmp_.path() / "sys/devices/system/cpu";
    std::filesystem::create_directories(d);
    test::write_text_file(d / "online", cpulist);
  }
  void mems_allowed(const std::string& list) {
    test::write_text_file(tmp_.path() / "status", "Name:\tdsv4\nCpus_allowed_list:\t0-63\nMems_allowed_list:\t" + list +
                                                      "\nvoluntary_ctxt_switches:\t1\n");
  }
  NumaSources sources(std::vector<int> allowed) const {
    NumaSources s;
    s.sysfs = tmp_.path() / "sys";
    s.proc_status = tmp_.path() / "status";  // absent unless mems_allowed() wrote it
    s.allowed_cpus = std::move(allowed);
    return s;
  }

 private:
  test::TempDir tmp_;
};

TEST(NumaTopology, TwoNodes) {
  FakeSys fs;
  fs.node(0, "0-3,8-11\n");
  fs.node(1, "4-7,12-15\n");
  fs.node_root_file("online", "0-1\n");  // files next to the node dirs are not nodes
  fs.node_root_file("possible", "0-1\n");
  fs.online("0-15\n");
  fs.mems_allowed("0-1");
  auto t = read_numa_topology(fs.sources(range(0, 15)));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  ASSERT_EQ(t->nodes.size(), 2u);
  EXPECT_TRUE(t->numa_kernel);
  EXPECT_EQ(t->nodes[0].id, 0);
  EXPECT_EQ(t->nodes[0].cpus, (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(t->nodes[1].cpus, (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_TRUE(t->nodes[0].memory_allowed && t->nodes[1].memory_allowed);
  EXPECT_EQ(t->n_cpus(), 16);
  ASSERT_NE(t->node_of_cpu(12), nullptr);
  EXPECT_EQ(t->node_of_cpu(12)->id, 1);
  EXPECT_EQ(t->node_of_cpu(99), nullptr);
  EXPECT_EQ(describe_topology(*t), "2 nodes: node0 cpus 0-3,8-11 (8), node1 cpus 4-7,12-15 (8)");
}

TEST(NumaTopology, FourNodesWithOfflineAndDisallowedCpus) {
  FakeSys fs;
  fs.node(0, "0-3");
  fs.node(1, "4-7");
  fs.node(2, "8-11");
  fs.node(3, "12-15");
  fs.node(4, "\n");  // memory-only (CXL, HBM): no CPU, so not a node we run or interleave on
  fs.online("0-5,8-15");  // 6 and 7 are offline
  fs.mems_allowed("0-2,4");
  // The affinity mask (a cpuset or taskset) leaves out node 3 entirely and CPU 9.
  std::vector<int> allowed = range(0, 8);
  allowed.push_back(10);
  allowed.push_back(11);
  auto t = read_numa_topology(fs.sources(allowed));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  ASSERT_EQ(t->nodes.size(), 3u);
  EXPECT_EQ(t->nodes[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(t->nodes[1].cpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(t->nodes[2].id, 2);
  EXPECT_EQ(t->nodes[2].cpus, (std::vector<int>{8, 10, 11}));
  EXPECT_TRUE(t->nodes[2].memory_allowed);
  EXPECT_EQ(t->n_cpus(), 9);
}

TEST(NumaTopology, CpusetForbidsANodesMemory) {
  FakeSys fs;
  fs.node(0, "0-1");
  fs.node(1, "2-3");
  fs.mems_allowed("0");
  auto t = read_numa_topology(fs.sources(range(0, 3)));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  ASSERT_EQ(t->nodes.size(), 2u);
  EXPECT_TRUE(t->nodes[0].memory_allowed);
  EXPECT_FALSE(t->nodes[1].memory_allowed);
  // Interleaving onto a forbidden node would fail: the plan keeps the kernel's default placement.
  auto p = plan_numa(*t, NumaMode::kDistribute, 0, 0);
  ASSERT_TRUE(p.is_ok());
  EXPECT_TRUE(p->weights.is_default());
  EXPECT_TRUE(p->pinned());
}

TEST(NumaTopology, NoNodeDirectoryMeansOneNodeWithoutNumaSyscalls) {
  FakeSys fs;
  fs.online("0-7");
  auto t = read_numa_topology(fs.sources({1, 2, 3}));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_FALSE(t->numa_kernel);
  ASSERT_EQ(t->nodes.size(), 1u);
  EXPECT_EQ(t->nodes[0].cpus, (std::vector<int>{1, 2, 3}));
  auto p = plan_numa(*t, NumaMode::kDistribute, 0, 1);
  ASSERT_TRUE(p.is_ok());
  EXPECT_TRUE(p->weights.is_default());  // no mbind on a kernel without NUMA
  EXPECT_EQ(p->n_threads, 3);
}

TEST(NumaTopology, AllowedCpuInNoNodeJoinsTheFirst) {
  FakeSys fs;
  fs.node(0, "0-1");
  fs.node(1, "2-3");
  auto t = read_numa_topology(fs.sources({0, 3, 5}));  // sysfs and the mask disagree (a hotplug race)
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  ASSERT_EQ(t->nodes.size(), 2u);
  EXPECT_EQ(t->nodes[0].cpus, (std::vector<int>{0, 5}));
  EXPECT_EQ(t->nodes[1].cpus, (std::vector<int>{3}));
}

TEST(NumaTopology, MalformedFilesGiveAClearStatus) {
  {
    FakeSys fs;
    fs.node(0, "0-3");
    fs.node(1, "4-x\n");
    auto t = read_numa_topology(fs.sources(range(0, 7)));
    ASSERT_FALSE(t.is_ok());
    EXPECT_EQ(t.status().rule(), "numa.cpulist");
    EXPECT_NE(t.status().message().find("node1/cpulist"), std::string::npos) << t.status().message();
  }
  {
    FakeSys fs;
    fs.node(0, "0-3");
    fs.node_dir_without_cpulist(1);
    auto t = read_numa_topology(fs.sources(range(0, 3)));
    ASSERT_FALSE(t.is_ok());
    EXPECT_EQ(t.status().rule(), "numa.cpulist");
    EXPECT_NE(t.status().message().find("node1"), std::string::npos) << t.status().message();
  }
  {
    FakeSys fs;
    fs.node(0, "0-3");
    fs.online("0-3,junk");
    auto t = read_numa_topology(fs.sources(range(0, 3)));
    ASSERT_FALSE(t.is_ok());
    EXPECT_EQ(t.status().rule(), "numa.cpulist");
    EXPECT_NE(t.status().message().find("online"), std::string::npos) << t.status().message();
  }
  {
    FakeSys fs;
    fs.node(0, "0-3");
    fs.mems_allowed("0-");
    auto t = read_numa_topology(fs.sources(range(0, 3)));
    ASSERT_FALSE(t.is_ok());
    EXPECT_EQ(t.status().rule(), "numa.cpulist");
  }
  {
    FakeSys fs;
    fs.node(0, "0-3");
    fs.online("0-3");
    auto t = read_numa_topology(fs.sources({8, 9}));  // every allowed CPU offline
    ASSERT_FALSE(t.is_ok());
    EXPECT_EQ(t.status().rule(), "numa.no_cpus");
  }
}

NumaTopology topo(std::vector<std::vector<int>> node_cpus) {
  NumaTopology t;
  for (size_t i = 0; i < node_cpus.size(); ++i) t.nodes.push_back({static_cast<int>(i), node_cpus[i], true});
  return t;
}

std::vector<int> per_node_counts(const NumaPlan& p, int n_nodes) {
  std::vector<int> c(static_cast<size_t>(n_nodes), 0);
  for (int n : p.thread_node) ++c[static_cast<size_t>(n)];
  return c;
}

TEST(NumaPlan, OneNodeAutoChangesNothing) {
  const NumaTopology t = topo({range(0, 1)});
  auto p = plan_numa(t, NumaMode::kAuto, 0, 0);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->mode, NumaMode::kOff);
  EXPECT_EQ(p->n_threads, 2);
  EXPECT_FALSE(p->pinned());
  EXPECT_TRUE(p->weights.is_default());
  EXPECT_EQ(describe_plan(*p), "off: 2 threads (not pinned), weights first-touch (kernel default)");
  // Asked for explicitly, distribute pins and binds even on one node (the path this machine can test).
  p = plan_numa(t, NumaMode::kDistribute, 3, 0);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->n_threads, 3);
  EXPECT_EQ(p->thread_cpus, (std::vector<std::vector<int>>(3, range(0, 1))));
  EXPECT_EQ(p->weights.policy, MemPolicy::kInterleave);
  EXPECT_EQ(p->weights.nodes, std::vector<int>{0});
}

TEST(NumaPlan, TwoNodesDistributeAlternates) {
  const NumaTopology t = topo({range(0, 7), range(8, 15)});
  auto p = plan_numa(t, NumaMode::kAuto, 0, 3);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->mode, NumaMode::kDistribute);
  EXPECT_EQ(p->n_threads, 16);
  ASSERT_EQ(p->thread_node.size(), 16u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(p->thread_node[static_cast<size_t>(i)], i % 2) << i;
    EXPECT_EQ(p->thread_cpus[static_cast<size_t>(i)], i % 2 == 0 ? range(0, 7) : range(8, 15)) << i;
  }
  EXPECT_EQ(p->weights.policy, MemPolicy::kInterleave);
  EXPECT_EQ(p->weights.nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(describe_plan(*p), "distribute: 16 threads (8 on node0, 8 on node1), weights interleave over nodes 0-1");
  // A small pool still spans both nodes (both memory controllers are read).
  p = plan_numa(t, NumaMode::kDistribute, 2, 3);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->thread_node, (std::vector<int>{0, 1}));
  p = plan_numa(t, NumaMode::kDistribute, 1, 9);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->thread_node, (std::vector<int>{0}));
}

TEST(NumaPlan, UnevenNodesGetThreadsInProportion) {
  const NumaTopology t = topo({range(0, 11), range(12, 15)});  // 12 + 4 CPUs
  auto p = plan_numa(t, NumaMode::kDistribute, 8, 0);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(per_node_counts(*p, 2), (std::vector<int>{6, 2}));
  EXPECT_EQ(p->thread_node, (std::vector<int>{0, 1, 0, 1, 0, 0, 0, 0}));
}

TEST(NumaPlan, FourNodesRemainderGoesToLowerIds) {
  const NumaTopology t = topo({range(0, 3), range(4, 7), range(8, 11), range(12, 15)});
  auto p = plan_numa(t, NumaMode::kDistribute, 6, 0);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->thread_node, (std::vector<int>{0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(p->weights.nodes, (std::vector<int>{0, 1, 2, 3}));
  // Every count from 1 to 3x the CPUs: the shares add up and each node is within one of its proportion.
  for (int n = 1; n <= 48; ++n) {
    auto q = plan_numa(t, NumaMode::kDistribute, n, 0);
    ASSERT_TRUE(q.is_ok());
    ASSERT_EQ(q->n_threads, n);
    ASSERT_EQ(q->thread_node.size(), static_cast<size_t>(n));
    for (int c : per_node_counts(*q, 4)) {
      EXPECT_GE(c, n / 4) << n;
      EXPECT_LE(c, (n + 3) / 4) << n;
    }
  }
}

TEST(NumaPlan, IsolateStaysOnTheStartingNode) {
  const NumaTopology t = topo({range(0, 3), range(4, 9)});
  auto p = plan_numa(t, NumaMode::kIsolate, 0, 5);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->mode, NumaMode::kIsolate);
  EXPECT_EQ(p->n_threads, 6);
  EXPECT_EQ(p->thread_node, std::vector<int>(6, 1));
  EXPECT_EQ(p->thread_cpus, std::vector<std::vector<int>>(6, range(4, 9)));
  EXPECT_EQ(p->weights.policy, MemPolicy::kPreferred);
  EXPECT_EQ(p->weights.nodes, std::vector<int>{1});
  p = plan_numa(t, NumaMode::kIsolate, 2, -1);  // current CPU unknown: the first node
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->thread_node, (std::vector<int>{0, 0}));
}

TEST(NumaPlan, OffAndBadInput) {
  const NumaTopology t = topo({range(0, 3), range(4, 7)});
  auto p = plan_numa(t, NumaMode::kOff, 5, 0);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->n_threads, 5);
  EXPECT_FALSE(p->pinned());
  EXPECT_TRUE(p->weights.is_default());
  EXPECT_EQ(plan_numa(t, NumaMode::kDistribute, -1, 0).status().rule(), "numa.threads");
  EXPECT_EQ(plan_numa(NumaTopology{}, NumaMode::kAuto, 0, 0).status().rule(), "numa.no_nodes");
  NumaMode m = NumaMode::kOff;
  EXPECT_TRUE(parse_numa_mode("isolate", &m));
  EXPECT_EQ(m, NumaMode::kIsolate);
  EXPECT_FALSE(parse_numa_mode("numactl", &m));
  EXPECT_EQ(m, NumaMode::kIsolate);
}

TEST(NumaMaps, SumsPagesPerNodeInsideTheRanges) {
  const std::string text =
      "562d6fe7b000 default file=/usr/bin/head mapped=2 N0=2 kernelpagesize_kB=4\n"
      "7f0000000000 interleave:0-1 anon=2048 dirty=2048 N0=3 N1=2 kernelpagesize_kB=2048\n"
      "7f0000600000 interleave:0-1 anon=10 N0=4 N1=6 kernelpagesize_kB=4\n"
      "7f0010000000 default anon=1 N1=1 kernelpagesize_kB=4\n"
      "garbage line\n"
      "7f0000800000 default N0=x N2=5 kernelpagesize_kB=4";
  const std::vector<AddressRange> ranges = {{0x7f0000000000, 0x7f0001000000}};
  const auto b = parse_numa_maps(text, ranges);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.at(0), 3ull * 2048 * 1024 + 4 * 4096);
  EXPECT_EQ(b.at(1), 2ull * 2048 * 1024 + 6 * 4096);
  EXPECT_EQ(b.at(2), 5ull * 4096);
  EXPECT_TRUE(parse_numa_maps(text, std::vector<AddressRange>{}).empty());
}

TEST(NumaApply, UnsupportedErrnosAreAFallback) {
  EXPECT_TRUE(numa_errno_is_unsupported(ENOSYS));
  EXPECT_TRUE(numa_errno_is_unsupported(EPERM));
  EXPECT_FALSE(numa_errno_is_unsupported(EINVAL));
  EXPECT_FALSE(numa_errno_is_unsupported(EFAULT));
}

// This machine's real topology: readable, and covering every CPU the process may run on.
TEST(NumaApply, RealTopologyCoversTheAffinityMask) {
  auto t = read_numa_topology();
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  std::vector<int> all;
  for (const auto& n : t->nodes) all.insert(all.end(), n.cpus.begin(), n.cpus.end());
  std::sort(all.begin(), all.end());
  std::vector<int> mask = current_thread_cpus();
  ASSERT_FALSE(mask.empty());
  // Offline CPUs cannot be in an affinity mask, so the two sets agree.
  EXPECT_EQ(all, mask);
}

// The policy field of the numa_maps line of the mapping that starts at `addr` ("" if none).
std::string numa_maps_policy_at(const void* addr) {
  std::ifstream f("/proc/self/numa_maps");
  std::ostringstream key;
  key << std::hex << reinterpret_cast<uintptr_t>(addr) << ' ';
  std::string line;
  while (std::getline(f, line))
    if (line.starts_with(key.str())) return line.substr(key.str().size(), line.find(' ', key.str().size()) - key.str().size());
  return "";
}

TEST(NumaApply, MbindPlacesPagesWhereThePlanSays) {
  auto t = read_numa_topology();
  ASSERT_TRUE(t.is_ok());
  auto plan = plan_numa(*t, NumaMode::kDistribute, 0, current_cpu());
  ASSERT_TRUE(plan.is_ok());
  if (plan->weights.is_default()) GTEST_SKIP() << "no NUMA memory policy on this kernel: " << describe_topology(*t);
  constexpr uint64_t kBytes = 8ull << 20;
  auto mem = PageMemory::allocate(kBytes, PageKind::kHuge);
  ASSERT_TRUE(mem.is_ok());
  auto placed = mem->place(plan->weights);
  ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
  if (!placed->applied) GTEST_SKIP() << "fallback, as designed: " << placed->note;
  std::memset(mem->data(), 1, kBytes);
  // The kernel's record of the mapping: the interleave policy over exactly the plan's nodes, and every
  // resident byte on one of them.
  EXPECT_EQ(numa_maps_policy_at(mem->data()), "interleave:" + format_cpu_list(plan->weights.nodes));
  const auto b = mem->data();
  const std::vector<AddressRange> r = {{reinterpret_cast<uintptr_t>(b), reinterpret_cast<uintptr_t>(b) + kBytes}};
  const auto per_node = resident_bytes_per_node(r);
  ASSERT_TRUE(per_node.has_value());
  uint64_t total = 0;
  for (const auto& [node, bytes] : *per_node) {
    EXPECT_TRUE(std::binary_search(plan->weights.nodes.begin(), plan->weights.nodes.end(), node)) << node;
    total += bytes;
  }
  EXPECT_EQ(total, kBytes);
  // With several nodes, interleave spreads the pages over all of them.
  if (plan->weights.nodes.size() > 1) {
    EXPECT_EQ(per_node->size(), plan->weights.nodes.size());
  }

  // A thread policy (what a populating file mapping reads under) is set and restored.
  {
    const ScopedThreadMemoryPolicy scoped(plan->weights);
    ASSERT_TRUE(scoped.result().is_ok());
    EXPECT_TRUE(scoped.result()->applied) << scoped.result()->note;
  }
}

// Pinning: each worker runs on exactly the CPUs it was given, and so does the caller from its first
// parallel_for. Runs in its own thread so the test binary's main thread keeps its mask.
TEST(NumaApply, ThreadPoolPinsWorkersAndCaller) {
  const std::vector<int> mask = current_thread_cpus();
  ASSERT_FALSE(mask.empty());
  const int c0 = mask.front(), c1 = mask.back();  // the same CPU on a one-CPU mask
  std::thread t([&] {
    ThreadPool pool(2, {{c0}, {c1}});
    EXPECT_EQ(pool.pin_failures(), 0);
    std::mutex mu;
    std::set<std::pair<int, std::vector<int>>> seen;  // (slot, the thread's mask while running a chunk)
    std::atomic<bool> worker_ran{false};
    pool.parallel_for(64, 1, [&](int64_t, int64_t, int slot) {
      if (slot == 0) {
        // Give the worker time to claim a chunk (bounded: a stalled worker fails the check below).
        const auto t0 = std::chrono::steady_clock::now();
        while (!worker_ran.load() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
          std::this_thread::yield();
      } else {
        worker_ran.store(true);
      }
      std::lock_guard<std::mutex> lock(mu);
      seen.insert({slot == 0 ? 0 : 1, current_thread_cpus()});
    });
    EXPECT_TRUE(worker_ran.load());
    EXPECT_EQ(current_thread_cpus(), std::vector<int>{c0});
    for (const auto& [who, cpus] : seen) EXPECT_EQ(cpus, std::vector<int>{who == 0 ? c0 : c1}) << "slot " << who;
  });
  t.join();
  EXPECT_EQ(current_thread_cpus(), mask);  // the main thread was not touched
}

TEST(NumaApply, PinToDisallowedCpusIsAnError) {
  std::thread t([] {
    const std::vector<int> none = {CPU_SETSIZE - 1};
    auto r = pin_current_thread(none);
    if (r.is_ok()) {
      EXPECT_TRUE(r->applied);  // a machine where the last CPU id exists and is allowed
    } else {
      EXPECT_EQ(r.status().rule(), "numa.pin");
    }
  });
  t.join();
}

}  // namespace
}  // namespace dsv4
