#!/usr/bin/env bash
# Runs one libFuzzer target for SECONDS (default 180) from a scratch copy of its seed corpus; new inputs
# stay in build/fuzz/work/TARGET, crashers in build/fuzz/artifacts/TARGET. Usage: tests/fuzz/run.sh TARGET [SECONDS]
# Build first: cmake --preset fuzz && cmake --build --preset fuzz --target fuzz_TARGET
set -euo pipefail
cd "$(dirname "$0")/../.."
t=$1
secs=${2:-180}
dict=tests/fuzz/json.dict
[ "$t" = npy ] && dict=tests/fuzz/npy.dict
case $t in output_parser | tokenizer_encode) dict=tests/fuzz/dsml.dict ;; esac
mkdir -p build/fuzz/work/"$t" build/fuzz/artifacts/"$t"
exec build/fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -dict="$dict" -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/"$t"/ \
  build/fuzz/work/"$t" tests/fuzz/corpus/"$t"
