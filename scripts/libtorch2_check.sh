#!/usr/bin/env bash
# Check that the code which includes LibTorch compiles against a LibTorch 2.x,
# on this Debian 12 machine, without a GPU: downloads Debian 13 (trixie)'s
# libtorch-dev (headers only, about 2.5 MB; apt with a private list folder,
# the system's sources untouched) and recompiles every LibTorch translation
# unit of an existing build with those headers first on the include path,
# syntax only (Debian 13's libraries need a newer C library, so nothing links).
#
#   scripts/libtorch2_check.sh [BUILD_DIR]     (default: build; run scripts/build.sh first)
#
# Prints one line per translation unit and exits non-zero if any fails.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
commands="$build/compile_commands.json"
[[ -f "$commands" ]] || { echo "libtorch2_check: $commands missing: build first (scripts/build.sh)" >&2; exit 2; }
work=${ALTGRAD_LIBTORCH2_DIR:-/tmp/altgrad-libtorch2}
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/root"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
  > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Dir::State::status=/dev/null)
if ! compgen -G "$work/libtorch-dev_*.deb" > /dev/null; then
  apt-get "${apt_opts[@]}" update -qq
  (cd "$work" && apt-get "${apt_opts[@]}" download libtorch-dev 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
fi
deb=$(compgen -G "$work/libtorch-dev_*.deb" | head -1)
[[ -n "$deb" ]] || { echo "libtorch2_check: could not download trixie's libtorch-dev" >&2; exit 2; }
dpkg -x "$deb" "$work/root"
inc="$work/root/usr/include"
version=$(sed -n 's/^#define TORCH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
  "$inc/torch/csrc/api/include/torch/version.h" | paste -sd.)
echo "libtorch2_check: LibTorch $version headers from $(basename "$deb")"

# The build's own command for each translation unit of the targets built on
# LibTorch (the trainer library and the step benchmark), with the 2.x headers
# searched first and -fsyntax-only instead of an object.
python3 - "$commands" "$inc" <<'PY'
import json, shlex, subprocess, sys
commands, inc = sys.argv[1], sys.argv[2]
failed = 0
checked = 0
for entry in json.load(open(commands)):
    src = entry["file"]
    if "/altgrad_host_train.dir/" not in entry["command"] and "/altgrad_train_step_bench.dir/" not in entry["command"]:
        continue
    args = shlex.split(entry["command"])
    out = []
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c":
            continue
        out.append(a)
    cmd = [args[0], "-isystem", inc, "-isystem", inc + "/torch/csrc/api/include", "-fsyntax-only"] + out
    r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
    checked += 1
    print(("ok     " if r.returncode == 0 else "FAILED ") + src, flush=True)
    if r.returncode != 0:
        failed += 1
        print(r.stderr[-4000:], file=sys.stderr)
print(f"libtorch2_check: {checked} checked, {failed} failed")
if checked == 0:
    sys.exit("libtorch2_check: no LibTorch translation unit in " + commands)
sys.exit(1 if failed else 0)
PY
