// unit: `dsv4 bench` end to end at tiny sizes — the JSON report has every section, its byte counts follow
// the spec §3 layouts, its rates are positive, and --model counts a checkpoint's per-token weight bytes
// (routed experts at n_activated / n_routed) as computed here independently from the tensor list. The
// decode rows' per-phase table carries each phase's CPU time beside its wall time, consistently in every
// column; --model-only runs the probes and the model section and nothing else.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "core/host_memory.h"
#include "core/numa.h"
#include "io/model_config.h"
#include "kernels/cpu/read_probe.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace dsv4 {
namespace {

// One decode row's per-phase table (bench_model.cc profile_report): the CPU columns agree with each other
// and with the wall ones, the phases sum to the '= matmuls' / '= outside' lines, and the profile read one
// CPU clock per model thread.
void check_phase_table(const nlohmann::json& row, int64_t threads, double probe_cpu_gbps) {
  const auto& ph = row["phases"];
  double cpu = 0, mm_cpu = 0, wall = 0;
  for (const char* name : {"other", "attn_linear", "attn_core", "mhc", "moe_gate", "moe_route", "moe_experts", "head_linear",
                           "head_mix"}) {
    ASSERT_TRUE(ph.contains(name)) << name;
    const auto& p = ph[name];
    const double ms = p["ms_per_token"], cpu_ms = p["cpu_ms_per_token"];
    EXPECT_GE(cpu_ms, 0.0) << name;
    const double busy = ms > 0 ? cpu_ms / ms : 0.0;
    EXPECT_NEAR(p["cpu_over_wall"].get<double>(), busy, 1e-9 * (1 + busy)) << name;
    cpu += cpu_ms;
    wall += ms;
    const bool matmul = std::string(name) == "attn_linear" || std::string(name) == "moe_gate" ||
                        std::string(name) == "moe_experts" || std::string(name) == "head_linear";
    if (matmul) {
      mm_cpu += cpu_ms;
      // Bytes per CPU-second: the phase's bytes per token over its CPU time per token, against the probe's.
      const double want = cpu_ms > 0 ? p["bytes_per_token"].get<double>() / (cpu_ms * 1e6) : 0.0;
      EXPECT_NEAR(p["gb_per_cpu_s"].get<double>(), want, 1e-9 * want) << name;
      EXPECT_NEAR(p["ratio_to_probe_cpu"].get<double>(), want / probe_cpu_gbps, 1e-9 * want / probe_cpu_gbps) << name;
    }
  }
  EXPECT_GT(cpu, 0.0);
  EXPECT_GT(wall, 0.0);
  EXPECT_NEAR(ph["weight_matmuls"]["cpu_ms_per_token"].get<double>(), mm_cpu, 1e-9 * cpu);
  EXPECT_NEAR(ph["outside_matmuls"]["cpu_ms_per_token"].get<double>(), cpu - mm_cpu, 1e-9 * cpu);
  double share = 0;
  for (const auto& [name, p] : ph.items())
    if (name != "weight_matmuls" && name != "outside_matmuls") share += p["cpu_share"].get<double>();
  EXPECT_NEAR(share, 1.0, 1e-9);
  const auto& prof = row["phase_profile"];
  EXPECT_EQ(prof["clocks"].get<int64_t>(), threads);
  EXPECT_GT(prof["boundaries_per_token"].get<double>(), 0.0);
  EXPECT_GT(prof["clock_read_us"].get<double>(), 0.0);
  EXPECT_NEAR(prof["clock_read_ms_per_token"].get<double>(),
              prof["boundaries_per_token"].get<double>() * prof["clock_read_us"].get<double>() / 1e3,
              1e-9 * prof["clock_read_ms_per_token"].get<double>());
}

TEST(KernelBenchCli, JsonReportAtTinySizes) {
  const auto ckpt_dir = test::shared_dir() / "golden" / "tiny" / "checkpoint";
  const auto r = test::run_command(test::cli_path().string() + " bench --json --threads 1 --probe-mb 8" +
                                   " --working-set-mb 8 --min-time 0.01 --contexts 64,4096 --prefill-tokens 6 --decode-prompt 3" +
                                   " --decode-steps 2 --gemm-tokens 1,4,16 --weights copy --model " + ckpt_dir.string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_FALSE(j["model_only"].get<bool>());
  // The probe on both page kinds; the machine's limit is the higher of each figure.
  const auto& probe = j["read_probe"];
  for (const char* kind : {"4k", "huge"}) {
    ASSERT_TRUE(probe.contains(kind)) << probe.dump();
    EXPECT_EQ(probe[kind]["bytes"].get<int64_t>(), 8 << 20);
    EXPECT_GT(probe[kind]["best_gbps"].get<double>(), 0.0);
    EXPECT_GE(probe[kind]["best_gbps"].get<double>(), probe[kind]["mean_gbps"].get<double>());
    if (probe[kind].contains("huge_page_bytes")) {
      EXPECT_LE(probe[kind]["huge_page_bytes"].get<int64_t>(), int64_t{8} << 20);
    }
  }
  if (probe["4k"].contains("huge_page_bytes")) {
    EXPECT_EQ(probe["4k"]["huge_page_bytes"].get<int64_t>(), 0);
  }
  EXPECT_DOUBLE_EQ(probe["best_gbps"].get<double>(),
                   std::max(probe["4k"]["best_gbps"].get<double>(), probe["huge"]["best_gbps"].get<double>()));
  EXPECT_DOUBLE_EQ(probe["best_cpu_gbps"].get<double>(),
                   std::max(probe["4k"]["best_cpu_gbps"].get<double>(), probe["huge"]["best_cpu_gbps"].get<double>()));

  const auto& gemv = j["decode_gemv"];
  ASSERT_EQ(gemv.size(), 11u);
  for (const auto& c : gemv) {
    const int64_t n = c["n_rows"], k = c["n_cols"];
    const std::string kernel = c["kernel"];
    const int64_t want = kernel.rfind("fp4_gemm/", 0) == 0   ? n * k / 2 + n * k / 32
                         : kernel.rfind("fp8_gemm/", 0) == 0 ? n * k + ((n + 127) / 128) * ((k + 127) / 128)
                                                             : 2 * n * k;
    EXPECT_EQ(c["weight_bytes"].get<int64_t>(), want) << kernel;
    EXPECT_GT(c["gbps"].get<double>(), 0.0);
    EXPECT_NE(kernel.find("/m=1"), std::string::npos);
  }
  // The GEMV weight copies sit on huge pages (where the model's weights sit), with what the kernel granted.
  const auto& gp = j["decode_gemv_pages"];
  EXPECT_EQ(gp["kind"].get<std::string>(), "huge");
  if (gp.contains("max_anon_huge_bytes")) {
    EXPECT_EQ(gp["max_anon_huge_bytes"].get<int64_t>() % (int64_t{2} << 20), 0);
  }
  // 6 routed FP4 experts (w1, w3, w2) + the FP8 shared expert, per decode token.
  const int64_t fp4 = 2048 * 4096 / 2 + 2048 * 4096 / 32, fp8 = 2048 * 4096 + 16 * 32;
  EXPECT_EQ(j["decode_moe_layer"]["weight_bytes_per_token"].get<int64_t>(), 6 * 3 * fp4 + 3 * fp8);
  // Compute probe: every instruction the CPU has, with the flops one instruction does.
  const auto& cp = j["compute_probe"];
  EXPECT_EQ(cp["fma_f32_zmm"]["flops_per_insn"].get<int64_t>(), 32);
  EXPECT_EQ(cp["fma_f32_ymm"]["flops_per_insn"].get<int64_t>(), 16);
  EXPECT_EQ(cp["vdpbf16ps_zmm"]["flops_per_insn"].get<int64_t>(), 64);
  EXPECT_EQ(cp["tdpbf16ps"]["flops_per_insn"].get<int64_t>(), 16384);
  for (const auto& [name, e] : cp.items()) {
    if (e["supported"].get<bool>()) {
      EXPECT_GT(e["core_gflops"].get<double>(), 0.0) << name;
    }
  }

  // Prefill rows: 3 tensors × the --gemm-tokens m values in order (1 and 4 take the GEMV and many-token
  // tiles, 16 the AMX expert routing's smallest m; the default set's 64 and 256 would spend two minutes of
  // the sanitizer run in the same tiles); each row's compute fraction is its GFLOP/s over the all-threads
  // peak of the instruction it names, its bandwidth fraction the weight GB/s over the probe.
  constexpr int64_t kGemmTokens[] = {1, 4, 16};
  ASSERT_EQ(j["prefill_gemm"].size(), 9u);
  for (size_t i = 0; i < 9; ++i) {
    EXPECT_EQ(j["prefill_gemm"][i]["m"].get<int64_t>(), kGemmTokens[i % 3]) << i;
  }
  for (const auto& row : j["prefill_gemm"]) {
    EXPECT_NEAR(row["ratio_to_probe"].get<double>(), row["gbps"].get<double>() / j["read_probe"]["best_gbps"].get<double>(), 1e-9);
    if (!row.contains("peak_insn")) continue;
    const std::string insn = row["peak_insn"];
    const std::string kernel = row["kernel"];
    // AMX GEMMs multiply on tdpbf16ps; the AVX512-BF16 tiles (bf16, fp8 and fp4 alike) on vdpbf16ps (the
    // rows' activations are fake-quantized: bf16-exact); the AVX-512 tiles on fp32 FMA; the AVX2 tiles on
    // ymm FMA.
    if (kernel.find("/amx/") != std::string::npos) {
      EXPECT_EQ(insn, "tdpbf16ps") << kernel;
    } else if (kernel.find("/avx2/") != std::string::npos) {
      EXPECT_EQ(insn, "fma_f32_ymm") << kernel;
    } else if (kernel.find("/avx512bf16/") != std::string::npos) {
      EXPECT_EQ(insn, "vdpbf16ps_zmm") << kernel;
    } else {
      EXPECT_EQ(insn, "fma_f32_zmm") << kernel;
    }
    EXPECT_NEAR(row["ratio_to_compute_peak"].get<double>(), row["gflops"].get<double>() / cp[insn]["threads_gflops"].get<double>(),
                1e-9);
  }

  auto cfg = load_model_config(ckpt_dir);
  auto ckpt = Checkpoint::open(ckpt_dir);
  ASSERT_TRUE(cfg.is_ok() && ckpt.is_ok());
  double experts = 0, mtp = 0;
  // Multiply-adds per token of the main model's 2-D matmul weights (packed FP4: two per byte), outside the
  // routed experts, and of one routed expert.
  double dense_macs = 0, expert_macs = 0;
  for (const auto& t : ckpt->tensors()) {
    const bool matmul = t.shape.size() == 2 && t.name != "embed.weight" && t.name.ends_with(".weight") &&
                        t.name.rfind("mtp.", 0) != 0 && t.dtype != DType::kF8E8M0;
    const double elems = static_cast<double>(t.n_elements) * (t.dtype == DType::kI8 ? 2.0 : 1.0);
    if (matmul && t.name.find(".ffn.experts.") == std::string::npos) dense_macs += elems;
    if (matmul && t.name.rfind("layers.0.ffn.experts.0.", 0) == 0) expert_macs += elems;
    if (t.name.rfind("mtp.", 0) == 0) {
      mtp += static_cast<double>(t.data.size()) /
             (t.name == "mtp.0.ffn.gate.tid2eid" ? static_cast<double>(t.shape[0]) : 1.0);
    } else if (t.name.find(".ffn.experts.") != std::string::npos) {
      experts += static_cast<double>(t.data.size());
    }
  }
  const double routed = experts * static_cast<double>(cfg->n_activated_experts) / static_cast<double>(cfg->n_routed_experts);
  EXPECT_NEAR(j["model"]["routed_expert_bytes_per_token"].get<double>(), routed, 1e-6 * routed);
  EXPECT_GT(j["model"]["weight_bytes_per_decode_token"].get<double>(), routed);
  EXPECT_LT(j["model"]["weight_bytes_per_decode_token"].get<double>(), static_cast<double>(ckpt->total_bytes()));

  // Attention section: the checkpoint's CSA shapes, one row per --contexts entry, the selection capped by
  // index_topk and the number of compressed entries.
  const auto& att = j["attention"];
  EXPECT_EQ(att["n_heads"].get<int64_t>(), cfg->n_heads);
  EXPECT_EQ(att["head_dim"].get<int64_t>(), cfg->head_dim);
  EXPECT_EQ(att["index_topk"].get<int64_t>(), cfg->index_topk);
  const int64_t ratio = att["ratio"].get<int64_t>();
  EXPECT_EQ(ratio, 4);  // the tiny config's first CSA layer
  ASSERT_EQ(att["contexts"].size(), 2u);
  for (const auto& row : att["contexts"]) {
    const int64_t ctx = row["context"];
    EXPECT_EQ(row["compressed_entries"].get<int64_t>(), ctx / ratio);
    EXPECT_EQ(row["selected"].get<int64_t>(), std::min<int64_t>(cfg->index_topk, ctx / ratio));
    EXPECT_GT(row["csa_us_per_token"].get<double>(), 0.0);
    EXPECT_GT(row["dense_us_per_token"].get<double>(), 0.0);
    EXPECT_GE(row["indexer_us"].get<double>(), 0.0);
    // --threads 1: the calling thread's CPU time is reported too.
    EXPECT_GT(row["csa_cpu_us_per_token"].get<double>(), 0.0);
    EXPECT_GT(row["dense_cpu_us_per_token"].get<double>(), 0.0);
  }
  EXPECT_EQ(att["contexts"][0]["context"].get<int64_t>(), 64);
  EXPECT_EQ(att["contexts"][1]["context"].get<int64_t>(), 4096);

  // Model section: decode bytes come from the run's routing. Every routed expert of tiny has the same
  // size, so one token reads exactly the dense part + n_layers · top-k experts, and a batch of b reads
  // between that and min(b · top-k, n_experts) experts per layer, shared by its b tokens.
  const auto& run = j["model_run"];
  EXPECT_EQ(run["backend"].get<std::string>(), "cpu");
  // --weights copy: the whole checkpoint (every shard file) copied, not populated (a copy needs no faulting in).
  const auto& w = run["weights"];
  EXPECT_EQ(w["requested"].get<std::string>(), "copy");
  EXPECT_EQ(w["mode"].get<std::string>(), "copy");
  EXPECT_FALSE(w["populated"].get<bool>());
  uint64_t file_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(ckpt_dir))
    if (e.path().extension() == ".safetensors") file_bytes += std::filesystem::file_size(e.path());
  EXPECT_EQ(w["checkpoint_bytes"].get<uint64_t>(), file_bytes);
  EXPECT_EQ(w["copied_bytes"].get<uint64_t>(), file_bytes);
  EXPECT_EQ(w["mapped_bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(w["load_seconds"].get<double>(), 0.0);
  // NUMA (core/numa.h): the plan --numa auto makes of this machine's nodes, and the copy's resident bytes
  // per node from /proc/self/numa_maps — a copy is faulted in whole, so they cover the checkpoint.
  auto topology = read_numa_topology();
  ASSERT_TRUE(topology.is_ok()) << topology.status().to_string();
  EXPECT_EQ(j["numa"]["mode"].get<std::string>(), topology->nodes.size() > 1 ? "distribute" : "off");
  EXPECT_EQ(j["numa"]["topology"].get<std::string>(), describe_topology(*topology));
  if (run["numa"].contains("weight_bytes_per_node")) {
    uint64_t resident = 0;
    for (const auto& [node, bytes] : run["numa"]["weight_bytes_per_node"].items()) resident += bytes.get<uint64_t>();
    EXPECT_GE(resident, file_bytes);
  }
  EXPECT_EQ(run["prefill"]["tokens"].get<int64_t>(), 6);
  EXPECT_GT(run["prefill"]["tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(run["prefill"]["gflops"].get<double>(), 0.0);
  const double dense = run["dense_weight_bytes_per_step"];
  const double expert = experts / static_cast<double>(cfg->n_layers * cfg->n_routed_experts);
  const double k = static_cast<double>(cfg->n_activated_experts), L = static_cast<double>(cfg->n_layers);
  EXPECT_NEAR(dense + routed, j["model"]["weight_bytes_per_decode_token"].get<double>(), 1e-6 * dense);
  ASSERT_EQ(run["decode"].size(), 3u);
  for (const auto& row : run["decode"]) {
    const int64_t b = row["batch"];
    const double per_step = row["weight_bytes_per_step"];
    EXPECT_EQ(row["steps"].get<int64_t>(), 2);
    if (b == 1) {
      EXPECT_DOUBLE_EQ(per_step, dense + L * k * expert);
    }
    EXPECT_GE(per_step, dense + L * k * expert - 1e-6);
    EXPECT_LE(per_step, dense + L * std::min(static_cast<double>(b) * k, static_cast<double>(cfg->n_routed_experts)) * expert + 1e-6);
    EXPECT_DOUBLE_EQ(row["weight_bytes_per_token"].get<double>(), per_step / static_cast<double>(b));
    EXPECT_GT(row["tokens_per_s"].get<double>(), 0.0);
    // The model rows' ratios use the probe taken right before the model section.
    const auto& near = j["read_probe_before_model"];
    EXPECT_GT(near["best_gbps"].get<double>(), 0.0);
    EXPECT_NEAR(row["ratio_to_probe"].get<double>(), row["gbps"].get<double>() / near["best_gbps"].get<double>(), 1e-9);
    // Bytes per CPU-second: the step bytes over the row's CPU time, against the probe's.
    const double steps = static_cast<double>(row["steps"].get<int64_t>());
    EXPECT_NEAR(row["gb_per_cpu_s"].get<double>(), per_step * steps / row["cpu_seconds"].get<double>() / 1e9,
                1e-9 * row["gb_per_cpu_s"].get<double>());
    EXPECT_NEAR(row["ratio_to_probe_cpu"].get<double>(),
                row["gb_per_cpu_s"].get<double>() / near["best_cpu_gbps"].get<double>(), 1e-9);
    // Compute: every token multiplies the dense weights and its top-k experts' in every layer, whatever
    // the routing (rows carry the figures where the CPU has the tiles' instructions).
    if (row.contains("weight_gflop_per_step")) {
      const double want = 2.0 * static_cast<double>(b) * (dense_macs + L * k * expert_macs) / 1e9;
      EXPECT_NEAR(row["weight_gflop_per_step"].get<double>(), want, 1e-9 * want) << "batch " << b;
      EXPECT_NEAR(row["gflops"].get<double>(), want * steps / row["seconds"].get<double>(), 1e-6 * want);
      EXPECT_GT(row["ratio_to_compute_peak_cpu"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(run["decode"][0]["batch"].get<int64_t>(), 1);
  EXPECT_EQ(run["decode"][2]["batch"].get<int64_t>(), 8);
  // The bandwidth ceiling of batch b over batch 1 is b · bytes_step(1) / bytes_step(b), recomputed here
  // from the byte columns; the achieved fraction is the measured speedup over it.
  const double tps1 = run["decode"][0]["tokens_per_s"], step1 = run["decode"][0]["weight_bytes_per_step"];
  for (const auto& row : run["decode"]) {
    const auto b = static_cast<double>(row["batch"].get<int64_t>());
    const double ceiling = b * step1 / row["weight_bytes_per_step"].get<double>();
    EXPECT_NEAR(row["bandwidth_ceiling_over_batch1"].get<double>(), ceiling, 1e-9 * ceiling);
    EXPECT_GE(ceiling, 1.0 - 1e-9);  // a batch never reads more than b single steps
    EXPECT_LE(ceiling, b + 1e-9);
    const double speedup = row["tokens_per_s"].get<double>() / tps1;
    EXPECT_NEAR(row["tokens_per_s_over_batch1"].get<double>(), speedup, 1e-9 * speedup);
    EXPECT_NEAR(row["fraction_of_ceiling"].get<double>(), speedup / ceiling, 1e-9 * speedup / ceiling);
    EXPECT_GT(row["cpu_seconds"].get<double>(), 0.0);
    EXPECT_NEAR(row["tokens_per_cpu_s"].get<double>(),
                b * static_cast<double>(row["steps"].get<int64_t>()) / row["cpu_seconds"].get<double>(), 1e-6 * row["tokens_per_cpu_s"].get<double>());
    check_phase_table(row, 1, j["read_probe_before_model"]["best_cpu_gbps"].get<double>());
  }
}

// --model-only: the probes (their figures are the model rows' denominators) and the model section, no
// kernel or attention rows; in text, the per-phase table's CPU columns stand beside the wall ones. Two
// threads, so the profile sums a pool worker's clock with the caller's.
TEST(KernelBenchCli, ModelOnlySkipsKernelSections) {
  const auto ckpt_dir = test::shared_dir() / "golden" / "tiny" / "checkpoint";
  const std::string cmd = test::cli_path().string() + " bench --model-only --threads 2 --probe-mb 8 --min-time 0.01" +
                          " --prefill-tokens 4 --decode-prompt 3 --decode-steps 2 --batches 1,2 --weights copy --model " +
                          ckpt_dir.string();
  auto r = test::run_command(cmd + " --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_TRUE(j["model_only"].get<bool>());
  for (const char* skipped : {"decode_gemv", "decode_gemv_pages", "decode_moe_layer", "prefill_gemm", "attention"})
    EXPECT_FALSE(j.contains(skipped)) << skipped;
  EXPECT_GT(j["read_probe"]["best_gbps"].get<double>(), 0.0);
  EXPECT_TRUE(j["compute_probe"].contains("fma_f32_zmm"));
  const double probe_cpu = j["read_probe_before_model"]["best_cpu_gbps"];
  EXPECT_GT(probe_cpu, 0.0);
  const auto& decode = j["model_run"]["decode"];
  ASSERT_EQ(decode.size(), 2u);
  const int64_t threads = j["threads"];
  EXPECT_EQ(j["model_run"]["threads"].get<int64_t>(), threads);
  for (const auto& row : decode) check_phase_table(row, threads, probe_cpu);

  r = test::run_command(cmd + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("read probe: machine limit"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("decode GEMV"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("prefill GEMM"), std::string::npos) << r.output;
  // The header of each decode row's phase table, wall and CPU columns side by side, and its rows.
  size_t tables = 0;
  for (size_t at = 0; (at = r.output.find("ms/token cpu ms/tok cpu/wall", at)) != std::string::npos; ++at) ++tables;
  EXPECT_EQ(tables, 2u) << r.output;
  EXPECT_NE(r.output.find("of probe/cpu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("moe_experts"), std::string::npos) << r.output;
}

// --attention-only: the compute probes and the CSA table (no read probe, kernel rows or model), one row per
// context. Where the CPU has the instructions the AVX-512 kernels run on (fp32 FMA for q·k and P·V,
// VPDPBUSD for the indexer), each row's arithmetic floor is recomputed here from the shapes and the probes.
TEST(KernelBenchCli, AttentionOnlyRunsJustTheAttentionSection) {
  const std::string cmd =
      test::cli_path().string() + " bench --attention-only --threads 1 --min-time 0.01 --contexts 64,4096";
  auto r = test::run_command(cmd + " --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  for (const char* skipped : {"read_probe", "decode_gemv", "decode_moe_layer", "prefill_gemm"})
    EXPECT_FALSE(j.contains(skipped)) << skipped;
  ASSERT_TRUE(j.contains("compute_probe"));
  const auto& att = j["attention"];
  ASSERT_EQ(att["contexts"].size(), 2u);
  for (const auto& row : att["contexts"]) EXPECT_GT(row["indexer_us"].get<double>(), 0.0);
  const auto& cp = j["compute_probe"];
  const std::string isa = j["isa"];
  const bool floors = cp["fma_f32_zmm"]["supported"].get<bool>() && cp["vpdpbusd_zmm"]["supported"].get<bool>() &&
                      (isa == "avx512" || isa == "avx512bf16" || isa == "amx");
  ASSERT_EQ(att.contains("floor"), floors) << isa;
  if (floors) {
    const double fma = att["floor"]["core_gflops"], dots = att["floor"]["indexer_gops"];
    EXPECT_EQ(fma, cp["fma_f32_zmm"]["threads_gflops"].get<double>());
    EXPECT_EQ(dots, cp["vpdpbusd_zmm"]["threads_gflops"].get<double>());
    const double H = att["n_heads"], D = att["head_dim"], window = att["window"];
    const double ih = att["index_heads"], idim = att["index_head_dim"];
    for (const auto& row : att["contexts"]) {
      const double rows = window + row["selected"].get<double>(), keys = row["compressed_entries"];
      const double core = 4 * H * D * rows / fma * 1e-3, index = 2 * ih * idim * keys / dots * 1e-3;  // µs
      EXPECT_NEAR(row["core_floor_us"].get<double>(), core, 1e-9 * core);
      EXPECT_NEAR(row["indexer_floor_us"].get<double>(), index, 1e-9 * index);
      EXPECT_NEAR(row["csa_floor_us"].get<double>(), core + index, 1e-9 * (core + index));
    }
  }
  r = test::run_command(cmd + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("attention per token, one CSA layer"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("read probe"), std::string::npos) << r.output;
  const auto ckpt_dir = test::shared_dir() / "golden" / "tiny" / "checkpoint";
  r = test::run_command(test::cli_path().string() + " bench --attention-only --model-only --model " + ckpt_dir.string() +
                        " 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bench.attention_only_and_model_only"), std::string::npos) << r.output;
}

TEST(KernelBenchCli, RejectsBadFlags) {
  auto r = test::run_command(test::cli_path().string() + " bench --isa sse9 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bench.bad_isa"), std::string::npos) << r.output;
  r = test::run_command(test::cli_path().string() + " bench --backend gpu 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bench.bad_backend"), std::string::npos) << r.output;
  r = test::run_command(test::cli_path().string() + " bench --contexts 64,,8 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bench.bad_contexts"), std::string::npos) << r.output;
  r = test::run_command(test::cli_path().string() + " bench --batches 1,0 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bench.bad_batches"), std::string::npos) << r.output;
  r = test::run_command(test::cli_path().string() + " bench --gemm-tokens 4,5000 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bench.bad_gemm_tokens"), std::string::npos) << r.output;
  r = test::run_command(test::cli_path().string() + " bench --model-only --probe-mb 1 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bench.model_only_needs_model"), std::string::npos) << r.output;
  r = test::run_command(test::cli_path().string() + " bench --model /nonexistent/dir --probe-mb 1 2>&1");
  EXPECT_NE(r.exit_code, 0);
}

// A probe or working set the machine cannot hold is refused up front with its rule (before any section
// runs), not an abort or an OOM kill mid-run: 1 TiB is beyond this test machine's MemAvailable.
TEST(KernelBenchCli, RejectsBuffersBeyondAvailableMemory) {
  const auto avail = mem_available_bytes();
  if (!avail || *avail >= (uint64_t{1} << 40) / 10 * 9) GTEST_SKIP() << "MemAvailable unknown or above 1 TiB";
  auto r = test::run_command(test::cli_path().string() + " bench --probe-mb 1048576 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bench.probe_too_large"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("read probe"), std::string::npos) << "no section may run first: " << r.output;
  r = test::run_command(test::cli_path().string() + " bench --working-set-mb 1048576 --probe-mb 8 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bench.working_set_too_large"), std::string::npos) << r.output;
}

// The probe itself reports a buffer it cannot have as a Status, not an abort: an invalid size, and a
// mapping larger than the address space the kernel will give (2^55 bytes).
TEST(KernelReadProbe, RefusesBadSizesWithAStatus) {
  auto r = kernels::run_read_probe(32, 1, nullptr);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().rule(), "read_probe.size");
  r = kernels::run_read_probe(1024, 0, nullptr);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().rule(), "read_probe.size");
  r = kernels::run_read_probe(int64_t{1} << 55, 1, nullptr, PageKind::kHuge);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().rule(), "memory.anon_map");
  // A small one works and reads what it wrote.
  r = kernels::run_read_probe(1 << 20, 2, nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 1 << 20);
  EXPECT_GT(r->best_gbps, 0.0);
}

}  // namespace
}  // namespace dsv4
