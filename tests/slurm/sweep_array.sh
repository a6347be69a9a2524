#!/usr/bin/env bash
# `sweep --slurm` against a real Slurm: a private single-node cluster
# (single_node.sh: munged, slurmctld, slurmd, started and stopped by PID here).
#  1. A 2 configs x 2 seeds sweep submitted as one job array with `--wait`:
#     four finished run directories, each with exactly the metrics of the same
#     point run locally; submitting again finds nothing left and submits nothing.
#  2. A requeued task resumes: a longer run is requeued mid-run (Slurm sends
#     SIGTERM; the run checkpoints and exits 130), runs again as a new task
#     (SLURM_RESTART_COUNT 1) and finishes with the uninterrupted run's metrics.
#  3. A run of 2 ranks (ntasks_per_node = 2) goes in a job array of its own,
#     whose task srun's its ranks; it ends bit for bit as its sibling run on
#     one rank at grad_accum = 2.
# Usage: sweep_array.sh HOST PLUGINS SOURCE_DIR WORK       (as root)
set -euo pipefail
host="$1" plugins="$2" src="$3" work="$4"
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
fail() { echo "sweep_array: $*" >&2; exit 1; }
comparable() { /usr/bin/python3 "$src/scripts/comparable_metrics.py" "$1"; }

cluster="$work/cluster"
"$src/tests/slurm/single_node.sh" start "$cluster" > /dev/null
trap '"$src/tests/slurm/single_node.sh" stop "$cluster"' EXIT
# shellcheck disable=SC1091
source "$cluster/env"

# Tiny runs (as scripts/soak.sh shrinks e5m2_short).
shrink='"model.n_layer=2", "model.n_embd=32", "model.n_head=2", "model.block_size=32",
       "training.batch_size=4", "training.warmup_steps=2", "training.eval_interval=5", "training.eval_batches=2",
       "quantization.diagnostic_interval=5", "output.keep_checkpoints=2"'
shrink_args=(--set model.n_layer=2 --set model.n_embd=32 --set model.n_head=2 --set model.block_size=32
             --set training.batch_size=4 --set training.warmup_steps=2 --set training.eval_interval=5
             --set training.eval_batches=2 --set quantization.diagnostic_interval=5 --set output.keep_checkpoints=2)

# ---- 1. a job array, waited for
cat > "$work/tiny.toml" <<TOML
name = "tiny"
configs = ["$src/configs/e5m2_short.toml", "$src/configs/bf16_baseline.toml"]
seeds = [1, 2]
set = [$shrink, "training.max_steps=10"]
TOML
out="$work/tiny"
"$host" --plugins "$plugins" sweep "$work/tiny.toml" --out "$out" --slurm --slurm-args "--wait --quiet" \
  > "$work/submit1.log" 2>&1 || fail "sweep --slurm failed: $(tail -3 "$work/submit1.log")"
[ -f "$out/slurm/sweep.sbatch" ] || fail "no $out/slurm/sweep.sbatch"
grep -q '^#SBATCH --array=0-3' "$out/slurm/sweep.sbatch" || fail "the array is not 0-3: $(grep array "$out/slurm/sweep.sbatch")"
runs=0
for dir in "$out"/*/; do
  [ -f "$dir/summary.json" ] || continue
  runs=$((runs + 1))
  grep -q '"status": *"finished"' "$dir/summary.json" || fail "$dir did not finish: $(cat "$dir/summary.json" | head -5)"
done
[ "$runs" -eq 4 ] || fail "$runs run directories in $out, expected 4: $(ls "$out")"
# The same point run here, not through Slurm: the same metrics, bit for bit.
seed1_e5m2="$out/e5m2_short-s1"   # run names: docs/sweeps.md
"$host" --plugins "$plugins" run "$src/configs/e5m2_short.toml" "${shrink_args[@]}" --set training.max_steps=10 \
  --set training.seed=1 --set training.threads=1 --out "$work/local" > "$work/local.log" 2>&1 ||
  fail "the local run failed: $(tail -1 "$work/local.log")"
comparable "$seed1_e5m2/metrics.jsonl" | cmp -s - <(comparable "$work/local/metrics.jsonl") ||
  fail "$seed1_e5m2 differs from the same point run locally"
# Nothing left: no job submitted.
jobs_before=$(ls "$out"/logs/slurm-* 2>/dev/null | wc -l)
"$host" --plugins "$plugins" sweep "$work/tiny.toml" --out "$out" --slurm --slurm-args "--wait" \
  > "$work/submit2.log" 2>&1 || fail "the second submission failed: $(tail -1 "$work/submit2.log")"
grep -qi 'nothing' "$work/submit2.log" || fail "a finished sweep was submitted again: $(cat "$work/submit2.log")"
[ "$(ls "$out"/logs/slurm-* 2>/dev/null | wc -l)" -eq "$jobs_before" ] || fail "a job ran for a finished sweep"
echo "1. 4 tasks ran through Slurm, metrics equal a local run's; a finished sweep is not submitted again"

# ---- 2. a requeued task resumes from its checkpoint
cat > "$work/long.toml" <<TOML
name = "long"
configs = ["$src/configs/e5m2_short.toml"]
seeds = [3]
set = [$shrink, "training.max_steps=300", "output.checkpoint_interval=50"]
TOML
out="$work/long"
"$host" --plugins "$plugins" sweep "$work/long.toml" --out "$out" --slurm > "$work/submit3.log" 2>&1 ||
  fail "sweep --slurm failed: $(tail -3 "$work/submit3.log")"
job=$(grep -o 'Submitted batch job [0-9]*' "$work/submit3.log" | grep -o '[0-9]*$') || fail "no job id: $(cat "$work/submit3.log")"
run_dir="$out/e5m2_short-s3"
for _ in $(seq 600); do [ -s "$run_dir/metrics.jsonl" ] && break; sleep 0.1; done
[ -s "$run_dir/metrics.jsonl" ] || fail "the task did not start in 60 s: $(squeue -h)"
scontrol requeue "$job" || fail "scontrol requeue $job failed"
# Slurm holds a requeued job back for two minutes (its begin time); let it go now.
for _ in $(seq 100); do
  state=$(squeue -h -j "$job" -o '%T' 2>/dev/null | head -1)
  [ "$state" = PENDING ] && break
  sleep 0.2
done
scontrol update JobId="$job" StartTime=now 2>/dev/null || true
for _ in $(seq 1200); do [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break; sleep 0.25; done
[ -z "$(squeue -h -j "$job" 2>/dev/null)" ] || fail "the requeued job did not end in 5 minutes"
grep -q '"status": *"finished"' "$run_dir/summary.json" || fail "the requeued run did not finish: $(head -5 "$run_dir/summary.json")"
cat "$out"/logs/* > "$work/long.logs" 2>/dev/null || true
grep -q 'REQUEUE' "$work/long.logs" || fail "the job was never requeued (logs: $(ls "$out/logs"))"
grep -q 'resumed from its checkpoint' "$work/long.logs" || fail "the requeued task started over instead of resuming"
"$host" --plugins "$plugins" run "$src/configs/e5m2_short.toml" "${shrink_args[@]}" --set training.max_steps=300 \
  --set output.checkpoint_interval=50 --set training.seed=3 --set training.threads=1 --out "$work/whole" \
  > "$work/whole.log" 2>&1 || fail "the uninterrupted run failed: $(tail -1 "$work/whole.log")"
comparable "$run_dir/metrics.jsonl" | cmp -s - <(comparable "$work/whole/metrics.jsonl") ||
  fail "the requeued run's metrics differ from the uninterrupted run's"
echo "2. a task requeued mid-run resumed from its checkpoint: metrics equal the uninterrupted run's"

# ---- 3. runs of several ranks: a job array per layout, the ranks started by srun in the task's allocation
cat > "$work/ranks.toml" <<TOML
name = "ranks"
configs = ["$src/configs/e5m2_short.toml"]
seeds = [4]
set = [$shrink, "training.max_steps=8", "output.checkpoint_interval=4"]
[[point]]
name = "accum2"
set = ["training.grad_accum=2"]
[[point]]
name = "ranks2"
set = []
ntasks_per_node = 2
TOML
out="$work/ranks"
"$host" --plugins "$plugins" sweep "$work/ranks.toml" --out "$out" --slurm --slurm-args "--wait --quiet" \
  > "$work/submit4.log" 2>&1 || fail "sweep --slurm of 2-rank runs failed: $(tail -3 "$work/submit4.log")"
grep -qx '#SBATCH --ntasks-per-node=2' "$out/slurm/sweep-1x2.sbatch" || fail "no 1x2 job script"
for n in accum2 ranks2; do
  grep -q '"status": *"finished"' "$out/e5m2_short-$n-s4/summary.json" ||
    fail "e5m2_short-$n-s4 did not finish: $(tail -3 "$out/logs/e5m2_short-$n-s4.log")"
done
grep -q "^2 ranks (SLURM_PROCID, SLURM_NTASKS, rendezvous " "$out/logs/e5m2_short-ranks2-s4.log" ||
  fail "the 2-rank run's ranks did not come from srun: $(head -5 "$out/logs/e5m2_short-ranks2-s4.log")"
comparable "$out/e5m2_short-accum2-s4/metrics.jsonl" | cmp -s - <(comparable "$out/e5m2_short-ranks2-s4/metrics.jsonl") ||
  fail "srun's 2 ranks and grad_accum 2 differ"
cmp "$out/e5m2_short-accum2-s4/checkpoints/step_0000008/model.pt" "$out/e5m2_short-ranks2-s4/checkpoints/step_0000008/model.pt" ||
  fail "the final weights differ"
echo "3. a 2-rank run through its own job array and srun: bit for bit as grad_accum 2 on one rank"
