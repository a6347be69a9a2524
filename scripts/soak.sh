#!/usr/bin/env bash
# The kill -9 soak: a short real training run, killed with SIGKILL at a random
# moment (every other trial the moment a checkpoint is being written), then
# resumed with `run --resume`, must end with exactly the metrics of the same
# run never interrupted: every metrics.jsonl line equal (numbers compared as
# exact hex-floats), save the run id and the throughput, which are not results.
# Prints one line per trial and a summary; exits 1 on any difference or failed
# resume. scripts/test.sh runs it with a few trials.
# Usage: scripts/soak.sh [TRIALS (10)] [HOST (build/altgrad-host)] [PLUGINS (build/plugins)]
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
trials="${1:-10}"
host="${2:-build/altgrad-host}"
plugins="${3:-build/plugins}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# e5m2_short shrunk to a few seconds of training, checkpointing every 5 steps
# (keeping 2, so old ones are deleted as the run goes) and evaluating every 10.
config=configs/e5m2_short.toml
shrink=(--set model.n_layer=2 --set model.n_embd=32 --set model.n_head=2 --set model.block_size=32
        --set training.batch_size=4 --set training.max_steps=80 --set training.warmup_steps=10
        --set training.eval_interval=10 --set training.eval_batches=2 --set quantization.diagnostic_interval=10
        --set output.checkpoint_interval=5 --set output.keep_checkpoints=2)

# metrics.jsonl as comparable lines (floats exact, no run id or throughput).
comparable() { /usr/bin/python3 scripts/comparable_metrics.py "$1"; }

now() { date +%s.%N; }

# The step of the newest complete checkpoint in run directory $1 (0: none yet).
latest_step() {
  local all=("$1"/checkpoints/step_*)
  if [ "${#all[@]}" -eq 0 ]; then echo 0; return; fi
  local last="${all[${#all[@]}-1]##*step_}"
  echo $((10#$last))
}

start=$(now)
"$host" --plugins "$plugins" run "$config" "${shrink[@]}" --out "$work/whole" > "$work/whole.log" 2>&1 || {
  echo "soak: the uninterrupted run failed:" >&2
  tail -5 "$work/whole.log" >&2
  exit 1
}
whole_s=$(/usr/bin/python3 -c "print($(now) - $start)")
comparable "$work/whole/metrics.jsonl" > "$work/whole.txt"
echo "soak: uninterrupted run: $(wc -l < "$work/whole.txt") metrics lines in ${whole_s%.*} s"

failed=0
mid_checkpoint=0
for trial in $(seq 1 "$trials"); do
  dir="$work/trial$trial"
  # Its own process group (setsid execs in place here: the pid is the group's),
  # so the kill reaches a supervised child too, if `run` makes one.
  setsid "$host" --plugins "$plugins" run "$config" "${shrink[@]}" --out "$dir" > "$dir.log" 2>&1 &
  pid=$!
  if (( trial % 2 == 0 )); then
    # The first checkpoint must be complete (a resume needs one), then the
    # next being written.
    how="while a checkpoint is written"
    while kill -0 "$pid" 2>/dev/null && [ "$(latest_step "$dir")" -lt 5 ]; do sleep 0.01; done
    while kill -0 "$pid" 2>/dev/null && ! compgen -G "$dir/checkpoints/.tmp-*" > /dev/null; do :; done
  else
    # A random moment, measured in training rather than in seconds (the
    # machine's load varies): after checkpoint k of the 16, up to one
    # checkpoint interval more.
    k=$((RANDOM % 14 + 1))
    delay=$(/usr/bin/python3 -c "import random; print(random.uniform(0, $whole_s / 16))")
    how="$(printf '%.2f' "$delay") s after the step-$((5 * k)) checkpoint"
    while kill -0 "$pid" 2>/dev/null && [ "$(latest_step "$dir")" -lt $((5 * k)) ]; do sleep 0.01; done
    sleep "$delay"
  fi
  kill -9 -- "-$pid" 2>/dev/null || true
  rc=0
  { wait "$pid" || rc=$?; } 2>/dev/null  # quiet: the shell would report the kill
  if [ "$rc" -ne 137 ]; then
    echo "trial $trial: the run ended (exit $rc) before the kill; not a trial"
    continue
  fi
  partial="$(compgen -G "$dir/checkpoints/.tmp-*" > /dev/null && echo ", a checkpoint half-written" || true)"
  [ -n "$partial" ] && mid_checkpoint=$((mid_checkpoint + 1))
  last="step $(latest_step "$dir")"
  if ! "$host" --plugins "$plugins" run --resume "$dir" > "$dir.resume.log" 2>&1; then
    echo "trial $trial: killed $how (last checkpoint $last$partial): RESUME FAILED:"
    tail -3 "$dir.resume.log" | sed 's/^/  /'
    failed=$((failed + 1))
    continue
  fi
  if comparable "$dir/metrics.jsonl" | cmp -s - "$work/whole.txt"; then
    echo "trial $trial: killed $how (last checkpoint $last$partial): resumed, metrics identical"
  else
    echo "trial $trial: killed $how (last checkpoint $last$partial): resumed, METRICS DIFFER:"
    comparable "$dir/metrics.jsonl" | diff "$work/whole.txt" - | head -6 | sed 's/^/  /'
    failed=$((failed + 1))
  fi
done
echo "soak: $trials trials, $mid_checkpoint killed mid-checkpoint, $failed failed"
[ "$failed" -eq 0 ]
