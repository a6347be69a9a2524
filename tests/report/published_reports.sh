#!/usr/bin/env bash
# The published reports (docs/results/) regenerate identically from the run
# folders committed beside them (config.toml and summary.json each; their
# metrics.jsonl are not committed, so the figures and runs.csv, which need
# them, are not redrawn here): every report's summary.csv, with the options
# scripts/experiments.sh gives it, and study 5's whole analysis
# (scripts/scaling_law.py: fit.csv, departures.csv, runs.csv, scaling_law.md).
# A change to how runs are read, grouped or compared that moves a published
# number fails here.
# Usage: published_reports.sh HOST PLUGINS SOURCE_DIR WORK PYTHON_PACKAGE_DIR
set -euo pipefail
host="$1" plugins="$2" src="$3" work="$4" package="$5"
results="$src/docs/results"
rm -rf "$work"
mkdir -p "$work"
failed=0
report() {  # report STUDY "RUN_FOLDER..." [REPORT_OPTION...], as scripts/experiments.sh
  local study=$1 folders=$2
  shift 2
  local dirs=()
  for folder in $folders; do dirs+=("$results/runs/$folder"/*/); done
  "$host" --plugins "$plugins" report "${dirs[@]}" --no-figures -o "$work/$study" "$@" > "$work/$study.log" 2>&1
  if cmp -s "$results/$study/summary.csv" "$work/$study/summary.csv"; then
    echo "ok     $study/summary.csv"
  else
    echo "DIFFER $study/summary.csv"; diff "$results/$study/summary.csv" "$work/$study/summary.csv" | head -5
    failed=1
  fi
}
report seeds seeds
report separating "separating separating_more_seeds"
report blocks "separating separating_more_seeds blocks blocks_round_up"
report blocks_vs_mxfp8_e4m3 "blocks blocks_round_up" --baseline mxfp8_e4m3 --summary-figures-only
report recipes "study4_recipes study4_nvfp4_ablations study4_tseng_ablations study4_accumulation study4_formats \
study4_nvfp4_elements"
report wgmma "study4_recipes study4_wgmma"
PYTHONPATH="$package" /usr/bin/python3 "$src/scripts/scaling_law.py" "$results"/runs/study5_e*/*/ -o "$work/scaling" \
  > "$work/scaling.log" 2>&1
for f in fit.csv departures.csv runs.csv scaling_law.md; do
  if cmp -s "$results/scaling/$f" "$work/scaling/$f"; then echo "ok     scaling/$f"; else echo "DIFFER scaling/$f"; failed=1; fi
done
exit $failed
