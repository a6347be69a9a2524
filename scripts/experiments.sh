#!/usr/bin/env bash
# The format studies (issues #14 and #33), on the CPU, then one report per study:
#   scripts/experiments.sh [OUT_DIR [STUDY...]]   (OUT_DIR: default docs/results, where the published
#                                                  studies live; their runs keep no metrics, so
#                                                  regenerate into a new folder. STUDY: seeds,
#                                                  separating, blocks, recipes, scaling; default all)
# Each study is a sweep file in configs/sweeps/ (the runs, seeds and overrides are there):
#   seeds       study_seeds.toml: the seed formats x scaling {none, delayed} x master weights
#               {on, off} at the seeds' 500 steps, 3 seeds (84 runs)
#   separating  study_separating.toml + study_separating_more_seeds.toml: the seed formats at the
#               separating workload (configs/separating_bf16.toml), 3 seeds, 5 for BF16, E5M2, E3M4 (27 runs)
#   blocks      study_blocks.toml: the block-scaled configs at the separating workload, 3 seeds
#               (27 runs), and study_blocks_round_up.toml: MXFP8 E4M3 and E5M2 with the scale rounded
#               up instead of OCP MX's floor rule (6 runs); its report sets them beside the separating
#               runs (and their BF16 baseline), and blocks_vs_mxfp8_e4m3/ compares them with MXFP8 E4M3
#               of the same scale rule instead (report --baseline)
#   recipes     study 4, the published recipes of configs/recipes/ at the separating workload, 3 seeds:
#               study4_recipes.toml (the six recipes and BF16, 21 runs), study4_nvfp4_ablations.toml
#               (15), study4_tseng_ablations.toml (9), study4_accumulation.toml (6), study4_formats.toml
#               (the seed formats in MXFP8 and DeepSeek-V3, 18) and study4_nvfp4_elements.toml (4-bit
#               elements in NVFP4, 9): 78 runs, about 8 hours on 2 cores (docs/performance.md); and
#               study4_wgmma.toml (DeepSeek-V3 on Hopper's FP8 wgmma bit for bit, as the recipe is
#               published since 2026-11-29, 3 runs), reported beside study4_recipes' into OUT/wgmma/
#   scaling     study 5, a precision scaling law: study5_e32/e64/e128.toml, models of 57 k, 211 k and
#               816 k parameters on the separating workload's tokens per parameter, one role at a time
#               in E8M1..E8M5, 3 seeds (144 runs, about 2.5 hours on 2 cores), then the fit
#               (scripts/scaling_law.py) into OUT/scaling/
# Two runs at a time, one thread each: about 3.5 hours on an otherwise idle 2-core machine
# (docs/performance.md, "A workload that separates the formats"). It prints the time each study took.
# Runs go to OUT_DIR/runs/<study>/, the reports to OUT_DIR/<study>/report.md with their figures and
# tables. A finished sweep is not run again (`sweep` skips finished and collapsed runs and resumes
# interrupted ones), so rerunning this script after a stop finishes the study and redraws the reports.
#
# What is published stays small (docs/results/.gitignore keeps the rest out of git): each run's
# config.toml, summary.json and failure report; each report's markdown, summary.csv, runs.csv, steps.csv
# compressed to steps.csv.xz (pandas reads it as it is), and its figures as 8-bit palette PNGs
# (pngquant; gnuplot's are 24-bit and 4x larger). metrics.jsonl, checkpoints, logs and the figures'
# data and gnuplot scripts stay on the machine that ran the study.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/results}"
shift $(( $# > 0 ? 1 : 0 ))
if [ $# -gt 0 ]; then studies=("$@"); else studies=(seeds separating blocks recipes scaling); fi
for study in "${studies[@]}"; do
  case "$study" in seeds|separating|blocks|recipes|scaling) ;;
    *) echo "experiments.sh: unknown study '$study' (seeds, separating, blocks, recipes, scaling)" >&2; exit 2 ;;
  esac
done
wanted() { [[ " ${studies[*]} " == *" $1 "* ]]; }
for tool in xz pngquant; do
  command -v "$tool" > /dev/null || { echo "experiments.sh: $tool not found (scripts/setup.sh installs it)" >&2; exit 1; }
done
# The published runs in git keep no metrics.jsonl: a sweep would count them finished and the
# reports would lose their curves. Regenerate the study in a new folder instead.
for summary in "$out"/runs/*/*/summary.json; do
  [ -e "$summary" ] || continue
  if [ ! -e "$(dirname "$summary")/metrics.jsonl" ]; then
    echo "experiments.sh: $(dirname "$summary"): a published run without its metrics.jsonl;" \
         "run the study into a new folder: scripts/experiments.sh /tmp/study" >&2
    exit 1
  fi
done
[ -x build/altgrad-host ] || scripts/build.sh
host=(build/altgrad-host --plugins build/plugins)
mkdir -p "$out/runs"
start=$(date +%s)

sweep() {  # sweep FILE STUDY: the sweep file's runs into OUT/runs/STUDY
  local t=$(date +%s)
  "${host[@]}" sweep "configs/sweeps/$1.toml" --jobs 2 --out "$out/runs/$2"
  echo "sweep $1: $(( $(date +%s) - t )) s"
}
report() {  # report STUDY "RUN_FOLDER..." [REPORT_OPTION...]: one report over the runs in those folders
  local study=$1 folders=$2
  shift 2
  local dirs=()
  for folder in $folders; do dirs+=("$out/runs/$folder"/*/); done
  rm -rf "${out:?}/$study"
  "${host[@]}" report "${dirs[@]}" -o "$out/$study" "$@"
  xz -9 -T1 -f "$out/$study/steps.csv"
  sed -i 's/(steps\.csv)/(steps.csv.xz)/' "$out/$study/report.md"
  [ ! -d "$out/$study/figures" ] || find "$out/$study/figures" -maxdepth 1 -name '*.png' -exec pngquant --force --ext .png 256 {} +
}

if wanted seeds; then
  sweep study_seeds seeds
  report seeds seeds
fi
if wanted separating || wanted blocks; then
  sweep study_separating separating
  sweep study_separating_more_seeds separating_more_seeds
fi
wanted separating && report separating "separating separating_more_seeds"
if wanted blocks; then
  sweep study_blocks blocks
  sweep study_blocks_round_up blocks_round_up
  report blocks "separating separating_more_seeds blocks blocks_round_up"
  # The block-scaled seed formats against MXFP8 E4M3 (the same 32-element E8M0 blocks): the tables and
  # the summary's forest plots (the blocks report draws the runs' other figures).
  report blocks_vs_mxfp8_e4m3 "blocks blocks_round_up" --baseline mxfp8_e4m3 --summary-figures-only
fi
if wanted recipes; then
  for s in recipes nvfp4_ablations tseng_ablations accumulation formats nvfp4_elements wgmma; do
    sweep "study4_$s" "study4_$s"
  done
  # Every recipe, ablation and format against the BF16 baseline (study4_recipes' separating_bf16).
  report recipes "study4_recipes study4_nvfp4_ablations study4_tseng_ablations study4_accumulation \
study4_formats study4_nvfp4_elements"
  # DeepSeek-V3 on the instruction against the E8M13 model and BF16 (study4_recipes' runs of both).
  report wgmma "study4_recipes study4_wgmma" --summary-figures-only
fi
if wanted scaling; then
  for e in 32 64 128; do sweep "study5_e$e" "study5_e$e"; done
  PYTHONPATH=build/python /usr/bin/python3 scripts/scaling_law.py "$out"/runs/study5_e*/*/ -o "$out/scaling"
fi
echo "experiments and reports: $(( $(date +%s) - start )) s; reports: $out/*/report.md"
