#!/usr/bin/env bash
# A distributed run under a real Slurm (docs/distributed.md): a private
# single-node cluster (single_node.sh), `srun --ntasks 2` starting two ranks
# that find each other from Slurm's variables alone (SLURM_PROCID,
# SLURM_NTASKS, the first host of SLURM_STEP_NODELIST, a port from
# SLURM_JOB_ID); the run is bit for bit the same as one process with
# training.grad_accum = 2: its metrics (floats exact, timings aside) and its
# final weights.
# Usage: two_tasks.sh HOST PLUGINS SOURCE_DIR WORK       (as root)
set -euo pipefail
host="$1" plugins="$2" src="$3" work="$4"
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
fail() { echo "two_tasks: $*" >&2; exit 1; }
comparable() { /usr/bin/python3 "$src/scripts/comparable_metrics.py" "$1/metrics.jsonl"; }

cluster="$work/cluster"
"$src/tests/slurm/single_node.sh" start "$cluster" > /dev/null
trap '"$src/tests/slurm/single_node.sh" stop "$cluster"' EXIT
# shellcheck disable=SC1091
source "$cluster/env"

small=(--set model.n_layer=2 --set model.n_embd=32 --set model.n_head=2 --set model.block_size=32
       --set training.batch_size=4 --set training.max_steps=8 --set training.warmup_steps=2
       --set training.eval_interval=4 --set training.eval_batches=2 --set quantization.diagnostic_interval=4
       --set output.checkpoint_interval=4 --set training.threads=1)
"$host" --plugins "$plugins" run "$src/configs/e5m2_short.toml" "${small[@]}" --set training.grad_accum=2 \
  --out "$work/accum" > "$work/accum.log" 2>&1 || fail "grad_accum = 2: $(tail -1 "$work/accum.log")"
# No torchrun variables may leak in: the ranks must find each other from Slurm's.
env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT \
  srun --ntasks 2 --cpus-per-task 1 --time 5 "$host" --plugins "$plugins" run "$src/configs/e5m2_short.toml" \
  "${small[@]}" --out "$work/srun" > "$work/srun.log" 2>&1 || fail "srun --ntasks 2: $(tail -3 "$work/srun.log")"
grep -q "^2 ranks (SLURM_PROCID, SLURM_NTASKS, rendezvous " "$work/srun.log" || fail "no ranks line: $(head "$work/srun.log")"
diff <(comparable "$work/accum") <(comparable "$work/srun") > "$work/diff.txt" ||
  fail "srun's 2 ranks and grad_accum = 2 differ: $(head -c 600 "$work/diff.txt")"
cmp "$work/accum/checkpoints/step_0000008/model.pt" "$work/srun/checkpoints/step_0000008/model.pt" ||
  fail "the final weights differ"
echo "two_tasks: srun --ntasks 2 = grad_accum 2, bit for bit"
