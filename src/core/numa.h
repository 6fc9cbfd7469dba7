// core: NUMA — the machine's nodes as this process may use them (sysfs + affinity + cpuset), the
// placement plan for a thread pool and the weights (pure functions of the topology), and the syscalls
// that apply it (sched_setaffinity, mbind, set_mempolicy; raw syscalls, no libnuma).
//
// Why: decode streams every weight byte once per token. On a 2-socket box, weights that all sit on one
// node are read through one socket's memory controllers (and half the threads read them remotely), so
// decode runs at about half the machine's bandwidth. Interleaving the weight pages over the nodes and
// spreading the threads over them uses every controller. The pool claims chunks dynamically (any thread
// may compute any rows), so "first touch by the thread that will read it" has no fixed reader to follow:
// page interleave is the placement that does not depend on the schedule.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"

namespace dsv4 {

// "0-3,8,10-11\n" (a sysfs cpulist, /proc/self/status Mems_allowed_list) → sorted, unique ids. Empty
// text (a memory-only node) → empty list. Anything else malformed (a reversed range, junk, ids past
// kMaxNumaId) → kInvalidFile, rule "numa.cpulist".
inline constexpr int kMaxNumaId = 1 << 16;
Result<std::vector<int>> parse_cpu_list(std::string_view text);

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;       // online CPUs of the node that this process may run on (sorted)
  bool memory_allowed = true;  // the cpuset lets this process allocate on the node (Mems_allowed)
};

struct NumaTopology {
  // Nodes with at least one usable CPU, by id. A node without one (memory-only, or outside the
  // affinity mask) is left out: no thread of ours runs there, and interleaving onto it would make every
  // thread read remotely.
  std::vector<NumaNode> nodes;
  // false: the sysfs node directory does not exist (a kernel without CONFIG_NUMA, some containers):
  // one node 0 holding every allowed CPU, and the memory syscalls are not attempted.
  bool numa_kernel = true;
  int n_cpus() const;
  const NumaNode* node_of_cpu(int cpu) const;
};

// Where read_numa_topology looks. Tests point these at fake trees and pass the masks.
struct NumaSources {
  std::filesystem::path sysfs = "/sys";                      // devices/system/{node/node<N>/cpulist, cpu/online}
  std::filesystem::path proc_status = "/proc/self/status";  // Mems_allowed_list (the cpuset's memory nodes)
  // The CPUs this process may run on; nullopt: sched_getaffinity (which already reflects a cgroup
  // cpuset and taskset/numactl --cpunodebind).
  std::optional<std::vector<int>> allowed_cpus;
};

// Reads the topology. A malformed cpulist or online file → kInvalidFile (rule "numa.cpulist", naming
// the file); a CPU that is in the affinity mask but in no node → it joins node 0's list (sysfs and the
// mask disagree only on hotplug races); no usable CPU at all → kInvalidFile, rule "numa.no_cpus".
Result<NumaTopology> read_numa_topology(const NumaSources& sources = {});

// --numa: off (no pinning, the kernel's default first-touch placement); distribute (threads spread over
// every node, each pinned to its node's CPUs, weight pages interleaved over those nodes); isolate (all
// threads on the node the process starts on, weights preferring that node: for running one instance
// per socket); auto (default: distribute when there are several nodes, off on one — so a one-node
// machine changes nothing unless asked).
enum class NumaMode : uint8_t { kAuto, kOff, kDistribute, kIsolate };
const char* numa_mode_name(NumaMode mode);
bool parse_numa_mode(std::string_view text, NumaMode* out);

enum class MemPolicy : uint8_t {
  kDefault,     // the kernel's: first touch (the node of the CPU that faults the page in)
  kInterleave,  // MPOL_INTERLEAVE: page i of a range on nodes[i % n]
  kPreferred,   // MPOL_PREFERRED on nodes[0]: there while it has free pages, elsewhere after (never OOM)
};
const char* mem_policy_name(MemPolicy policy);

struct MemoryPlacement {
  MemPolicy policy = MemPolicy::kDefault;
  std::vector<int> nodes;  // node ids (sorted); empty with kDefault
  bool is_default() const { return policy == MemPolicy::kDefault; }
};

struct NumaPlan {
  NumaMode mode = NumaMode::kOff;  // as resolved: kOff, kDistribute or kIsolate
  int n_threads = 1;               // pool size, calling thread included
  // [n_threads] per pool thread (0 = the calling thread): the node it runs on (−1: not pinned) and the
  // CPUs it is pinned to — the whole node, not one core: on a shared machine the scheduler then still
  // balances inside the node, and locality is a per-node property. Empty lists when not pinned.
  std::vector<int> thread_node;
  std::vector<std::vector<int>> thread_cpus;
  MemoryPlacement weights;  // the weight copy and the populated weight mapping
  bool pinned() const;
};

// The plan for `mode` and a requested thread count (0 = every CPU the plan uses: all allowed CPUs for
// off/distribute — what llama.cpp and ktransformers users expect from "use the machine" — and the
// chosen node's CPUs for isolate). distribute gives each node threads in proportion to its CPUs
// (largest remainder, ties to the lower id) and orders them round-robin over the nodes, so slot 0 (the
// caller) is on the first node and a small pool still spans the nodes. isolate uses the node of
// `current_cpu` (the first node if it is in none). Weights: distribute interleaves over the threads'
// nodes whose memory the cpuset allows, isolate prefers its node, off leaves the kernel default; a plan
// whose memory nodes the cpuset forbids keeps the default. n_threads < 0 → kInvalidArgument.
Result<NumaPlan> plan_numa(const NumaTopology& topology, NumaMode mode, int n_threads, int current_cpu);

// --- Applying a plan (Linux; elsewhere every call reports "unsupported") ---

// The outcome of a NUMA syscall that the platform may not offer: applied, or a fallback with the reason
// (ENOSYS: a kernel without NUMA; EPERM: a seccomp filter such as a container's default profile, which
// blocks the memory-policy calls without CAP_SYS_NICE). A fallback only costs speed, never correctness.
struct NumaApplied {
  bool applied = false;
  std::string note;  // why not, when not applied
};
// True for the errnos that mean "this platform does not do NUMA placement" rather than a bad request.
bool numa_errno_is_unsupported(int err);

// Pins the calling thread to `cpus`. EINVAL (none of them allowed) → kInvalidArgument, rule "numa.pin".
Result<NumaApplied> pin_current_thread(std::span<const int> cpus);
// Pins another thread `t` to `cpus` (the pool pins each worker before its first job); false when refused
// or not supported here.
bool pin_thread(std::thread& t, std::span<const int> cpus);
// The calling thread's affinity mask (sorted CPU ids); empty if unknown.
std::vector<int> current_thread_cpus();
// The CPU the calling thread runs on now (−1 if unknown).
int current_cpu();

// mbind(2) on [addr, addr + bytes) (page-aligned): pages faulted in afterwards follow `placement`;
// pages already present stay where they are. kDefault → nothing to do (applied = true).
Result<NumaApplied> bind_memory(void* addr, uint64_t bytes, const MemoryPlacement& placement);

// set_mempolicy(2) for the calling thread while this object lives (page-cache folios a populate reads
// in follow the task's policy, not the mapping's), then back to the default policy.
class ScopedThreadMemoryPolicy {
 public:
  explicit ScopedThreadMemoryPolicy(const MemoryPlacement& placement);
  ~ScopedThreadMemoryPolicy();
  ScopedThreadMemoryPolicy(const ScopedThreadMemoryPolicy&) = delete;
  ScopedThreadMemoryPolicy& operator=(const ScopedThreadMemoryPolicy&) = delete;
  const Result<NumaApplied>& result() const { return result_; }

 private:
  Result<NumaApplied> result_;
  bool set_ = false;
};

// --- Where pages ended up ---

// Address ranges [begin, end).
using AddressRange = std::pair<uintptr_t, uintptr_t>;
// Resident bytes per node id of the mappings in /proc/self/numa_maps text whose start address lies in
// one of `ranges` ("N<id>=<pages>" × kernelpagesize_kB). Lines it cannot read are skipped.
std::map<int, uint64_t> parse_numa_maps(std::string_view text, std::span<const AddressRange> ranges);
// The same for this process; nullopt where /proc/self/numa_maps does not exist (kernel without NUMA).
std::optional<std::map<int, uint64_t>> resident_bytes_per_node(std::span<const AddressRange> ranges);

// "2 nodes: node0 cpus 0-15 (16), node1 cpus 16-31 (16)" / "distribute: 8 threads (4 on node0, 4 on
// node1), weights interleave over nodes 0,1" — for startup output.
std::string describe_topology(const NumaTopology& topology);
std::string describe_plan(const NumaPlan& plan);
// "0-3,8": the inverse of parse_cpu_list.
std::string format_cpu_list(std::span<const int> ids);

}  // namespace dsv4
