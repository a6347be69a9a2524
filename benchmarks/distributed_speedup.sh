#!/usr/bin/env bash
# Data-parallel speed-up on this machine: the same e5m2_short run at a global
# batch of 12 sequences, as one process (batch_size 12, one thread) and as 2
# ranks (run --nproc 2, batch_size 6 each, one thread each), alternated
# `repeats` times in one go; prints each arm's median tokens per second (the
# median of its steps' tokens_per_s, every rank's tokens counted) and their
# ratio (docs/distributed.md).
#   benchmarks/distributed_speedup.sh [repeats] [steps]   (default 3, 100; needs build/ from scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-3}" steps="${2:-100}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--set training.max_steps="$steps" --set training.eval_interval=100000 --set training.threads=1
        --set output.checkpoint_interval=100000)
tokens_per_s() {  # the median over the run's steps
  /usr/bin/python3 -c '
import json, statistics, sys
v = [json.loads(l)["tokens_per_s"] for l in open(sys.argv[1]) if "\"kind\":\"train\"" in l]
print(statistics.median(v))' "$1/metrics.jsonl"
}
one=(); two=()
for k in $(seq "$repeats"); do
  build/altgrad-host --plugins build/plugins run configs/e5m2_short.toml "${common[@]}" \
    --set training.batch_size=12 --out "$tmp/one-$k" > /dev/null 2>&1
  one+=("$(tokens_per_s "$tmp/one-$k")")
  build/altgrad-host --plugins build/plugins run configs/e5m2_short.toml "${common[@]}" \
    --set training.batch_size=6 --nproc 2 --out "$tmp/two-$k" > /dev/null 2>&1
  two+=("$(tokens_per_s "$tmp/two-$k")")
done
/usr/bin/python3 - "${one[*]}" "${two[*]}" <<'PY'
import statistics, sys
one = [float(x) for x in sys.argv[1].split()]
two = [float(x) for x in sys.argv[2].split()]
m1, m2 = statistics.median(one), statistics.median(two)
print(f"1 process x 1 thread, batch 12: median {m1:.0f} tokens/s  {[round(x) for x in one]}")
print(f"2 ranks x 1 thread, batch 6 each: median {m2:.0f} tokens/s  {[round(x) for x in two]}")
print(f"ratio 2 ranks / 1 process: {m2 / m1:.2f}  (target >= 1.7)")
PY
