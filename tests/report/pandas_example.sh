#!/usr/bin/env bash
# Runs the pandas example of docs/report.md ("Tables"), as written there, on
# the report of three short real runs (two seeds of e5m2_short, one
# bf16_baseline): the documented tables and the example cannot drift from
# what `report` writes.
# Usage: pandas_example.sh HOST PLUGINS SOURCE_DIR WORK
set -euo pipefail
host="$1" plugins="$2" src="$3" work="$4"
rm -rf "$work"
mkdir -p "$work/runs"
tiny=(--set model.n_layer=2 --set model.n_embd=32 --set model.n_head=2 --set model.block_size=32
      --set training.batch_size=4 --set training.max_steps=20 --set training.warmup_steps=5
      --set training.eval_interval=10 --set training.eval_batches=2)
for run in e5m2_short:1 e5m2_short:2 bf16_baseline:1; do
  config="${run%:*}" seed="${run#*:}"
  "$host" --plugins "$plugins" run "$src/configs/$config.toml" --out "$work/runs/$config-s$seed" "${tiny[@]}" \
    --set training.seed="$seed" > "$work/$config-s$seed.log" 2>&1
done
cd "$work"
"$host" report --no-figures -o report runs/* > report.log
# The first ```python block after "With pandas".
/usr/bin/python3 - "$src/docs/report.md" > example.py <<'PY'
import sys
text = open(sys.argv[1]).read()
start = text.index("```python", text.index("With pandas")) + len("```python\n")
print(text[start:text.index("```", start)])
PY
/usr/bin/python3 example.py | tee example.out
# The two seeds are one group of 2, the baseline one of 1; evaluations at steps 0, 10 and 20.
grep -qE '^e5m2_short +2 ' example.out
grep -qE '^bf16_baseline +1 ' example.out
[ "$(grep -cE '^(0|10|20) +[0-9.]+ +[0-9.]+$' example.out)" -eq 3 ]
# The summary: the baseline first, then E5M2 against it by the difference of the means (one seed shared).
grep -qE '^0 +bf16_baseline +1 +baseline ' example.out
grep -qE '^1 +e5m2_short +2 +means ' example.out
echo "pandas example: ok"
