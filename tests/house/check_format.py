#!/usr/bin/env python3
"""Every C and C++ source of the repository is laid out as .clang-format says (CONTRIBUTING.md).

Usage: check_format.py SOURCE_DIR [CLANG_FORMAT (clang-format)]
Prints each file clang-format would change (and the first lines it would change) and exits 1 if
there is any; `clang-format -i FILE...` fixes them.
"""
import pathlib
import shutil
import subprocess
import sys

SUFFIXES = {".c", ".h", ".cpp", ".hpp", ".cu", ".cuh"}
FOLDERS = ["sdk", "host", "plugins", "tests", "benchmarks", "docs/examples"]


def sources(root):
    out = subprocess.run(["git", "-C", str(root), "ls-files", "--", *FOLDERS], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        files = [root / line for line in out.stdout.splitlines()]
    else:  # not a git checkout: every file below the folders
        files = [p for f in FOLDERS for p in (root / f).rglob("*")]
    return sorted(p for p in files if p.is_file() and p.suffix in SUFFIXES)


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1]).resolve()
    tool = argv[2] if len(argv) == 3 else "clang-format"
    if shutil.which(tool) is None:
        print(f"check_format: {tool} not found (scripts/setup.sh installs Debian's clang-format)")
        return 1
    bad = []
    for path in sources(root):
        formatted = subprocess.run([tool, f"--style=file:{root / '.clang-format'}", str(path)],
                                   capture_output=True, text=True)
        if formatted.returncode != 0:
            bad.append(f"{path.relative_to(root)}: clang-format failed: {formatted.stderr.strip()}")
            continue
        original = path.read_text(errors="surrogateescape")
        if formatted.stdout != original:
            a, b = original.splitlines(), formatted.stdout.splitlines()
            line = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))) + 1
            bad.append(f"{path.relative_to(root)}:{line}: not as .clang-format lays it out (clang-format -i fixes it)")
    for b in bad:
        print(b)
    print(f"check_format: {len(bad)} file(s) to format" if bad else "check_format: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
