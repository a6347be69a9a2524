#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with apt) before using a GPU machine that has
# no package registry: downloads the Debian packages it lacks (Boost, TOML++,
# GoogleTest, Google Benchmark, the fortunes corpus) into .device/debs/, an
# ignored folder the device tool can carry. scripts/gpu_check.sh unpacks them
# there into a prefix of their own. Idempotent: files already there stay.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  libtomlplusplus-dev libtomlplusplus3
  libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  libgtest-dev libbenchmark-dev libbenchmark1debian
  fortunes fortunes-min
)
mkdir -p .device/debs
cd .device/debs
missing=()
for p in "${packages[@]}"; do
  compgen -G "${p}_*.deb" > /dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get download "${missing[@]}"
fi
ls -1 ./*.deb | wc -l | xargs echo "gpu_prepare: debs in .device/debs:"
du -sh . | cut -f1 | xargs echo "gpu_prepare: size"
