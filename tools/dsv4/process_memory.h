// tools: this process's memory figures for the CLI's summaries (Linux /proc; 0 elsewhere).
#pragma once

#include <cstdint>

namespace dsv4::cli {

// Peak resident set size (VmHWM) in bytes, mapped checkpoint pages included; 0 when unknown.
int64_t peak_rss_bytes();

}  // namespace dsv4::cli
