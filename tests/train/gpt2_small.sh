#!/usr/bin/env bash
# GPT-2 small on the CPU, a few steps (issue #48): configs/gpt2_small.toml builds GPT-2's
# 124 M-parameter shape (the parameter count below is worked out from the architecture, not read
# from the code) and trains a step; every recipe variant of configs/sweeps/gpt2_small_recipes.toml
# trains a step at that width and head count, two blocks deep. Context 64 and one row a step keep
# it to seconds a run (most of it writing the checkpoint: 1.5 GB at 124 M parameters).
# Usage: gpt2_small.sh HOST PLUGINS SOURCE_DIR WORK
set -euo pipefail
host="$1" plugins="$2" src="$3" work="$4"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "gpt2_small: $*" >&2; exit 1; }
smoke=(model.block_size=64 training.batch_size=1 training.grad_accum=1 training.max_steps=1
       training.warmup_steps=0 training.eval_interval=1 training.eval_batches=1 training.threads=2
       output.checkpoint_interval=1)
sets=()
for s in "${smoke[@]}"; do sets+=(--set "$s"); done

# 1. GPT-2's shape with GPT-2's vocabulary: 12 blocks of 12 d^2 + 13 d parameters (QKV 3d^2 + 3d,
#    projection d^2 + d, MLP 4d^2 + 4d and 4d^2 + d, two LayerNorms 2d each), the token and
#    position embeddings V d and T d (the head is tied), the last LayerNorm 2 d. At context 1024
#    that is 124,439,808 (GPT-2 small's 124 M); at the test's context 64, 123,702,528.
expected=$(( 12 * (12 * 768 * 768 + 13 * 768) + 50257 * 768 + 64 * 768 + 2 * 768 ))
[ "$expected" -eq 123702528 ] || fail "arithmetic: $expected"
"$host" --plugins "$plugins" run "$src/configs/gpt2_small.toml" "${sets[@]}" --set model.vocab_size=50257 \
  --out "$work/gpt2" > "$work/gpt2.log" 2>&1 || fail "gpt2_small failed: $(tail -3 "$work/gpt2.log")"
grep -q "^run gpt2_small: $expected parameters" "$work/gpt2.log" || fail "not GPT-2 small's shape: $(head -3 "$work/gpt2.log")"
/usr/bin/python3 - "$work/gpt2/metrics.jsonl" <<'PY' || fail "gpt2_small's losses"
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
train = [l["loss"] for l in lines if l.get("kind") == "train"]
val = [l["val_loss"] for l in lines if l.get("kind") == "val"]
assert len(train) == 1 and len(val) == 2, (train, val)
# A fresh model predicts about uniformly over 50,257 tokens: loss near ln(50257) = 10.8.
assert all(math.isfinite(x) for x in train + val), (train, val)
assert abs(val[0] - math.log(50257)) < 0.5, val
PY
echo "gpt2_small: GPT-2 small's shape ($expected parameters at context 64) trains"

# 2. Every recipe variant, one sweep of a step each on the bundled corpus, two blocks deep.
/usr/bin/python3 - "$src/configs/sweeps/gpt2_small_recipes.toml" "$work/smoke.toml" "${smoke[@]}" <<'PY'
import os, sys, tomllib
src, out, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
s = tomllib.load(open(src, "rb"))
configs = [os.path.normpath(os.path.join(os.path.dirname(src), c)) for c in s["configs"]]
overrides = s["set"] + extra + ["model.n_layer=2"]
q = lambda xs: "[" + ", ".join('"' + x + '"' for x in xs) + "]"
open(out, "w").write(f'name = "gpt2_smoke"\nconfigs = {q(configs)}\nseeds = {s["seeds"]}\nset = {q(overrides)}\n')
PY
"$host" --plugins "$plugins" sweep "$work/smoke.toml" --out "$work/recipes" > /dev/null 2> "$work/sweep.err" ||
  fail "a recipe variant failed: $(tail -5 "$work/sweep.err")"
runs=0
for dir in "$work"/recipes/*/; do
  [ -f "$dir/summary.json" ] || continue
  runs=$((runs + 1))
  grep -q '"status": *"finished"' "$dir/summary.json" || fail "$dir did not finish"
done
[ "$runs" -eq 7 ] || fail "$runs runs, expected 7 (gpt2_small and six recipes)"
echo "gpt2_small: its 7 recipe variants train a step at GPT-2 small's width"

# 3. Study 7's sweep (docs/study.md, on paper: a GPU cluster's): seven configs x three seeds, each
#    run 8 data-parallel ranks on one node, one Slurm array of that layout.
"$host" --plugins "$plugins" sweep "$src/configs/sweeps/study7_gpt2_small.toml" --out "$work/study7" --dry-run \
  > "$work/study7.txt" 2>&1 || fail "study 7's dry run: $(tail -3 "$work/study7.txt")"
[ "$(grep -c ' new .* --nproc 8$' "$work/study7.txt")" -eq 21 ] || fail "study 7: not 21 runs of 8 ranks"
"$host" --plugins "$plugins" sweep "$src/configs/sweeps/study7_gpt2_small.toml" --out "$work/study7" --slurm \
  --dry-run > "$work/study7_slurm.txt" 2>&1 || fail "study 7's job script: $(tail -3 "$work/study7_slurm.txt")"
grep -q '^#SBATCH --ntasks-per-node=8' "$work/study7/slurm/sweep-1x8.sbatch" || fail "study 7: no 1x8 job script"
echo "gpt2_small: study 7's sweep lists 21 runs of 8 ranks and its Slurm array"
