#!/usr/bin/env bash
# The format study of issue #14, on the CPU, then one report per study:
#   scripts/experiments.sh [OUT_DIR]        (default docs/results)
# Each study is a sweep file in configs/sweeps/ (the runs, seeds and overrides are there):
#   seeds       study_seeds.toml: the seed formats x scaling {none, delayed} x master weights
#               {on, off} at the seeds' 500 steps, 3 seeds (84 runs)
#   separating  study_separating.toml + study_separating_more_seeds.toml: the seed formats at the
#               separating workload (configs/separating_bf16.toml), 3 seeds, 5 for BF16, E5M2, E3M4 (27 runs)
#   blocks      study_blocks.toml: the block-scaled configs at the separating workload, 3 seeds
#               (27 runs); its report sets them beside the separating runs (and their BF16 baseline)
# Two runs at a time, one thread each: about 2.7 hours on an otherwise idle 2-core machine
# (docs/performance.md, "A workload that separates the formats"). It prints the time each study took.
# Runs go to OUT_DIR/runs/<study>/, the reports to OUT_DIR/<study>/report.md with their figures.
# A collapsed run is a result, not an error; `sweep` says what it does with runs already in its
# --out folder.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/results}"
[ -x build/altgrad-host ] || scripts/build.sh
host=(build/altgrad-host --plugins build/plugins)
mkdir -p "$out/runs"
start=$(date +%s)

sweep() {  # sweep FILE STUDY: the sweep file's runs into OUT/runs/STUDY
  local t=$(date +%s)
  "${host[@]}" sweep "configs/sweeps/$1.toml" --jobs 2 --out "$out/runs/$2"
  echo "sweep $1: $(( $(date +%s) - t )) s"
}
report() {  # report STUDY RUN_FOLDER...: one report over the run directories in those folders
  local study=$1
  shift
  local dirs=()
  for folder in "$@"; do dirs+=("$out/runs/$folder"/*/); done
  "${host[@]}" report "${dirs[@]}" -o "$out/$study"
}

sweep study_seeds seeds
report seeds seeds
sweep study_separating separating
sweep study_separating_more_seeds separating_more_seeds
report separating separating separating_more_seeds
sweep study_blocks blocks
report blocks separating separating_more_seeds blocks
echo "experiments and reports: $(( $(date +%s) - start )) s; reports: $out/{seeds,separating,blocks}/report.md"
