#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer harnesses of the host's parsers (tests/fuzz/,
# CMake option ALTGRAD_FUZZ, clang with ASan + UBSan) into build-fuzz/, then,
# for each harness:
#   1. regression: every file of its committed corpus tests/fuzz/<harness>/ run
#      once (a fixed finding stays fixed);
#   2. fuzzing for SECONDS_PER_HARNESS (default 30), starting from that corpus.
# New corpus entries go to a scratch folder, never into the repository. A
# crash, sanitizer report, uncaught exception, broken property, hang (-timeout)
# or memory blow-up (-rss_limit_mb) fails the script; the input that caused it
# is kept in build-fuzz/findings/<harness>/ (add it to the corpus with the fix).
#
#   scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]    (default: all harnesses)
# scripts/test.sh runs it with a short bound.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
shift || true
# Debug: assertions stay on (the fuzz flags set -O1).
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DALTGRAD_FUZZ=ON -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j "$(nproc)"

harnesses=("$@")
if ((${#harnesses[@]} == 0)); then
  for dir in tests/fuzz/*/; do harnesses+=("$(basename "$dir")"); done
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"  # the manifest harness's scratch folder goes there too
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# -timeout: one input taking longer is a hang (generous: a loaded machine
# once took 13 s for an input that runs in 0.1 s); -rss_limit_mb: a blow-up.
limits=(-timeout=30 -rss_limit_mb=2048)
failed=()
for h in "${harnesses[@]}"; do
  fuzzer="build-fuzz/fuzz_$h"
  corpus="tests/fuzz/$h"
  findings="build-fuzz/findings/$h"
  mkdir -p "$scratch/$h" "$findings"
  if ! "$fuzzer" "${limits[@]}" -artifact_prefix="$findings/" "$corpus"/* >"$scratch/$h.regression.log" 2>&1; then
    tail -n 40 "$scratch/$h.regression.log"
    echo "fuzz: $h: a committed corpus file fails (regression; inputs in $findings/)"
    failed+=("$h")
    continue
  fi
  if ! "$fuzzer" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$findings/" \
      "$scratch/$h" "$corpus" >"$scratch/$h.log" 2>&1; then
    tail -n 60 "$scratch/$h.log"
    echo "fuzz: $h: FINDING (the input is in $findings/)"
    failed+=("$h")
    continue
  fi
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$h.log")"
  echo "fuzz: $h: $(ls "$corpus" | wc -l) corpus files pass; $runs executions in ${seconds} s, no finding"
done
if ((${#failed[@]})); then
  echo "fuzz: findings in: ${failed[*]}"
  exit 1
fi
