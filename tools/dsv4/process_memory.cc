// tools: /proc/self/status reader.
#include "process_memory.h"

#include <fstream>
#include <string>

namespace dsv4::cli {

namespace {

// The "<key>:  1234 kB" line of /proc/self/status, in bytes.
int64_t status_kb(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(key.size())) * 1024;
  }
  return 0;
}

}  // namespace

int64_t peak_rss_bytes() { return status_kb("VmHWM:"); }
int64_t anon_rss_bytes() { return status_kb("RssAnon:"); }

}  // namespace dsv4::cli
