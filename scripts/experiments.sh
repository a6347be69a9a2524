#!/usr/bin/env bash
# The seed experiments (issue 6), on the CPU, then the report over all of them:
#   scripts/experiments.sh [OUT_DIR]        (default docs/results)
# Runs every config at 500 steps: bf16_baseline, e5m2_short and e3m4_uniform with seeds 42, 1 and 2;
# e4m3_uniform, e1m6_uniform, e1m6_postln, e0m7_uniform, e7m0_uniform and e7m0_mantissa_shift with
# seed 42; the range and stiffness diagnostics on in every run (they measure, they do not change
# training). Two runs at a time, one thread each. About 10 minutes on a 2-core machine (it prints
# the time it took). Runs go to OUT_DIR/runs/, the report to OUT_DIR/report.md with OUT_DIR/figures/.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/results}"
[ -x build/altgrad-host ] || scripts/build.sh
rm -rf "$out/runs"
mkdir -p "$out/runs"
start=$(date +%s)
jobs_file=$(mktemp)
for seed in 42 1 2; do
  for config in bf16_baseline e5m2_short e3m4_uniform; do echo "$config $seed"; done
done >> "$jobs_file"
for config in e4m3_uniform e1m6_uniform e1m6_postln e0m7_uniform e7m0_uniform e7m0_mantissa_shift; do
  echo "$config 42"
done >> "$jobs_file"
run_one() {
  local config=$1 seed=$2 out=$3
  build/altgrad-host --plugins build/plugins run "configs/$config.toml" --out "$out/runs/$config-s$seed" \
    --set training.seed="$seed" --set training.threads=1 --set diagnostics.plugins=range,stiffness \
    > "$out/runs/$config-s$seed.log" 2>&1 || true   # a collapsed run exits 3: that is a result, not an error
  tail -n 4 "$out/runs/$config-s$seed.log" | head -n 1
}
export -f run_one
xargs -P 2 -L 1 bash -c 'run_one "$0" "$1" "'"$out"'"' < "$jobs_file"
rm -f "$jobs_file"
build/altgrad-host report "$out"/runs/*/ -o "$out"
echo "experiments and report: $(( $(date +%s) - start )) s; report: $out/report.md"
