#!/usr/bin/env bash
# Check that the code which includes LibTorch compiles against a LibTorch 2.x,
# on this Debian 12 machine, without a GPU: downloads Debian 13 (trixie)'s
# libtorch-dev (headers only, about 2.5 MB; apt with a private list folder,
# the system's sources untouched, and trixie's source derived from them: the
# machine's own entries for its release, the suite replaced, so whatever
# mirror the machine is configured with is the one asked) and recompiles every LibTorch translation
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
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/root" "$work/parts"
release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
eval "$(apt-config shell list Dir::Etc::sourcelist/f parts Dir::Etc::sourceparts/d)"
python3 - "$release" trixie "${list:-}" "${parts:-}" > "$work/parts/trixie.sources" <<'PY'
# The machine's `deb` sources of `release` (one-line .list and deb822 .sources
# files alike) as deb822 stanzas of `suite`, component main, Signed-By kept.
import glob, os, re, sys
release, suite, list_file, parts = sys.argv[1:5]
files = [list_file] + sorted(glob.glob(os.path.join(parts, "*.list")) + glob.glob(os.path.join(parts, "*.sources")))
entries = []  # (URIs, Signed-By or None)
def one_line(line):
    words = line.split("#", 1)[0].split()
    if not words or words[0] != "deb":
        return
    options = {}
    if len(words) > 1 and words[1].startswith("["):
        end = next((i for i, w in enumerate(words) if w.endswith("]")), None)
        if end is None:
            return
        for o in " ".join(words[1:end + 1]).strip("[]").split():
            key, _, value = o.partition("=")
            options[key.lower()] = value
        words = [words[0]] + words[end + 1:]
    if len(words) >= 3 and words[2] == release:
        entries.append((words[1], options.get("signed-by")))
def stanza(lines):
    fields, key = {}, None
    for line in lines:
        if line.startswith("#"):
            continue
        if line[:1] in (" ", "\t") and key:
            fields[key] += "\n" + line.rstrip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
    if (fields.get("enabled", "yes").lower() != "no" and "deb" in fields.get("types", "").split()
            and release in fields.get("suites", "").split()):
        entries.append((fields.get("uris", ""), fields.get("signed-by")))
for f in files:
    if not os.path.isfile(f):
        continue
    text = open(f, encoding="utf-8", errors="replace").read()
    if f.endswith(".sources"):
        for block in re.split(r"\n\s*\n", text):
            stanza(block.splitlines())
    else:
        for line in text.splitlines():
            one_line(line)
seen = set()
for uris, signed_by in entries:
    if not uris or (uris, signed_by) in seen:
        continue
    seen.add((uris, signed_by))
    print(f"Types: deb\nURIs: {uris}\nSuites: {suite}\nComponents: main")
    print(f"Signed-By: {signed_by}\n" if signed_by else "")
PY
[[ -s "$work/parts/trixie.sources" ]] || {
  echo "libtorch2_check: no apt source of Debian ${release:-?} in ${list:-?} or ${parts:-?} to derive trixie's from" >&2
  exit 2
}
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Dir::State::status=/dev/null)
if ! compgen -G "$work/libtorch-dev_*.deb" > /dev/null; then
  # A source of another origin that has no trixie (a third-party repository of the same suite name)
  # fails its part of the update, not the check: the download below says whether Debian's answered.
  apt-get "${apt_opts[@]}" update -qq || echo "libtorch2_check: apt-get update reported errors (above)" >&2
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
# LibTorch (LIBTORCH_TARGETS), with the 2.x headers
# searched first and -fsyntax-only instead of an object.
python3 - "$commands" "$inc" <<'PY'
import json, shlex, subprocess, sys
commands, inc = sys.argv[1], sys.argv[2]
# The targets that include LibTorch: the trainer, its test and tools, and the Python module binding it.
LIBTORCH_TARGETS = ("altgrad_host_train", "altgrad_train_step_bench", "altgrad_products_tests",
                    "altgrad_layer_probe", "altgrad_python_train")
failed = 0
checked = 0
for entry in json.load(open(commands)):
    src = entry["file"]
    if not any(f"/{target}.dir/" in entry["command"] for target in LIBTORCH_TARGETS):
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
        if a == "-c" or a == "-Winvalid-pch":
            continue
        out.append(a)
    # The precompiled LibTorch header (host/CMakeLists.txt) holds the other LibTorch's
    # declarations: the sources include what they need themselves.
    out = [a for i, a in enumerate(out)
           if not (a == "-include" and out[i + 1].endswith("cmake_pch.hxx"))
           and not (a.endswith("cmake_pch.hxx") and i > 0 and out[i - 1] == "-include")]
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
