// tools: `dsv4 bench` attention section (see bench_attention.h).
#include "bench_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>

#include "bench_util.h"
#include "core/check.h"
#include "core/kv_row.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/indexer.h"
#include "kernels/cpu/kv_row_decode.h"
#include "kernels/cpu/sparse_attention.h"

namespace dsv4::cli::bench {

AttentionBenchShape attention_shape(const ModelConfig& cfg) {
  AttentionBenchShape s;
  s.n_heads = cfg.n_heads;
  s.head_dim = cfg.head_dim;
  s.window = cfg.window_size;
  s.rope_dims = cfg.rope_head_dim;
  s.index_heads = cfg.index_n_heads;
  s.index_head_dim = cfg.index_head_dim;
  s.index_topk = cfg.index_topk;
  for (int64_t il = 0; il < cfg.n_layers; ++il)
    if (cfg.attention_kind(il) == AttentionKind::kCompressedSparse) {
      s.ratio = cfg.compress_ratio(il);
      break;
    }
  return s;
}

namespace {

std::vector<float> random_rows(int64_t n, int64_t d, uint64_t seed, bool fp4) {
  std::vector<float> v(static_cast<size_t>(n * d));
  for (auto& x : v) x = uniform_pm1(seed);
  if (fp4 && d % 32 == 0) fake_quant_fp4(v, 32);  // what the indexer's keys and queries hold
  return v;
}

}  // namespace

nlohmann::json bench_attention(const AttentionBenchShape& s, const std::vector<int64_t>& contexts, double min_time,
                               kernels::Isa isa, ThreadPool* pool, bool quiet, const ComputePeaks* peaks) {
  const int64_t H = s.n_heads, D = s.head_dim;
  const kernels::AttentionOptions opt{isa, pool};
  const kernels::SparseAttentionShape shape{H, D, static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)))};
  const std::vector<float> q = random_rows(H, D, 1, false);
  const std::vector<float> iq = random_rows(s.index_heads, s.index_head_dim, 2, true);
  std::vector<float> sink(static_cast<size_t>(H)), iw(static_cast<size_t>(s.index_heads));
  uint64_t seed = 3;
  for (auto& v : sink) v = uniform_pm1(seed);
  for (auto& v : iw) v = uniform_pm1(seed) * 0.1f;
  std::vector<float> out(static_cast<size_t>(H * D));
  kernels::SparseAttentionScratch scratch;
  kernels::TopkScratch topk_scratch;

  // Single-threaded runs also report thread CPU time (bench_util.h), which other processes cannot inflate.
  const bool single = !pool || pool->n_threads() == 1;
  if (!quiet) {
    if (single) std::printf("\n(single thread: the 'cpu' columns are the calling thread's CPU time)");
    std::printf("\nattention per token, one CSA layer (H=%lld, D=%lld, window %lld, ratio %lld, top-%lld, %lld index "
                "heads x %lld) vs dense:\n",
                static_cast<long long>(H), static_cast<long long>(D), static_cast<long long>(s.window),
                static_cast<long long>(s.ratio), static_cast<long long>(s.index_topk),
                static_cast<long long>(s.index_heads), static_cast<long long>(s.index_head_dim));
    std::printf("  %8s %10s %10s %10s %10s %10s %12s %9s\n", "context", "CSA us", "indexer", "top-k", "rows", "core",
                "dense us", "dense/CSA");
  }
  // Synthetic state of a CSA layer after `ctx` tokens, stored as the model stores it (core/kv_row.h): the
  // window's earlier rows and ctx/ratio compressed entries as FP8 rows, index keys as packed FP4 (scored in
  // place); the token's own window row stays floats, as it does in attention.cc.
  const KvRowLayout row_layout{D, s.rope_dims};
  DSV4_CHECK(row_layout.valid(), "bench_attention: head_dim - rope_dims must be a positive multiple of 64");
  struct CsaContext {
    int64_t ctx = 0, n_comp = 0, k = 0;
    std::vector<float> scores, own_row;
    std::vector<uint8_t> packed, window_rows, entry_rows;
    std::vector<const uint8_t*> key_rows, window_ptrs, entry_ptrs, read;
    std::vector<int32_t> picked;
    // Best call (bench_util.h) and its four parts, kept from that same call; the CPU time summed over the
    // measured calls (their mean is reported: a minimum over calls of a few microseconds once read 0 on a
    // loaded host).
    double t_index = 0, t_topk = 0, t_rows = 0, t_core = 0, t_csa = 1e300, cpu_sum = 0;
    int64_t cpu_calls = 0;
  };
  // Rows [n, D] of random values, FP8-stored back to back; ptrs to each.
  auto stored_rows = [&](int64_t n, uint64_t seed, std::vector<uint8_t>& bytes, std::vector<const uint8_t*>& ptrs) {
    const std::vector<float> rows = random_rows(n, D, seed, false);
    const int64_t rb = row_layout.bytes();
    bytes.resize(static_cast<size_t>(n * rb));
    ptrs.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      encode_kv_row(row_layout, {rows.data() + t * D, static_cast<size_t>(D)},
                    {bytes.data() + t * rb, static_cast<size_t>(rb)});
      ptrs[static_cast<size_t>(t)] = bytes.data() + t * rb;
    }
  };
  std::vector<CsaContext> states(contexts.size());
  const int64_t key_bytes = index_key_bytes(s.index_head_dim);
  for (size_t c = 0; c < contexts.size(); ++c) {
    CsaContext& st = states[c];
    st.ctx = contexts[c];
    st.n_comp = st.ctx / s.ratio;
    st.k = std::min(s.index_topk, st.n_comp);
    const int64_t n_rows = std::max<int64_t>(st.n_comp, 1);
    stored_rows(s.window - 1, 10, st.window_rows, st.window_ptrs);
    st.own_row = random_rows(1, D, 14, false);
    stored_rows(n_rows, 11, st.entry_rows, st.entry_ptrs);
    const std::vector<float> keys = random_rows(n_rows, s.index_head_dim, 12, true);
    st.packed.resize(static_cast<size_t>(n_rows * key_bytes));
    st.key_rows.resize(static_cast<size_t>(n_rows));
    for (int64_t t = 0; t < n_rows; ++t) {
      encode_index_key({keys.data() + t * s.index_head_dim, static_cast<size_t>(s.index_head_dim)},
                       {st.packed.data() + t * key_bytes, static_cast<size_t>(key_bytes)});
      st.key_rows[static_cast<size_t>(t)] = st.packed.data() + t * key_bytes;
    }
    st.scores.resize(static_cast<size_t>(n_rows));
    st.picked.resize(static_cast<size_t>(std::max<int64_t>(st.k, 1)));
  }
  std::vector<const float*> list;
  list.reserve(static_cast<size_t>(s.window + s.index_topk));
  std::vector<float> decoded(static_cast<size_t>((s.window - 1 + s.index_topk) * D));  // the rows a token reads
  // One call per context in turn, round after round (call 0 of each is its warm-up), so that every context is
  // timed across the same stretch of a shared host's ups and downs: timed one after the other, the 64K / 4K
  // ratio of single runs read 1.17x to 2.12x on a noisy 2-vCPU host (1.53x to 1.64x this way). Each call also
  // finds the caches as the other contexts' calls left them, as a layer's attention does in a decode step
  // after the other layers ran; a small context no longer finds its whole state in the LLC from its own
  // previous call (4K: ~5% slower than timed alone).
  const auto t_start = Clock::now();
  const double total_time = min_time * static_cast<double>(contexts.size());
  for (int64_t it = 0; it < 4 || seconds_since(t_start) < total_time; ++it)
    for (CsaContext& st : states) {
      const double c0 = thread_cpu_seconds();
      const auto t0 = Clock::now();
      kernels::indexer_scores_packed(iq.data(), s.index_heads, s.index_head_dim, st.key_rows.data(), st.n_comp,
                                     iw.data(), st.scores.data(), opt);
      const auto t1 = Clock::now();
      kernels::topk_desc(st.scores.data(), st.n_comp, st.k, st.picked.data(), topk_scratch);
      const auto t2 = Clock::now();
      // The rows this token reads, decoded as attention.cc decodes them: the window's earlier rows, then
      // the picked compressed rows, in one call.
      st.read.assign(st.window_ptrs.begin(), st.window_ptrs.end());
      for (int64_t j = 0; j < st.k; ++j)
        st.read.push_back(st.entry_ptrs[static_cast<size_t>(st.picked[static_cast<size_t>(j)])]);
      kernels::decode_kv_rows(row_layout, st.read.data(), static_cast<int64_t>(st.read.size()), decoded.data(), isa);
      const auto t3 = Clock::now();
      list.clear();
      for (int64_t j = 0; j < s.window - 1; ++j) list.push_back(decoded.data() + j * D);
      list.push_back(st.own_row.data());
      for (int64_t j = 0; j < st.k; ++j) list.push_back(decoded.data() + (s.window - 1 + j) * D);
      kernels::sparse_attention(shape, q.data(), list.data(), static_cast<int64_t>(list.size()), sink.data(),
                                out.data(), scratch, opt);
      const double total = seconds_since(t0);
      if (it == 0) continue;
      st.cpu_sum += thread_cpu_seconds() - c0;
      ++st.cpu_calls;
      if (total < st.t_csa) {
        st.t_csa = total;
        st.t_index = std::chrono::duration<double>(t1 - t0).count();
        st.t_topk = std::chrono::duration<double>(t2 - t1).count();
        st.t_rows = std::chrono::duration<double>(t3 - t2).count();
        st.t_core = total - st.t_index - st.t_topk - st.t_rows;
      }
    }

  // The arithmetic floors (bench_attention.h), where this run probed the instructions the kernels run on.
  const kernels::Isa resolved = kernels::resolve_isa(isa);
  const bool avx512_tier =
      resolved == kernels::Isa::kAvx512 || resolved == kernels::Isa::kAvx512Bf16 || resolved == kernels::Isa::kAmx;
  const kernels::ComputePeak* core_peak = !peaks        ? nullptr
                                          : avx512_tier ? peaks->get(kernels::ComputeInsn::kFp32Fma)
                                          : resolved == kernels::Isa::kAvx2
                                              ? peaks->get(kernels::ComputeInsn::kFp32FmaYmm)
                                              : nullptr;
  const kernels::ComputePeak* index_peak =
      peaks && avx512_tier && kernels::has_avx512_vnni_vbmi() ? peaks->get(kernels::ComputeInsn::kInt8Dot) : nullptr;
  const bool floors = core_peak && index_peak && core_peak->threads_gflops > 0 && index_peak->threads_gflops > 0;
  auto core_floor = [&](const CsaContext& st) {  // seconds
    return 4.0 * static_cast<double>(H * D * (s.window + st.k)) / (core_peak->threads_gflops * 1e9);
  };
  auto index_floor = [&](const CsaContext& st) {
    return 2.0 * static_cast<double>(s.index_heads * s.index_head_dim * st.n_comp) / (index_peak->threads_gflops * 1e9);
  };

  nlohmann::json rows = nlohmann::json::array();
  double csa_at_4k = 0, csa_at_64k = 0, cpu_at_4k = 0, cpu_at_64k = 0, floor_at_4k = 0, floor_at_64k = 0;
  for (const CsaContext& st : states) {
    const int64_t ctx = st.ctx, n_comp = st.n_comp, k = st.k;
    const double t_csa = st.t_csa, t_index = st.t_index, t_topk = st.t_topk, t_rows = st.t_rows, t_core = st.t_core;
    const double cpu_csa = st.cpu_sum / static_cast<double>(st.cpu_calls);
    // The dense baseline (every raw row), one context at a time: it is the yardstick, not the ratio's terms.
    double t_dense, cpu_dense_sum = 0;
    int64_t dense_calls = 0;
    {
      const std::vector<float> raw = random_rows(ctx, D, 13, false);
      std::vector<const float*> all(static_cast<size_t>(ctx));
      for (int64_t j = 0; j < ctx; ++j) all[static_cast<size_t>(j)] = raw.data() + j * D;
      t_dense = best_call_time(min_time, 2, [&](int64_t) {
        const double c0 = thread_cpu_seconds();
        kernels::sparse_attention(shape, q.data(), all.data(), ctx, sink.data(), out.data(), scratch, opt);
        if (dense_calls++ > 0) cpu_dense_sum += thread_cpu_seconds() - c0;  // the first call is the warm-up
      });
    }
    const double cpu_dense = cpu_dense_sum / static_cast<double>(dense_calls - 1);
    const double f_core = floors ? core_floor(st) : 0, f_index = floors ? index_floor(st) : 0;
    if (ctx == 4096) {
      csa_at_4k = t_csa;
      cpu_at_4k = cpu_csa;
      floor_at_4k = f_core + f_index;
    }
    if (ctx == 65536) {
      csa_at_64k = t_csa;
      cpu_at_64k = cpu_csa;
      floor_at_64k = f_core + f_index;
    }
    nlohmann::json row = {{"context", ctx},
                          {"compressed_entries", n_comp},
                          {"selected", k},
                          {"csa_us_per_token", t_csa * 1e6},
                          {"indexer_us", t_index * 1e6},
                          {"topk_us", t_topk * 1e6},
                          {"rows_us", t_rows * 1e6},
                          {"sparse_core_us", t_core * 1e6},
                          {"dense_us_per_token", t_dense * 1e6},
                          {"dense_over_csa", t_dense / t_csa}};
    if (single) {
      row["csa_cpu_us_per_token"] = cpu_csa * 1e6;
      row["dense_cpu_us_per_token"] = cpu_dense * 1e6;
    }
    if (floors) {
      row["core_floor_us"] = f_core * 1e6;
      row["indexer_floor_us"] = f_index * 1e6;
      row["csa_floor_us"] = (f_core + f_index) * 1e6;
    }
    rows.push_back(row);
    if (!quiet) {
      std::printf("  %8lld %10.1f %10.1f %10.1f %10.1f %10.1f %12.1f %8.1fx", static_cast<long long>(ctx), t_csa * 1e6,
                  t_index * 1e6, t_topk * 1e6, t_rows * 1e6, t_core * 1e6, t_dense * 1e6, t_dense / t_csa);
      if (single) std::printf("   cpu: CSA %.1f dense %.1f", cpu_csa * 1e6, cpu_dense * 1e6);
      std::printf("\n");
    }
  }
  nlohmann::json j = {{"layer", "csa"},
                      {"n_heads", H},
                      {"head_dim", D},
                      {"window", s.window},
                      {"ratio", s.ratio},
                      {"index_topk", s.index_topk},
                      {"index_heads", s.index_heads},
                      {"index_head_dim", s.index_head_dim},
                      {"kernel", std::string("sparse_attention/") + kernels::isa_name(kernels::resolve_isa(isa))},
                      {"contexts", rows}};
  if (csa_at_4k > 0 && csa_at_64k > 0) {
    j["csa_64k_over_4k"] = csa_at_64k / csa_at_4k;
    if (!quiet) std::printf("  CSA per-token cost at 64K / at 4K: %.2fx\n", csa_at_64k / csa_at_4k);
    if (single) {
      j["csa_64k_over_4k_cpu"] = cpu_at_64k / cpu_at_4k;
      if (!quiet) std::printf("  CSA per-token CPU time at 64K / at 4K: %.2fx\n", cpu_at_64k / cpu_at_4k);
    }
  }
  if (floors) {
    j["floor"] = {{"core_insn", kernels::compute_insn_name(core_peak->insn)},
                  {"core_gflops", core_peak->threads_gflops},
                  {"indexer_insn", kernels::compute_insn_name(index_peak->insn)},
                  {"indexer_gops", index_peak->threads_gflops},
                  {"threads", core_peak->threads}};
    if (!quiet) {
      std::printf(
          "  arithmetic floor (%s %.0f GFLOP/s for q.k + P.V, %s %.0f Gop/s for the indexer's dots; %d "
          "thread(s) at once):\n",
          kernels::compute_insn_name(core_peak->insn), core_peak->threads_gflops,
          kernels::compute_insn_name(index_peak->insn), index_peak->threads_gflops, core_peak->threads);
      std::printf("  %8s %10s %10s %10s %14s %14s\n", "context", "floor us", "core", "indexer", "core/floor",
                  "indexer/floor");
      for (size_t c = 0; c < states.size(); ++c) {
        const CsaContext& st = states[c];
        const double fc = core_floor(st), fi = index_floor(st);
        std::printf("  %8lld %10.1f %10.1f %10.1f %13.2fx %13.2fx\n", static_cast<long long>(st.ctx), (fc + fi) * 1e6,
                    fc * 1e6, fi * 1e6, st.t_core / fc, fi > 0 ? st.t_index / fi : 0.0);
      }
    }
    if (floor_at_4k > 0 && floor_at_64k > 0) {
      j["csa_64k_over_4k_floor"] = floor_at_64k / floor_at_4k;
      if (!quiet)
        std::printf(
            "  CSA per-token floor at 64K / at 4K: %.2fx (the best ratio these instructions allow; a faster core "
            "raises it)\n",
            floor_at_64k / floor_at_4k);
    }
  }
  return j;
}

}  // namespace dsv4::cli::bench
