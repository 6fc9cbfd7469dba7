#!/usr/bin/env bash
# The whole test suite from a fresh machine: dependencies, the dev build with every test label, then the
# ASan+UBSan build of the unit tests. Exit status is non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

scripts/install-deps.sh

echo "== dev build"
cmake --preset dev >/dev/null
cmake --build --preset dev -j "$JOBS"
echo "== tests (dev build)"
ctest --preset dev -j "$JOBS" --timeout 1500

echo "== sanitizer build (ASan + UBSan): unit tests"
cmake --preset asan >/dev/null
# Only what the sanitizer run executes: the unit suite and the fuzz corpus replayer (the other suites drive
# the same libraries through the CLI and would only add build minutes here).
cmake --build --preset asan -j "$JOBS" --target dsv4_unit_tests dsv4_fuzz_replay
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --preset asan -j "$JOBS" -L unit --timeout 1500
echo "== all tests passed"
