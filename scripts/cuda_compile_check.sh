#!/usr/bin/env bash
# CUDA stays compiled: configures AltGrad with ALTGRAD_CUDA=ON into build-cuda/
# and compiles and links, with nvcc, the CUDA build of one format plugin (e5m2:
# exmy_format's kernel, cuda_kernels.cuh's quantize, encode and decode kernels,
# the adapter's device path), the block-scaled kernels instantiated for MXFP8
# and NVFP4 (tests/cuda/device_recipes.cu: the block-scaled and amax kernels)
# and the CUDA test binary of the plugins (tests/cuda/), so that GPU code
# cannot rot unseen on machines without a GPU. Nothing is run: that needs a
# GPU (scripts/gpu_check.sh). scripts/test.sh runs this; docs/cuda.md.
#
# nvcc is $CUDACXX, else nvcc on PATH, else $CUDA_HOME/bin/nvcc (find_nvcc.sh; CUDA_HOME
# defaults to /usr/local/cuda, where the machines this project is built and
# tested on, CI's included, have CUDA 13's). Where there is none the check is
# SKIPPED, saying where it looked (exit 0); a CUDACXX that names no program is
# an error. ALTGRAD_SKIP_CUDA=1 skips it knowingly.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${ALTGRAD_SKIP_CUDA:-0}" == 1 ]]; then
  echo "cuda_compile_check: SKIPPED (ALTGRAD_SKIP_CUDA=1): the CUDA build was not compiled"
  exit 0
fi
source scripts/find_nvcc.sh
found=0
find_nvcc || found=$?
case $found in
  1) echo "cuda_compile_check: SKIPPED: no nvcc on PATH or at $nvcc (CUDACXX unset): the CUDA build" \
       "was not compiled; install the CUDA toolkit to check it"
     exit 0 ;;
  2) echo "cuda_compile_check: FAILED: CUDACXX=$CUDACXX is no program" >&2; exit 1 ;;
esac
echo "cuda_compile_check: $("$nvcc" --version | tail -1)"
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DALTGRAD_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DALTGRAD_BUILD_BENCHMARKS=OFF >/dev/null
# altgrad_cuda_tests/fast: the test binary alone (compiled and linked), without
# the other eleven plugins it is declared to need at run time.
cmake --build build-cuda -j "$(nproc)" --target altgrad_plugin_e5m2 altgrad_cuda_device_recipes
cmake --build build-cuda -j "$(nproc)" --target altgrad_cuda_tests/fast
lib=build-cuda/plugins/e5m2/libaltgrad_e5m2.so
recipes=build-cuda/tests/cuda/libaltgrad_cuda_device_recipes.a
# The plugin and the recipes must carry device code (a fatbinary) and the test binary must exist.
fatbin_bytes() { objdump -h "$1" | awk '$2 == ".nv_fatbin" { print $3 }' | head -1; }
for built in "$lib" "$recipes"; do
  if [[ -z "$(fatbin_bytes "$built")" ]]; then
    echo "cuda_compile_check: FAILED: $built has no .nv_fatbin section (no device code compiled)" >&2
    exit 1
  fi
done
[[ -x build-cuda/altgrad_cuda_tests ]] || { echo "cuda_compile_check: FAILED: no build-cuda/altgrad_cuda_tests" >&2; exit 1; }
echo "cuda_compile_check: ok: $lib ($((16#$(fatbin_bytes "$lib"))) bytes of device code)," \
  "$recipes ($((16#$(fatbin_bytes "$recipes"))) bytes) and build-cuda/altgrad_cuda_tests compiled and linked" \
  "(not run: no GPU here; scripts/gpu_check.sh runs them on one)"
