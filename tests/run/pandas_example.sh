#!/usr/bin/env bash
# Runs the pandas example of docs/training.md, as written there, on two short
# real runs named as in the example: the documented metrics schema and the
# example cannot drift from what the host writes.
# Usage: pandas_example.sh HOST PLUGINS DOC WORK
set -euo pipefail
host="$1" plugins="$2" doc="$3" work="$4"
rm -rf "$work"
mkdir -p "$work/runs"
for run in e5m2_short e3m4_uniform; do
  "$host" --plugins "$plugins" run "$(dirname "$doc")/../configs/$run.toml" --out "$work/runs/$run" \
    --set training.max_steps=30 --set training.warmup_steps=5 --set training.eval_interval=10 > "$work/$run.log" 2>&1
done
# The first ```python block after "With pandas".
/usr/bin/python3 - "$doc" > "$work/example.py" <<'PY'
import sys
text = open(sys.argv[1]).read()
start = text.index("```python", text.index("With pandas")) + len("```python\n")
print(text[start:text.index("```", start)])
PY
cd "$work"
/usr/bin/python3 example.py | tee example.out
# Both runs appear, by their run ids, with a final loss and 4 evaluations (0, 10, 20, 30).
grep -q "^e3m4_uniform " example.out
grep -q "^e5m2_short " example.out
[ "$(grep -cE '^(0|10|20|30) ' example.out)" -eq 4 ]
echo "pandas example: ok"
