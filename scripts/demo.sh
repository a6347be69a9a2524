#!/usr/bin/env bash
# The main job, on its embedded default: set up, build, list the bundled
# plugins, show what each format does to a few telling values (a tie, the
# max boundary, a subnormal, overflow, NaN and Inf), and run the conformance
# kit over every bundled plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh

host=build/altgrad-host
plugins=build/plugins
values="0.1 1 1.0625 3.14159 -2.5 15.75 448 464 57344 61440 1e5 1e-5 nan inf -inf"

echo
"$host" --plugins "$plugins" list
echo
echo "quantize (nearest-even, saturate) of: $values"
formats=$("$host" --plugins "$plugins" list --json | python3 -c \
  'import json,sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["plugins"] if p["kind"]=="format" and p["status"]=="ok"))')
printf '%-10s' "input"; for v in $values; do printf '%-14s' "$v"; done; echo
for f in $formats; do
  printf '%-10s' "$f"
  for r in $(echo "$values" | "$host" --plugins "$plugins" quantize "$f"); do
    printf '%-14s' "$(python3 -c "import sys; x=float.fromhex(sys.argv[1]) if 'x' in sys.argv[1] else float(sys.argv[1]); print('%.6g' % x)" "$r")"
  done
  echo
done
echo
echo "The conformance kit over every bundled plugin (docs/conformance.md):"
"$host" --plugins "$plugins" conformance --brief
echo
echo "Exact encodings: $host --plugins $plugins describe NAME --table   (docs/formats.md)"
