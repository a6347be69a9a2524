#!/usr/bin/env bash
# Times README's first command as a newcomer meets it (issue #32: scripts/demo.sh within 6 minutes on a
# fresh 2-core machine): a fresh clone of this checkout's HEAD in a temporary folder, ccache off,
# scripts/demo.sh under /usr/bin/time. Prints one line, "demo_timing: ...": wall and CPU seconds, the
# load average before and after, the cores. A measurement, not a test: it fails only when the demo
# does. scripts/test.sh runs it last (ALTGRAD_SKIP_DEMO_TIMING=1 skips it), so CI's log of a fresh
# machine carries the figure.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q . "$tmp/altgrad"
load_before=$(cut -d' ' -f1 /proc/loadavg)
if ! (cd "$tmp/altgrad" && CCACHE_DISABLE=1 /usr/bin/time -f "%e %U %S" -o "$tmp/time.txt" scripts/demo.sh \
      > "$tmp/demo.log" 2>&1); then
  tail -20 "$tmp/demo.log" >&2
  echo "demo_timing: scripts/demo.sh failed in a fresh clone (its log's end above)" >&2
  exit 1
fi
read -r wall user sys < "$tmp/time.txt"
echo "demo_timing: scripts/demo.sh in a fresh clone of $(git rev-parse --short HEAD), ccache off:" \
     "${wall} s wall, $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }') s CPU;" \
     "load average ${load_before} before, $(cut -d' ' -f1 /proc/loadavg) after; $(nproc) cores"
