#!/usr/bin/env bash
# scripts/cuda_compile_check.sh where there is no nvcc (issue #32): skipped with
# a printed reason and exit 0, so scripts/test.sh goes on; a CUDACXX that names
# no program is an error, exit 1. Nothing is compiled in either case.
# Usage: cuda_compile_check_test.sh SOURCE_DIR
set -uo pipefail
script="$1/scripts/cuda_compile_check.sh"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
ln -s "$(command -v dirname)" "$bin/dirname"  # the script's only command before it looks for nvcc
failed=0
check() {  # WHAT EXPECTED_RC EXPECTED_TEXT RC OUTPUT
  if [[ "$4" != "$2" || "$5" != *"$3"* ]]; then
    echo "FAIL: $1: exit $4, output: $5 (expected exit $2 and '$3')"
    failed=1
  else
    echo "ok: $1: $5"
  fi
}
out="$(env -u CUDACXX PATH="$bin" CUDA_HOME=/nonexistent-cuda /bin/bash "$script" 2>&1)"
check "no nvcc on PATH or in CUDA_HOME" 0 "SKIPPED: no nvcc on PATH or at /nonexistent-cuda/bin/nvcc" $? "$out"
out="$(CUDACXX=/nonexistent-cuda/nvcc /bin/bash "$script" 2>&1)"
check "CUDACXX naming no program" 1 "FAILED: CUDACXX=/nonexistent-cuda/nvcc is no program" $? "$out"
out="$(ALTGRAD_SKIP_CUDA=1 CUDACXX=/nonexistent-cuda/nvcc /bin/bash "$script" 2>&1)"
check "ALTGRAD_SKIP_CUDA=1" 0 "SKIPPED (ALTGRAD_SKIP_CUDA=1)" $? "$out"
exit $failed
