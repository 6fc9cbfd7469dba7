// tools: /proc/self/status reader.
#include "process_memory.h"

#include <fstream>
#include <string>

namespace dsv4::cli {

int64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:  1234 kB"
  }
  return 0;
}

}  // namespace dsv4::cli
