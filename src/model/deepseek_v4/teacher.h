// model/deepseek_v4: module-level teacher forcing (golden/README.md "How to check"): every module runs on
// the reference's values of its inputs, read from a golden directory, so each module can be compared
// with the reference without the chaos of the full network. Also writes traces in the golden layout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/status.h"
#include "model/deepseek_v4/block.h"

namespace dsv4 {
class Model;
}

namespace dsv4::v4 {

struct TeacherResult {
  std::vector<BlockTrace> layers;   // module outputs on golden inputs, golden names and shapes
  std::vector<float> head_logits;   // [n, vocab]: head on the golden final streams
  std::vector<float> mtp_logits;    // [n−1, vocab]: MTP on the golden final streams + embed(tokens[i+1])
};

// golden_dir holds L{L}_*.npy (directly or under intermediates/); tokens are the prefill ids.
Result<TeacherResult> run_teacher_forced(const Model& model, const std::filesystem::path& golden_dir,
                                         const std::vector<int32_t>& tokens);

// Writes L{L}_<name>.npy for every layer of a trace of an n-token one-shot prefill (golden conventions:
// _indexer_topk = n + entry id, −1 masked).
Status write_intermediates(const std::filesystem::path& dir, const std::vector<BlockTrace>& layers, int64_t n,
                           int64_t hc, int64_t dim, int64_t top_k);

}  // namespace dsv4::v4
