#!/usr/bin/env bash
# The sanitizer build: the SDK, the plugins, the host without the LibTorch
# trainer and their tests, built with AddressSanitizer and
# UndefinedBehaviorSanitizer (CMake option ALTGRAD_SANITIZE) into build-asan/,
# then every test registered there run through CTest. Any ASan report, leak
# (LeakSanitizer) or undefined behaviour fails the test it happens in.
# scripts/test.sh runs this after the normal suite.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DALTGRAD_SANITIZE=ON
cmake --build build-asan -j "$(nproc)"
# halt_on_error / abort: a finding ends the process with a non-zero status.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
