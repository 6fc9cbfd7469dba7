// tools: this process's memory figures for the CLI's summaries (Linux /proc; 0 elsewhere).
#pragma once

#include <cstdint>

namespace dsv4::cli {

// Peak resident set size (VmHWM) in bytes, mapped checkpoint pages included; 0 when unknown.
int64_t peak_rss_bytes();
// Current anonymous resident bytes (RssAnon: heap, decoded weights, state — not the file-backed,
// reclaimable checkpoint mapping); 0 when unknown.
int64_t anon_rss_bytes();

}  // namespace dsv4::cli
