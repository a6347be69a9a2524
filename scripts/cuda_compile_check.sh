#!/usr/bin/env bash
# CUDA stays compiled: configures AltGrad with ALTGRAD_CUDA=ON into build-cuda/
# and compiles and links, with nvcc, the CUDA build of one format plugin (e5m2:
# exmy_format's kernel, cuda_kernels.cuh's quantize, encode and decode kernels,
# the adapter's device path) and of random_hadamard (hadamard_cuda.cuh), the block-scaled kernels instantiated for MXFP8
# and NVFP4 (tests/cuda/device_recipes.cu: the block-scaled and amax kernels)
# and the CUDA test binary of the plugins (tests/cuda/), and the trainer's
# NCCL path (syntax only), so that GPU code cannot rot unseen on machines
# without a GPU. Nothing is run: that needs a
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
cmake --build build-cuda -j "$(nproc)" --target altgrad_plugin_e5m2 altgrad_plugin_random_hadamard \
  altgrad_cuda_device_recipes
cmake --build build-cuda -j "$(nproc)" --target altgrad_cuda_tests/fast
lib=build-cuda/plugins/e5m2/libaltgrad_e5m2.so
rht=build-cuda/plugins/random_hadamard/libaltgrad_random_hadamard.so
recipes=build-cuda/tests/cuda/libaltgrad_cuda_device_recipes.a
# The plugin and the recipes must carry device code (a fatbinary) and the test binary must exist.
fatbin_bytes() { objdump -h "$1" | awk '$2 == ".nv_fatbin" { print $3 }' | head -1; }
for built in "$lib" "$rht" "$recipes"; do
  if [[ -z "$(fatbin_bytes "$built")" ]]; then
    echo "cuda_compile_check: FAILED: $built has no .nv_fatbin section (no device code compiled)" >&2
    exit 1
  fi
done
[[ -x build-cuda/altgrad_cuda_tests ]] || { echo "cuda_compile_check: FAILED: no build-cuda/altgrad_cuda_tests" >&2; exit 1; }
echo "cuda_compile_check: ok: $lib ($((16#$(fatbin_bytes "$lib"))) bytes of device code)," \
  "$rht ($((16#$(fatbin_bytes "$rht"))) bytes)," \
  "$recipes ($((16#$(fatbin_bytes "$recipes"))) bytes) and build-cuda/altgrad_cuda_tests compiled and linked" \
  "(not run: no GPU here; scripts/gpu_check.sh runs them on one)"

# The trainer's NCCL path (host/src/train/distributed.cpp under USE_C10D_NCCL, which a build
# against a LibTorch with CUDA defines: host/CMakeLists.txt): syntax only, with the default
# build's compile command for it, this machine's LibTorch headers and CUDA's nccl.h. Debian's
# LibTorch, built for the CPU, lacks one header its CUDA build generates
# (c10/cuda/impl/cuda_cmake_macros.h); a stand-in defines its one macro.
commands=${ALTGRAD_BUILD_DIR:-build}/compile_commands.json
cuda_include="$(cd "$(dirname "$(command -v "$nvcc")")/../include" 2>/dev/null && pwd || echo /nonexistent)"
if [[ ! -f "$commands" ]]; then
  echo "cuda_compile_check: nccl: SKIPPED: no $commands (build first: scripts/build.sh)"
elif [[ ! -f "$cuda_include/nccl.h" ]]; then
  echo "cuda_compile_check: nccl: SKIPPED: no nccl.h in $cuda_include"
else
  stub="$PWD/build-cuda/nccl-stub"
  mkdir -p "$stub/c10/cuda/impl"
  printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$stub/c10/cuda/impl/cuda_cmake_macros.h"
  /usr/bin/python3 - "$commands" "$stub" "$cuda_include" <<'PY'
import json, shlex, subprocess, sys
commands, stub, cuda_include = sys.argv[1:4]
entry = next((e for e in json.load(open(commands)) if e["file"].endswith("host/src/train/distributed.cpp")), None)
if entry is None:
    sys.exit("cuda_compile_check: nccl: FAILED: no compile command for train/distributed.cpp in " + commands)
args, out, skip = shlex.split(entry["command"]), [], False
for i, a in enumerate(args[1:], 1):
    if skip:
        skip = False
    elif a in ("-o", "-include"):  # the object file; the precompiled header (compiled without NCCL)
        skip = True
    elif a not in ("-c", "-Winvalid-pch"):
        out.append(a)
cmd = [args[0], "-fsyntax-only", "-DUSE_C10D_NCCL", "-I" + stub, "-I" + cuda_include] + out
r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
if r.returncode != 0:
    print(r.stderr[-4000:], file=sys.stderr)
    sys.exit("cuda_compile_check: nccl: FAILED: train/distributed.cpp with USE_C10D_NCCL does not compile")
print("cuda_compile_check: nccl: ok: train/distributed.cpp's NCCL group compiles (USE_C10D_NCCL; not run: "
      "no GPU here)")
PY
fi
