// tests/model: `dsv4 logits` and `dsv4 generate` on the tiny golden model — the acceptance interface:
// output shapes, decode/chunked agreement through the CLI, golden-layout intermediates, teacher mode.
#include <gtest/gtest.h>

#include <algorithm>

#include "golden_metrics.h"
#include "io/npy.h"
#include "test_util.h"

namespace dsv4::test {
namespace {

std::string q(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

TEST(LogitsCli, PrefillDecodeChunkDumpAndTeacher) {
  const auto gdir = shared_dir() / "golden/tiny";
  auto toks = read_npy(gdir / "golden/tokens.npy");
  ASSERT_TRUE(toks.is_ok());
  TempDir tmp;
  std::string ids;
  auto all = toks->to_i64();
  all.resize(80);  // a shorter run keeps the test quick; still crosses window, r=4/8 blocks
  for (int64_t v : all) ids += std::to_string(v) + " ";
  write_text_file(tmp / "ids.txt", ids);
  // --isa avx512 (or the best below it): without AMX every output is one fixed sequence of operations
  // whatever the number of rows, so decode and chunks must reproduce the one-shot prefill exactly.
  const std::string base = q(cli_path()) + " logits --model " + q(gdir / "checkpoint") + " --ids " + q(tmp / "ids.txt") +
                           " --isa avx512 --threads 2";

  auto r = run_command(base + " --out " + q(tmp / "p.npy") + " --mtp-out " + q(tmp / "m.npy") +
                       " --dump-intermediates " + q(tmp / "dump"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(base + " --out " + q(tmp / "d.npy") + " --prefill 37");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(base + " --out " + q(tmp / "c.npy") + " --chunk 7");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto p = read_npy(tmp / "p.npy"), d = read_npy(tmp / "d.npy"), c = read_npy(tmp / "c.npy"), m = read_npy(tmp / "m.npy");
  ASSERT_TRUE(p.is_ok() && d.is_ok() && c.is_ok() && m.is_ok());
  EXPECT_EQ(p->shape, (std::vector<uint64_t>{80, 1024}));
  EXPECT_EQ(m->shape, (std::vector<uint64_t>{79, 1024}));
  EXPECT_EQ(p->descr, "<f4");
  EXPECT_EQ(d->bytes, p->bytes);  // the engine's decode and chunked paths reproduce its prefill exactly
  EXPECT_EQ(c->bytes, p->bytes);

  // Every golden intermediate name exists with the golden's shape (for n = 80 instead of 300).
  for (const auto& e : std::filesystem::directory_iterator(gdir / "golden/intermediates")) {
    auto g = read_npy(e.path());
    auto ours = read_npy(tmp / "dump" / e.path().filename());
    ASSERT_TRUE(g.is_ok());
    ASSERT_TRUE(ours.is_ok()) << "missing " << e.path().filename();
    auto want = g->shape;
    want[0] = 80;
    EXPECT_EQ(ours->shape, want) << e.path().filename();
    EXPECT_EQ(ours->descr.substr(1), g->descr.substr(1)) << e.path().filename();
  }

  // Teacher mode on the full golden token list: head logits on golden streams match the reference.
  std::string all_ids;
  for (int64_t v : toks->to_i64()) all_ids += std::to_string(v) + "\n";
  write_text_file(tmp / "all.txt", all_ids);
  r = run_command(q(cli_path()) + " logits --model " + q(gdir / "checkpoint") + " --ids " + q(tmp / "all.txt") +
                  " --teacher " + q(gdir / "golden") + " --out " + q(tmp / "t.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto t = read_npy(tmp / "t.npy");
  auto gl = read_npy(gdir / "golden/prefill_logits.npy");
  ASSERT_TRUE(t.is_ok() && gl.is_ok());
  const auto s = compare_logits(t->to_f32(), gl->to_f32(), 1024, 300);
  EXPECT_EQ(s.top1, 1.0);
  EXPECT_LE(s.max_abs, 0.02);
}

TEST(LogitsCli, BadInputs) {
  const auto ck = shared_dir() / "golden/tiny/checkpoint";
  TempDir tmp;
  write_text_file(tmp / "bad.txt", "0 5 99999");
  auto r = run_command(q(cli_path()) + " logits --model " + q(ck) + " --ids " + q(tmp / "bad.txt") + " --out " + q(tmp / "o.npy"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("model.token_range"), std::string::npos) << r.output;
  write_text_file(tmp / "junk.txt", "0 5 x7");
  r = run_command(q(cli_path()) + " logits --model " + q(ck) + " --ids " + q(tmp / "junk.txt") + " --out " + q(tmp / "o.npy"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("model.token_ids"), std::string::npos) << r.output;
  r = run_command(q(cli_path()) + " logits --model " + q(ck) + " --out " + q(tmp / "o.npy"));
  EXPECT_NE(r.exit_code, 0);
  // A bad model flag is one line naming the flag and its choices, before anything loads.
  r = run_command(q(cli_path()) + " generate --prompt-ids 0 -n 1 --model " + q(ck) + " --weights bogus");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("[cli.weights]: --weights must be mmap, copy or auto, got 'bogus'"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(GenerateCli, GreedyIsDeterministicAndFollowsTheLogits) {
  const auto ck = shared_dir() / "golden/tiny/checkpoint";
  const std::string cmd = q(cli_path()) + " generate --model " + q(ck) + " --prompt-ids 0,5,77,300 -n 4 --ignore-eos";
  auto a = run_command(cmd), b = run_command(cmd);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  // The first generated id is the argmax of `dsv4 logits` at the prompt's last position.
  TempDir tmp;
  write_text_file(tmp / "ids.txt", "0 5 77 300");
  auto r = run_command(q(cli_path()) + " logits --model " + q(ck) + " --ids " + q(tmp / "ids.txt") + " --out " + q(tmp / "o.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto o = read_npy(tmp / "o.npy");
  ASSERT_TRUE(o.is_ok());
  const auto v = o->to_f32();
  const auto last = v.begin() + 3 * 1024;
  const auto best = std::max_element(last, last + 1024) - last;
  EXPECT_EQ(a.output.substr(0, a.output.find(' ')), std::to_string(best));
  auto s = run_command(q(cli_path()) + " generate --model " + q(ck) + " --prompt-ids 0,5 -n 3 --temperature 0.8 --seed 1");
  EXPECT_EQ(s.exit_code, 0) << s.output;
}

}  // namespace
}  // namespace dsv4::test
