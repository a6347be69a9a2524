#!/usr/bin/env bash
# The main job, on its embedded default: set up, build, list the bundled
# plugins and run the conformance kit over them, then train the short E5M2
# experiment (configs/e5m2_short.toml, 500 steps on the fortunes corpus) and
# point at what it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh altgrad_product  # the host and the plugins; the tests are scripts/test.sh's

host=build/altgrad-host
plugins=build/plugins

echo
"$host" --plugins "$plugins" list
echo
echo "The conformance kit over every bundled plugin (docs/conformance.md):"
"$host" --plugins "$plugins" conformance --brief
echo
echo "What E4M3 does to a tie (464), overflow (1e5), a subnormal (0.001) and NaN:"
echo "464 1e5 0.001 nan" | "$host" --plugins "$plugins" quantize e4m3 --counts
echo
echo "Training configs/e5m2_short.toml (docs/training.md):"
"$host" --plugins "$plugins" run configs/e5m2_short.toml
