#!/usr/bin/env bash
# The tests that compute with OpenBLAS or ATen in their own process (CTest
# label `kernels`), run again with each CPU kernel this machine can run forced:
# OpenBLAS's core types Haswell, Zen and SkylakeX (AVX-512) and ATen's
# capabilities default, avx2 and avx512 (AVX-512), each at least once, so a
# test that holds only on one CPU's kernels fails here, on any machine
# (issue #44; docs/reliability.md, "The same tests on every CPU").
#
# Every other test runs in processes that load neither library (the plugins,
# the config, the report) or that pin them (altgrad-host run re-executes itself
# with OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2; util/cpu_kernels.hpp).
# So that no test escapes the label, this script first refuses, naming it, any
# test whose program links LibTorch or a BLAS, or whose Python or shell source
# imports numpy, torch, pandas or altgrad, without the label.
#
# Usage: scripts/kernel_matrix.sh [BUILD_DIR]   (after scripts/build.sh; build/ by default)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"

/usr/bin/python3 - "$build" <<'EOF'
import json, os, re, subprocess, sys
build = sys.argv[1]
tests = json.loads(subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                                  capture_output=True, text=True).stdout)["tests"]
uses = re.compile(r"^\s*(import|from)\s+(numpy|torch|pandas|altgrad)\b|python3?\b.*(pandas|numpy|torch|altgrad)",
                  re.M)

def sources(command):
    # The files a test's command runs: Python and shell scripts, and the .py files of pytest's folder.
    for arg in command:
        if os.path.isdir(arg) and "pytest" in command:
            for root, _, files in os.walk(arg):
                yield from (os.path.join(root, f) for f in files if f.endswith(".py"))
        elif arg.endswith((".py", ".sh")) and os.path.isfile(arg):
            yield arg

def computes(command):
    program = command[0]
    # altgrad-host links LibTorch, but only its training commands compute with it, and those pin the
    # kernels (they re-execute themselves with the pin: util/cpu_kernels.hpp).
    if os.path.basename(program) == "altgrad-host":
        return None
    if os.path.isfile(program) and open(program, "rb").read(4) == b"\x7fELF":
        ldd = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
        if re.search(r"libtorch|libc10|libblas|openblas", ldd):
            return f"{os.path.basename(program)} links LibTorch or a BLAS"
    for source in sources(command):
        if uses.search(open(source, errors="replace").read()):
            return f"{source} uses numpy, torch, pandas or altgrad"
    return None

unlabelled = []
for t in tests:
    labels = next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
    why = computes(t.get("command") or [""])
    if why and "kernels" not in labels:
        unlabelled.append(f"{t['name']}: {why}")
if unlabelled:
    print("kernel_matrix: these tests compute with OpenBLAS or ATen but lack the CTest label 'kernels':",
          *unlabelled, sep="\n  ", file=sys.stderr)
    sys.exit(1)
EOF

flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $flags " == *" $1 "* ]]; }
if ! { has avx2 && has fma; }; then
  echo "kernel_matrix: this CPU has no AVX2 and FMA: only its own kernels can run; CTest ran with them"
  exit 0
fi
cores=(Haswell Zen)
capabilities=(default avx2)
if has avx512f; then cores+=(SkylakeX); fi
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then capabilities+=(avx512); fi
n=$(( ${#cores[@]} > ${#capabilities[@]} ? ${#cores[@]} : ${#capabilities[@]} ))
for ((i = 0; i < n; i++)); do
  core=${cores[i % ${#cores[@]}]} capability=${capabilities[i % ${#capabilities[@]}]}
  echo "kernel_matrix: OPENBLAS_CORETYPE=$core ATEN_CPU_CAPABILITY=$capability"
  OPENBLAS_CORETYPE=$core ATEN_CPU_CAPABILITY=$capability \
    ctest --test-dir "$build" -L kernels --output-on-failure -j "$(nproc)"
done
