#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with apt and nvcc) before using a GPU machine
# (the device tool's), which has no package registry and whose time is scarce:
#  1. downloads the Debian packages the GPU machine lacks (Boost, TOML++,
#     nlohmann-json, the fortunes corpus, Google Benchmark's library) into
#     .device/debs/;
#  2. builds with nvcc, into build-gpuprep/, what does not need LibTorch: every
#     bundled plugin (CUDA kernels for sm_90 and PTX), the CUDA test binaries
#     (the plugins on GPU buffers; block-scaled quantize with its scales derived
#     on the GPU) and the quantize benchmark, and packs them into
#     .device/prebuilt.tar.xz (a few MB: the plugins share most of their bytes).
# .device/ is ignored; the device tool carries it. scripts/gpu_check.sh then
# builds only the host there, against the machine's CUDA LibTorch.
# Idempotent: debs already there stay; the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  libtomlplusplus-dev libtomlplusplus3
  libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  libgtest-dev libbenchmark-dev libbenchmark1debian
  nlohmann-json3-dev
  fortunes fortunes-min
)
mkdir -p .device/debs
(
  cd .device/debs
  missing=()
  for p in "${packages[@]}"; do
    compgen -G "${p}_*.deb" > /dev/null || missing+=("$p")
  done
  if ((${#missing[@]})); then
    apt-get update -qq
    apt-get download "${missing[@]}"
  fi
)
echo "gpu_prepare: $(ls -1 .device/debs/*.deb | wc -l) debs in .device/debs ($(du -sh .device/debs | cut -f1))"

source scripts/find_nvcc.sh
find_nvcc || { echo "gpu_prepare: no nvcc (CUDACXX, PATH, CUDA_HOME/bin: $nvcc)" >&2; exit 1; }
cmake -S . -B build-gpuprep -DCMAKE_BUILD_TYPE=Release -DALTGRAD_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" > /dev/null
cmake --build build-gpuprep -j "$(nproc)" --target altgrad_plugins altgrad_cuda_tests altgrad_cuda_block_tests \
  altgrad_quantize_bench
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/prebuilt"
cp -r build-gpuprep/plugins build-gpuprep/altgrad_cuda_tests build-gpuprep/altgrad_cuda_block_tests \
  build-gpuprep/altgrad_quantize_bench "$stage/prebuilt/"
# The test binaries look for the plugins at the path compiled into them.
echo "$PWD/build-gpuprep/plugins" > "$stage/prebuilt/plugin_dir.txt"
git rev-parse --short HEAD > "$stage/prebuilt/commit.txt"
tar -C "$stage" -cJf .device/prebuilt.tar.xz prebuilt
echo "gpu_prepare: .device/prebuilt.tar.xz $(du -h .device/prebuilt.tar.xz | cut -f1) ($(cat "$stage/prebuilt/commit.txt"))"
tree_bytes="$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)"
device_bytes="$(du -cb .device | tail -1 | cut -f1)"
echo "gpu_prepare: what travels: $(( (tree_bytes + device_bytes) >> 20 )) MiB of the device tool's 64"
