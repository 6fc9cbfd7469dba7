// io: the --weights policy (residency_policy.h): mode, populate, lock, and the reason in words.
#include "io/residency_policy.h"

#include <cstdio>

namespace dsv4 {
namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

}  // namespace

Result<ResidencyDecision> decide_residency(const ResidencyRequest& request, const ResidencyFacts& facts) {
  const uint64_t bytes = facts.checkpoint_bytes;
  const auto& avail = facts.mem_available;
  const bool fits_margin =
      avail && static_cast<double>(bytes) <= request.copy_fraction * static_cast<double>(*avail);
  const bool fits = avail && bytes <= *avail;
  const std::string sizes =
      gib(bytes) + (avail ? " of weights, " + gib(*avail) + " MemAvailable" : " of weights, MemAvailable unknown");
  const char* reclaim = facts.proactive_reclaim ? "; this host pages out cold page cache (DAMON)" : "";
  ResidencyDecision d;
  switch (request.residency) {
    case Residency::kCopy:
      if (avail && !fits)
        return resource_exhausted("checkpoint.copy_no_memory",
                                  "copying the checkpoint needs " + std::to_string(bytes >> 20) + " MiB but only " +
                                      std::to_string(*avail >> 20) +
                                      " MiB are available; use --weights mmap (pages in on demand)");
      d.resolved = Residency::kCopy;
      d.reason = "copy asked (" + sizes + ")";
      return d;
    case Residency::kMmap:
      d.resolved = Residency::kMmap;
      d.populate = request.populate && fits_margin;
      d.lock = d.populate && facts.lockable_bytes >= bytes;
      d.reason = "mmap asked (" + sizes + ")";
      if (d.lock) {
        d.reason += ": populated and locked (mlock), so the kernel cannot reclaim it";
      } else if (d.populate) {
        d.reason += ": populated; not locked (RLIMIT_MEMLOCK " +
                    (facts.lockable_bytes == 0 ? std::string("0") : gib(facts.lockable_bytes)) +
                    "): the kernel may reclaim pages under pressure" + reclaim;
      } else if (request.populate) {
        d.reason += ": lazy, it does not fit with a quarter of MemAvailable spare";
      }
      return d;
    case Residency::kAuto:
      break;
  }
  d.resolved = fits_margin ? Residency::kCopy : Residency::kMmap;
  if (fits_margin) {
    d.reason = "auto: copy (" + sizes + ", fits with a quarter spare): anonymous memory on 2 MiB pages, which" +
               " the kernel never reclaims without swap, unlike page cache" + reclaim;
    return d;
  }
  if (!avail) {
    d.reason = "auto: lazy mmap (" + sizes + ": no figure to size a copy against)";
    return d;
  }
  d.populate = request.populate && fits;
  d.reason = "auto: " + std::string(d.populate ? "populated" : "lazy") + " mmap (" + sizes +
             (fits ? ": a copy would leave under a quarter spare" : ": larger than available memory, pages in on demand") +
             "); mapped pages can be reclaimed and refault from disk";
  return d;
}

}  // namespace dsv4
