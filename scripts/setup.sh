#!/usr/bin/env bash
# Installs what AltGrad needs to build and test on Debian 12, idempotently:
# packages already installed are left alone, and apt runs only when one is
# missing. Run as root (or with sudo available).
#
# OpenBLAS matters: Debian's LibTorch calls whatever libblas.so.3 the system
# selects, and the reference BLAS is ~30x slower (see ../shared/BRIEF.md).
set -euo pipefail

packages=(
  cmake g++ make                       # toolchain
  libboost-dev libboost-program-options-dev   # Boost.DLL (headers), Boost.Program_Options
  libtomlplusplus-dev                  # manifests and configs
  nlohmann-json3-dev                   # the run directory's JSON (metrics, summaries, checkpoint state)
  libgtest-dev libbenchmark-dev        # tests and benchmarks
  libtorch-dev libopenblas0-pthread    # tensors and autograd for the trainer, a fast BLAS
  libgloo-dev                          # the headers of LibTorch's c10d Gloo backend (distributed runs)
  fortunes                             # the default text corpus
  gnuplot-nox                          # report figures (the report tests draw them)
  pngquant xz-utils                    # scripts/experiments.sh: the published figures and tables, compressed
  python3                              # benchmark post-processing, the LibTorch 2.x check, tests/docs
  bsdutils                             # script(1): the run test's terminal (live progress on stderr)
  python3-pandas                       # the pandas example of docs/training.md, run as a test
  python3-dev python3-pybind11 python3-numpy python3-torch python3-pytest  # the Python package (docs/python.md)
  clang libclang-rt-14-dev             # libFuzzer and its sanitizers (scripts/fuzz.sh)
  universal-ctags clang-format         # tests/house: the function-length measure, the layout
  slurmctld slurmd slurm-client munge  # sweep --slurm's test: a private one-node cluster (tests/slurm/)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}"
else
  echo "setup: all packages present"
fi
