#!/usr/bin/env bash
# Configures and builds AltGrad (Release) into build/.
#
#   scripts/build.sh             everything: the host, the plugins, the tests, the benchmarks
#   scripts/build.sh TARGET...   only those targets and what they need, e.g. altgrad_product
#                                (build/altgrad-host and build/plugins/<name>/ for every
#                                bundled plugin: what scripts/demo.sh builds)
#
# ccache is used when it is installed (CMakeLists.txt; CCACHE_DISABLE=1 turns it off).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "$(nproc)" "${targets[@]}"
