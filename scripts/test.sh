#!/usr/bin/env bash
# Set up, build, compile the CUDA build of a plugin and the CUDA tests
# (scripts/cuda_compile_check.sh: skipped, saying so, where there is no nvcc),
# and run the whole test suite through CTest, and again its tests that compute
# with OpenBLAS or ATen under each CPU kernel forced (scripts/kernel_matrix.sh); then a few
# trials of the kill -9 soak (scripts/soak.sh), the sanitizer build (ASan +
# UBSan, no trainer) and its tests (scripts/sanitize.sh), and the fuzzing
# harnesses, 30 s each after their corpus (scripts/fuzz.sh); last, the demo timed
# in a fresh clone with ccache off (scripts/demo_timing.sh, a measurement for
# issue #32's target; ALTGRAD_SKIP_DEMO_TIMING=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/cuda_compile_check.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
scripts/kernel_matrix.sh
scripts/soak.sh 4
scripts/sanitize.sh
scripts/fuzz.sh 30
[ "${ALTGRAD_SKIP_DEMO_TIMING:-0}" = 1 ] || scripts/demo_timing.sh
