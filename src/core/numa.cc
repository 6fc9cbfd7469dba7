// core: NUMA topology from sysfs, placement plans, and the Linux syscalls that apply them.
#include "core/numa.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dsv4 {
namespace {

// The kernel's mempolicy modes (linux/mempolicy.h), spelled here so no header from libnuma is needed.
constexpr int kMpolDefault = 0;
constexpr int kMpolPreferred = 1;
constexpr int kMpolInterleave = 3;

std::optional<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Status cpulist_error(const std::filesystem::path& file, const Status& s) {
  return invalid_file("numa.cpulist", file.string() + ": " + s.message());
}

// Node ids of the "node<N>" directories under `dir`, sorted; nullopt if `dir` does not exist.
std::optional<std::vector<int>> node_dirs(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  std::vector<int> ids;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("node") || name.size() == 4 || name.size() > 9) continue;
    int id = 0;
    bool digits = true;
    for (size_t i = 4; i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') digits = false;
      else id = id * 10 + (name[i] - '0');
    }
    if (digits && id < kMaxNumaId) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int> intersect(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

#if defined(__linux__)
// A node mask for mbind/set_mempolicy: one bit per node id, in unsigned longs.
std::vector<unsigned long> node_mask(const std::vector<int>& nodes) {
  constexpr int kBits = 8 * sizeof(unsigned long);
  const int max_id = nodes.empty() ? 0 : nodes.back();
  std::vector<unsigned long> mask(static_cast<size_t>(max_id / kBits + 1), 0);
  for (int n : nodes) mask[static_cast<size_t>(n / kBits)] |= 1ul << (n % kBits);
  return mask;
}

int mpol_mode(MemPolicy p) {
  switch (p) {
    case MemPolicy::kInterleave: return kMpolInterleave;
    case MemPolicy::kPreferred: return kMpolPreferred;
    case MemPolicy::kDefault: break;
  }
  return kMpolDefault;
}
#endif

Result<NumaApplied> syscall_outcome(long rc, const char* what) {
  if (rc == 0) return NumaApplied{true, ""};
  const int err = errno;
  const std::string msg = std::string(what) + " failed: " + std::strerror(err);
  if (numa_errno_is_unsupported(err)) return NumaApplied{false, msg + " (NUMA placement not available here)"};
  return io_error("numa.syscall", msg);
}

}  // namespace

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> ids;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return ids;
  auto bad = [&](const std::string& why) {
    return invalid_file("numa.cpulist", "malformed CPU/node list '" + std::string(text) + "': " + why);
  };
  size_t pos = 0;
  auto number = [&](int* out) {
    const size_t start = pos;
    int64_t v = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      v = v * 10 + (text[pos] - '0');
      if (v >= kMaxNumaId) return false;
      ++pos;
    }
    *out = static_cast<int>(v);
    return pos > start;
  };
  for (;;) {
    int lo = 0, hi = 0;
    if (!number(&lo)) return bad("expected a number at offset " + std::to_string(pos));
    hi = lo;
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      if (!number(&hi)) return bad("expected a number after '-'");
      if (hi < lo) return bad("reversed range " + std::to_string(lo) + "-" + std::to_string(hi));
    }
    for (int i = lo; i <= hi; ++i) ids.push_back(i);
    if (pos == text.size()) break;
    if (text[pos] != ',') return bad(std::string("unexpected '") + text[pos] + "'");
    ++pos;
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::string format_cpu_list(std::span<const int> ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

int NumaTopology::n_cpus() const {
  int n = 0;
  for (const auto& node : nodes) n += static_cast<int>(node.cpus.size());
  return n;
}

const NumaNode* NumaTopology::node_of_cpu(int cpu) const {
  for (const auto& node : nodes)
    if (std::binary_search(node.cpus.begin(), node.cpus.end(), cpu)) return &node;
  return nullptr;
}

Result<NumaTopology> read_numa_topology(const NumaSources& sources) {
  std::vector<int> allowed = sources.allowed_cpus ? *sources.allowed_cpus : current_thread_cpus();
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
  const std::filesystem::path cpu_online = sources.sysfs / "devices/system/cpu/online";
  if (auto text = read_file(cpu_online)) {
    auto online = parse_cpu_list(*text);
    if (!online.is_ok()) return cpulist_error(cpu_online, online.status());
    allowed = intersect(allowed, *online);
  }
  if (allowed.empty()) return invalid_file("numa.no_cpus", "no online CPU in this process's affinity mask");

  std::optional<std::vector<int>> mems;
  if (auto status = read_file(sources.proc_status)) {
    const size_t at = status->find("Mems_allowed_list:");
    if (at != std::string::npos) {
      const size_t eol = std::min(status->find('\n', at), status->size());
      std::string_view v = std::string_view(*status).substr(at + 18, eol - at - 18);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      auto parsed = parse_cpu_list(v);
      if (!parsed.is_ok()) return cpulist_error(sources.proc_status, parsed.status());
      mems = std::move(*parsed);
    }
  }

  NumaTopology topo;
  const std::filesystem::path node_root = sources.sysfs / "devices/system/node";
  const auto ids = node_dirs(node_root);
  if (!ids || ids->empty()) {
    topo.numa_kernel = false;
    topo.nodes.push_back({0, allowed, true});
    return topo;
  }
  std::vector<int> placed;
  for (int id : *ids) {
    const std::filesystem::path file = node_root / ("node" + std::to_string(id)) / "cpulist";
    auto text = read_file(file);
    if (!text) return invalid_file("numa.cpulist", file.string() + ": cannot read the node's CPU list");
    auto cpus = parse_cpu_list(*text);
    if (!cpus.is_ok()) return cpulist_error(file, cpus.status());
    NumaNode node{id, intersect(*cpus, allowed), true};
    if (mems) node.memory_allowed = std::binary_search(mems->begin(), mems->end(), id);
    placed.insert(placed.end(), node.cpus.begin(), node.cpus.end());
    if (!node.cpus.empty()) topo.nodes.push_back(std::move(node));
  }
  std::sort(placed.begin(), placed.end());
  std::vector<int> orphans;
  std::set_difference(allowed.begin(), allowed.end(), placed.begin(), placed.end(), std::back_inserter(orphans));
  if (!orphans.empty()) {
    if (topo.nodes.empty()) topo.nodes.push_back({ids->front(), {}, !mems || std::binary_search(mems->begin(), mems->end(), ids->front())});
    auto& first = topo.nodes.front().cpus;
    first.insert(first.end(), orphans.begin(), orphans.end());
    std::sort(first.begin(), first.end());
  }
  return topo;
}

const char* numa_mode_name(NumaMode mode) {
  switch (mode) {
    case NumaMode::kAuto: return "auto";
    case NumaMode::kOff: return "off";
    case NumaMode::kDistribute: return "distribute";
    case NumaMode::kIsolate: return "isolate";
  }
  return "?";
}

bool parse_numa_mode(std::string_view text, NumaMode* out) {
  for (NumaMode m : {NumaMode::kAuto, NumaMode::kOff, NumaMode::kDistribute, NumaMode::kIsolate})
    if (text == numa_mode_name(m)) {
      *out = m;
      return true;
    }
  return false;
}

const char* mem_policy_name(MemPolicy policy) {
  switch (policy) {
    case MemPolicy::kDefault: return "default";
    case MemPolicy::kInterleave: return "interleave";
    case MemPolicy::kPreferred: return "preferred";
  }
  return "?";
}

bool NumaPlan::pinned() const {
  return std::any_of(thread_cpus.begin(), thread_cpus.end(), [](const auto& c) { return !c.empty(); });
}

Result<NumaPlan> plan_numa(const NumaTopology& topology, NumaMode mode, int n_threads, int current_cpu) {
  if (n_threads < 0) return invalid_argument("numa.threads", "thread count must be >= 0, got " + std::to_string(n_threads));
  if (topology.nodes.empty()) return invalid_argument("numa.no_nodes", "the topology has no node with a usable CPU");
  if (mode == NumaMode::kAuto) mode = topology.nodes.size() > 1 ? NumaMode::kDistribute : NumaMode::kOff;
  NumaPlan plan;
  plan.mode = mode;
  if (mode == NumaMode::kOff) {
    plan.n_threads = n_threads > 0 ? n_threads : std::max(1, topology.n_cpus());
    plan.thread_node.assign(static_cast<size_t>(plan.n_threads), -1);
    plan.thread_cpus.assign(static_cast<size_t>(plan.n_threads), {});
    return plan;
  }
  std::vector<const NumaNode*> used;
  if (mode == NumaMode::kIsolate) {
    const NumaNode* here = topology.node_of_cpu(current_cpu);
    used.push_back(here != nullptr ? here : &topology.nodes.front());
  } else {
    for (const auto& n : topology.nodes) used.push_back(&n);
  }
  int cpus = 0;
  for (const NumaNode* n : used) cpus += static_cast<int>(n->cpus.size());
  plan.n_threads = n_threads > 0 ? n_threads : cpus;

  // Threads per node in proportion to its CPUs: floor shares, then the remainder to the largest
  // fractional parts (ties: lower id first, i.e. the earlier node).
  const size_t k = used.size();
  std::vector<int> quota(k);
  std::vector<std::pair<int64_t, size_t>> frac(k);
  int given = 0;
  for (size_t i = 0; i < k; ++i) {
    const int64_t num = int64_t{plan.n_threads} * static_cast<int64_t>(used[i]->cpus.size());
    quota[i] = static_cast<int>(num / cpus);
    frac[i] = {num % cpus, i};
    given += quota[i];
  }
  std::stable_sort(frac.begin(), frac.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t r = 0; given < plan.n_threads; ++r, ++given) ++quota[frac[r % k].second];
  // Round-robin over the nodes with quota left: slot 0 on the first node, neighbours on different nodes.
  while (static_cast<int>(plan.thread_node.size()) < plan.n_threads) {
    for (size_t i = 0; i < k; ++i) {
      if (quota[i] == 0) continue;
      --quota[i];
      plan.thread_node.push_back(used[i]->id);
      plan.thread_cpus.push_back(used[i]->cpus);
    }
  }

  std::vector<int> mem_nodes;
  for (const NumaNode* n : used)
    if (n->memory_allowed) mem_nodes.push_back(n->id);
  std::sort(mem_nodes.begin(), mem_nodes.end());
  // With no NUMA kernel the memory calls do not exist; with nodes the cpuset forbids they would fail.
  if (topology.numa_kernel && mem_nodes.size() == used.size()) {
    plan.weights.policy = mode == NumaMode::kIsolate ? MemPolicy::kPreferred : MemPolicy::kInterleave;
    plan.weights.nodes = std::move(mem_nodes);
  }
  return plan;
}

bool numa_errno_is_unsupported(int err) { return err == ENOSYS || err == EPERM || err == EOPNOTSUPP; }

#if defined(__linux__)

namespace {

// The affinity mask of `cpus` (ids outside the mask's range are left out).
cpu_set_t cpu_set_of(std::span<const int> cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return set;
}

}  // namespace

Result<NumaApplied> pin_current_thread(std::span<const int> cpus) {
  if (cpus.empty()) return NumaApplied{true, ""};
  const cpu_set_t set = cpu_set_of(cpus);
  if (::sched_setaffinity(0, sizeof(set), &set) == 0) return NumaApplied{true, ""};
  const int err = errno;
  if (err == EINVAL)
    return invalid_argument("numa.pin", "cannot pin a thread to CPUs " + format_cpu_list(cpus) +
                                            ": none of them is allowed to this process");
  errno = err;
  return syscall_outcome(-1, "sched_setaffinity");
}

bool pin_thread(std::thread& t, std::span<const int> cpus) {
  const cpu_set_t set = cpu_set_of(cpus);
  return pthread_setaffinity_np(t.native_handle(), sizeof(set), &set) == 0;
}

std::vector<int> current_thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

int current_cpu() { return ::sched_getcpu(); }

Result<NumaApplied> bind_memory(void* addr, uint64_t bytes, const MemoryPlacement& placement) {
  if (placement.is_default() || bytes == 0) return NumaApplied{true, ""};
  const auto mask = node_mask(placement.nodes);
  const long rc = ::syscall(SYS_mbind, addr, static_cast<unsigned long>(bytes), mpol_mode(placement.policy), mask.data(),
                            static_cast<unsigned long>(mask.size() * 8 * sizeof(unsigned long) + 1), 0u);
  return syscall_outcome(rc, "mbind");
}

ScopedThreadMemoryPolicy::ScopedThreadMemoryPolicy(const MemoryPlacement& placement) : result_(NumaApplied{true, ""}) {
  if (placement.is_default()) return;
  const auto mask = node_mask(placement.nodes);
  const long rc = ::syscall(SYS_set_mempolicy, mpol_mode(placement.policy), mask.data(),
                            static_cast<unsigned long>(mask.size() * 8 * sizeof(unsigned long) + 1));
  result_ = syscall_outcome(rc, "set_mempolicy");
  set_ = rc == 0;
}

ScopedThreadMemoryPolicy::~ScopedThreadMemoryPolicy() {
  if (set_) ::syscall(SYS_set_mempolicy, kMpolDefault, nullptr, 0ul);
}

#else

Result<NumaApplied> pin_current_thread(std::span<const int> cpus) {
  return NumaApplied{cpus.empty(), cpus.empty() ? "" : "thread pinning is Linux-only"};
}
bool pin_thread(std::thread&, std::span<const int>) { return false; }
std::vector<int> current_thread_cpus() { return {}; }
int current_cpu() { return -1; }
Result<NumaApplied> bind_memory(void*, uint64_t, const MemoryPlacement& placement) {
  return NumaApplied{placement.is_default(), placement.is_default() ? "" : "memory placement is Linux-only"};
}
ScopedThreadMemoryPolicy::ScopedThreadMemoryPolicy(const MemoryPlacement& placement)
    : result_(NumaApplied{placement.is_default(), placement.is_default() ? "" : "memory placement is Linux-only"}) {}
ScopedThreadMemoryPolicy::~ScopedThreadMemoryPolicy() = default;

#endif

std::map<int, uint64_t> parse_numa_maps(std::string_view text, std::span<const AddressRange> ranges) {
  std::map<int, uint64_t> bytes;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    // "7f1082a00000 interleave:0-1 anon=2048 dirty=2048 N0=1024 N1=1024 kernelpagesize_kB=4"
    uintptr_t start = 0;
    size_t i = 0;
    for (; i < line.size(); ++i) {
      const char c = line[i];
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (d < 0) break;
      start = start * 16 + static_cast<uintptr_t>(d);
    }
    if (i == 0 || i > 16) continue;
    if (std::none_of(ranges.begin(), ranges.end(), [&](const AddressRange& r) { return start >= r.first && start < r.second; }))
      continue;
    uint64_t page_kb = 0;
    std::vector<std::pair<int, uint64_t>> pages;
    size_t f = i;
    while (f < line.size()) {
      while (f < line.size() && line[f] == ' ') ++f;
      const size_t end = std::min(line.find(' ', f), line.size());
      const std::string_view field = line.substr(f, end - f);
      f = end;
      auto digits = [](std::string_view s, uint64_t* out) {
        if (s.empty() || s.size() > 18) return false;
        uint64_t v = 0;
        for (char c : s) {
          if (c < '0' || c > '9') return false;
          v = v * 10 + static_cast<uint64_t>(c - '0');
        }
        *out = v;
        return true;
      };
      const size_t eq = field.find('=');
      if (eq == std::string_view::npos) continue;
      uint64_t v = 0;
      if (!digits(field.substr(eq + 1), &v)) continue;
      if (field.substr(0, eq) == "kernelpagesize_kB") {
        page_kb = v;
      } else if (field.size() > 1 && field[0] == 'N') {
        uint64_t node = 0;
        if (digits(field.substr(1, eq - 1), &node) && node < static_cast<uint64_t>(kMaxNumaId))
          pages.emplace_back(static_cast<int>(node), v);
      }
    }
    if (page_kb == 0) page_kb = 4;
    for (const auto& [node, n] : pages) bytes[node] += n * page_kb * 1024;
  }
  return bytes;
}

std::optional<std::map<int, uint64_t>> resident_bytes_per_node(std::span<const AddressRange> ranges) {
  auto text = read_file("/proc/self/numa_maps");
  if (!text) return std::nullopt;
  return parse_numa_maps(*text, ranges);
}

std::string describe_topology(const NumaTopology& topology) {
  std::string s = std::to_string(topology.nodes.size()) + (topology.nodes.size() == 1 ? " node" : " nodes");
  if (!topology.numa_kernel) s += " (no NUMA in this kernel)";
  s += ":";
  for (size_t i = 0; i < topology.nodes.size(); ++i) {
    const NumaNode& n = topology.nodes[i];
    s += (i ? ", node" : " node") + std::to_string(n.id) + " cpus " + format_cpu_list(n.cpus) + " (" +
         std::to_string(n.cpus.size()) + ")";
    if (!n.memory_allowed) s += " [memory not allowed]";
  }
  return s;
}

std::string describe_plan(const NumaPlan& plan) {
  std::string s = std::string(numa_mode_name(plan.mode)) + ": " + std::to_string(plan.n_threads) +
                  (plan.n_threads == 1 ? " thread" : " threads");
  if (plan.pinned()) {
    std::map<int, int> per_node;
    for (int n : plan.thread_node) ++per_node[n];
    s += " (";
    bool first = true;
    for (const auto& [node, count] : per_node) {
      s += (first ? "" : ", ") + std::to_string(count) + " on node" + std::to_string(node);
      first = false;
    }
    s += ")";
  } else {
    s += " (not pinned)";
  }
  s += ", weights ";
  if (plan.weights.is_default()) {
    s += "first-touch (kernel default)";
  } else {
    s += std::string(mem_policy_name(plan.weights.policy)) + " over node" + (plan.weights.nodes.size() > 1 ? "s " : " ") +
         format_cpu_list(plan.weights.nodes);
  }
  return s;
}

}  // namespace dsv4
