#!/usr/bin/env bash
# What the diagnostics cost: the same 200-step E5M2 run (configs/e5m2_short.toml, one thread, the
# default diagnostic interval of 50) with no diagnostic plugin and with all eight bundled ones,
# alternated `repeats` times in one go; prints the median seconds of each and their ratio.
#   benchmarks/diagnostics_cost.sh [repeats]     (default 3; needs build/ from scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-3}"
all="range,stiffness,grid_alignment,bit_stall,ulp,grad_stiffness,kurtosis,attention_entropy"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seconds() {  # the run's own wall time, from its summary.json
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$1/summary.json"
}
off=(); on=()
for k in $(seq "$repeats"); do
  for mode in off on; do
    extra=()
    [ "$mode" = on ] && extra=(--set "diagnostics.plugins=$all")
    build/altgrad-host --plugins build/plugins run configs/e5m2_short.toml --out "$tmp/$mode-$k" \
      --set training.max_steps=200 --set training.eval_interval=1000 --set training.threads=1 "${extra[@]}" > /dev/null
    s=$(seconds "$tmp/$mode-$k")
    if [ "$mode" = on ]; then on+=("$s"); else off+=("$s"); fi
  done
done
python3 - "${off[*]}" "${on[*]}" <<'PY'
import statistics, sys
off = [float(x) for x in sys.argv[1].split()]
on = [float(x) for x in sys.argv[2].split()]
m_off, m_on = statistics.median(off), statistics.median(on)
print(f"diagnostics off: median {m_off:.2f} s  {off}")
print(f"all 8 diagnostics at interval 50: median {m_on:.2f} s  {on}")
print(f"ratio on/off: {m_on / m_off:.3f}  (target <= 1.3)")
PY
