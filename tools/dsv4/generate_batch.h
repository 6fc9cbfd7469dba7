// tools: the batch mode of `dsv4 generate` (--batch-file), shared by `dsv4 generate-batch`.
#pragma once

namespace dsv4::cli {

// Parses the batch flags (argv[0] is the command name), runs every request of the JSONL file through the
// engine and prints their tokens, then throughput, acceptance per draft position and pool usage.
// Returns the process exit code.
int run_generate_batch(int argc, char** argv);

}  // namespace dsv4::cli
