#!/usr/bin/env bash
# Runs every config in configs/ and configs/recipes/ for a few steps and prints each run's losses
# (training loss per step, validation loss per evaluation) as exact hex-floats,
# one line each: "CONFIG STEP loss|val_loss HEX", then with --all every line of
# its metrics.jsonl (timing fields aside: tokens_per_s), "CONFIG LINE". Two
# builds that train alike print the same lines, so a refactoring proves it
# changed no number with:
#   scripts/loss_fingerprint.sh > before.txt   # on the old build
#   scripts/loss_fingerprint.sh > after.txt    # on the new build
#   diff before.txt after.txt
# Usage: scripts/loss_fingerprint.sh [--all] [STEPS (60)] [HOST (build/altgrad-host)] [PLUGINS (build/plugins)]
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [ "${1:-}" = "--all" ]; then all=1; shift; fi
steps="${1:-60}"
host="${2:-build/altgrad-host}"
plugins="${3:-build/plugins}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for config in configs/*.toml configs/recipes/*.toml; do
  # GPT-2 small is a GPU's workload (tests/train/gpt2_small.sh trains it at context 64).
  [ "$config" = configs/gpt2_small.toml ] && continue
  name="$(basename "$(dirname "$config")")/$(basename "$config" .toml)"
  name="${name#configs/}"
  mkdir -p "$work/$(dirname "$name")"
  # A collapse (exit 3) is a result too; any other failure is not.
  # A warm-up longer than the steps run (separating_bf16: 100) is refused: halve the steps instead.
  warmup="$(/usr/bin/python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb")).get("training", {}).get("warmup_steps", 0))' "$config")"
  extra=()
  if [ "$warmup" -gt "$steps" ]; then extra=(--set training.warmup_steps=$((steps / 2))); fi
  rc=0
  "$host" --plugins "$plugins" run "$config" --out "$work/$name" --set training.max_steps="$steps" \
    --set training.eval_interval=20 --set output.dir="$work" "${extra[@]}" > "$work/$name.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
    echo "loss_fingerprint: $config failed (exit $rc):" >&2
    tail -5 "$work/$name.log" >&2
    exit 1
  fi
  /usr/bin/python3 - "$name" "$work/$name/metrics.jsonl" "$all" <<'PY'
import json, sys
name, path, all_lines = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
lines = [json.loads(line) for line in open(path)]
for rec in lines:
    for key in ("loss", "val_loss"):
        if key in rec:
            v = rec[key]
            print(name, rec["step"], key, "null" if v is None else float(v).hex())
if all_lines:
    for rec in lines:
        rec.pop("tokens_per_s", None)  # wall-clock timing: differs from run to run
        print(name, json.dumps(rec))
PY
done
