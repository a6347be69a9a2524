#!/usr/bin/env bash
# Configures and builds AltGrad (Release) into build/: build/altgrad-host and
# build/plugins/<name>/ (manifest + library) for every bundled plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
