#!/usr/bin/env bash
# SIGINT and SIGTERM stop a real short run after the current step: exit 130,
# summary.json with status "interrupted", a checkpoint at the step it stopped
# at; `run --resume` then finishes it with exactly the metrics of the same run
# never interrupted (compared as scripts/soak.sh does, floats exact).
# Trial 1 signals `run` alone (it passes the signal on to its training
# process); trial 2 its whole process group, as a terminal's Ctrl-C or a
# scheduler does, so the training process gets the signal twice.
# Usage: interrupt_resume.sh HOST PLUGINS SOURCE_DIR WORK
set -euo pipefail
host="$1" plugins="$2" src="$3" work="$4"
rm -rf "$work"
mkdir -p "$work"
comparable() { /usr/bin/python3 "$src/scripts/comparable_metrics.py" "$1"; }
# e5m2_short shrunk as in scripts/soak.sh; 200 steps leave time to signal.
config="$src/configs/e5m2_short.toml"
shrink=(--set model.n_layer=2 --set model.n_embd=32 --set model.n_head=2 --set model.block_size=32
        --set training.batch_size=4 --set training.max_steps=200 --set training.warmup_steps=10
        --set training.eval_interval=10 --set training.eval_batches=2 --set quantization.diagnostic_interval=10
        --set output.checkpoint_interval=50 --set output.keep_checkpoints=2)
fail() { echo "interrupt_resume: $*" >&2; exit 1; }

"$host" --plugins "$plugins" run "$config" "${shrink[@]}" --out "$work/whole" > "$work/whole.log" 2>&1 ||
  fail "the uninterrupted run failed: $(tail -1 "$work/whole.log")"
comparable "$work/whole/metrics.jsonl" > "$work/whole.txt"

for trial in 1 2; do
  dir="$work/cut$trial"
  setsid "$host" --plugins "$plugins" run "$config" "${shrink[@]}" --out "$dir" > "$dir.log" 2>&1 &
  pid=$!
  # The first metrics line: training has started.
  while kill -0 "$pid" 2>/dev/null && ! [ -s "$dir/metrics.jsonl" ]; do sleep 0.01; done
  if [ "$trial" -eq 1 ]; then kill -INT "$pid"; signal=SIGINT; else kill -TERM -- "-$pid"; signal=SIGTERM; fi
  rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || fail "trial $trial: $signal: exit $rc, expected 130 ($(tail -1 "$dir.log"))"
  grep -q "altgrad-host: $signal: stopped after step" "$dir.log" || fail "trial $trial: no stop line in $dir.log"
  # summary.json: interrupted, part of the steps, and a checkpoint at exactly that step.
  steps=$(/usr/bin/python3 - "$dir/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["status"] == "interrupted", s["status"]
assert 0 < s["steps_done"] < s["max_steps"] == 200, (s["steps_done"], s["max_steps"])
assert s["failure_mode"] == "none", s["failure_mode"]
print(s["steps_done"])
PY
) || fail "trial $trial: summary.json is wrong"
  [ -f "$dir/checkpoints/step_$(printf '%07d' "$steps")/state.json" ] ||
    fail "trial $trial: no checkpoint at step $steps: $(ls "$dir/checkpoints")"
  "$host" --plugins "$plugins" run --resume "$dir" > "$dir.resume.log" 2>&1 ||
    fail "trial $trial: the resume failed: $(tail -1 "$dir.resume.log")"
  grep -q '"status": *"finished"' "$dir/summary.json" || fail "trial $trial: the resumed run did not finish"
  comparable "$dir/metrics.jsonl" | cmp -s - "$work/whole.txt" ||
    fail "trial $trial: metrics differ from the uninterrupted run's: $(comparable "$dir/metrics.jsonl" | diff "$work/whole.txt" - | head -3)"
  echo "trial $trial: $signal after step $steps: exit 130, summary interrupted, checkpoint, resumed: metrics identical"
done
