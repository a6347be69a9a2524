#!/usr/bin/env python3
"""The house rules a newcomer relies on (CONTRIBUTING.md, "House rules"), checked:

  - no source file under host/ or sdk/ longer than 800 lines;
  - no header and source of one name in a room of host/src/ (X.hpp with X.cpp) longer
    than 1,000 lines together: a room's unit does one job;
  - no function under host/ or sdk/ longer than 80 lines (Universal Ctags' measure:
    from the line of its name to its closing brace), and no Python function anywhere
    in the project longer than 80 lines (from its def to its last line);
  - every include of another room's header, in host/src/<room>/, names a room that
    <room> depends on (host/CMakeLists.txt declares the rooms and their DEPENDS; the
    build writes them to host_rooms.txt);
  - no std::filesystem::remove_all under host/: util/file_tree.hpp's remove_tree
    instead (PyTorch's wheels replace part of libstdc++'s; docs/cuda.md).

Usage: check_house.py SOURCE_DIR HOST_ROOMS_TXT
Prints one line per breach (file:line: what, and the rule), then the rules and where
each applies, and exits 1 if there is any breach.
"""
import ast
import json
import pathlib
import re
import subprocess
import sys

MAX_FILE_LINES = 800
MAX_UNIT_LINES = 1000
MAX_FUNCTION_LINES = 80
FILE_FOLDERS = ["host", "sdk"]
CXX_SUFFIXES = {".c", ".h", ".cpp", ".hpp", ".cu", ".cuh", ".inc"}
SOURCE_SUFFIXES = CXX_SUFFIXES | {".py"}


def tracked_files(root, folders):
    out = subprocess.run(["git", "-C", str(root), "ls-files", "--", *folders], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return [root / line for line in out.stdout.splitlines() if (root / line).is_file()]
    # Not a git checkout (an unpacked tarball): every file below the folders.
    return [p for f in folders for p in (root / f).rglob("*") if p.is_file()]


RULES = [
    f"files: at most {MAX_FILE_LINES} lines, in {' and '.join(f + '/' for f in FILE_FOLDERS)}",
    f"units: a header and its source (X.hpp, X.cpp) at most {MAX_UNIT_LINES} lines together, in host/src/",
    f"functions: at most {MAX_FUNCTION_LINES} lines, C++ in host/ and sdk/, Python everywhere",
    "rooms: a room includes only the rooms it depends on (host/CMakeLists.txt), in host/src/",
    "remove_all: util/file_tree.hpp's remove_tree instead, in host/",
]


def line_count(path):
    return len(path.read_text(errors="replace").splitlines())


def long_files(root):
    for path in tracked_files(root, FILE_FOLDERS):
        if path.suffix not in SOURCE_SUFFIXES:
            continue
        n = line_count(path)
        if n > MAX_FILE_LINES:
            yield f"{path.relative_to(root)}: {n} lines (files: at most {MAX_FILE_LINES})"


def long_units(root):
    for source in tracked_files(root, ["host/src"]):
        header = source.with_suffix(".hpp")
        if source.suffix != ".cpp" or not header.is_file():
            continue
        n = line_count(source) + line_count(header)
        if n > MAX_UNIT_LINES:
            yield (f"{source.relative_to(root)}: {n} lines with {header.name} "
                   f"(units: at most {MAX_UNIT_LINES}; split it by job)")


def long_python_functions(root):
    for path in tracked_files(root, ["."]):
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except SyntaxError as e:
            yield f"{path.relative_to(root)}:{e.lineno}: not Python ({e.msg})"
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    yield (f"{path.relative_to(root)}:{node.lineno}: function {node.name} is {n} lines "
                           f"(functions: at most {MAX_FUNCTION_LINES})")


def long_functions(root):
    files = [str(p) for p in tracked_files(root, ["host", "sdk"]) if p.suffix in CXX_SUFFIXES]
    out = subprocess.run(
        ["ctags", "--output-format=json", "--fields=+ne", "--kinds-C++=f", "--kinds-C=f",
         "--langmap=C++:+.cuh.cu.inc", "-f", "-", *files],
        capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or "end" not in tag:
            continue
        n = tag["end"] - tag["line"] + 1
        if n > MAX_FUNCTION_LINES:
            path = pathlib.Path(tag["path"]).resolve().relative_to(root)
            yield f"{path}:{tag['line']}: function {tag['name']} is {n} lines (functions: at most {MAX_FUNCTION_LINES})"


def read_rooms(rooms_file):
    deps = {}
    for line in pathlib.Path(rooms_file).read_text().splitlines():
        if ":" in line:
            room, below = line.split(":", 1)
            deps[room.strip()] = below.split()
    closure = {}

    def below(room):
        if room not in closure:
            closure[room] = set()
            for d in deps.get(room, []):
                closure[room] |= {d} | below(d)
        return closure[room]

    return {room: below(room) for room in deps}


def upward_includes(root, rooms):
    src = root / "host" / "src"
    pattern = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
    for path in tracked_files(root, ["host/src"]):
        rel = path.relative_to(src)
        if len(rel.parts) < 2:
            continue  # main.cpp: above every room
        room = rel.parts[0]
        if room not in rooms:
            yield f"host/src/{rel}: folder '{room}' is no room of host/CMakeLists.txt"
            continue
        for number, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = pattern.match(text)
            if m and m.group(1) != room and m.group(1) not in rooms[room]:
                yield (f"host/src/{rel}:{number}: room '{room}' includes '{m.group(1)}/', "
                       f"which it does not depend on ({', '.join(sorted(rooms[room])) or 'nothing'})")


def remove_all_calls(root):
    call = re.compile(r"\bremove_all\s*\(")
    for path in tracked_files(root, ["host"]):
        if path.suffix not in CXX_SUFFIXES:
            continue
        for number, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if call.search(text.split("//", 1)[0]):
                yield (f"{path.relative_to(root)}:{number}: std::filesystem::remove_all "
                       f"(use remove_tree, util/file_tree.hpp: docs/cuda.md says why)")


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1]).resolve()
    rooms = read_rooms(argv[2])
    problems = [*long_files(root), *long_units(root), *long_functions(root), *long_python_functions(root),
                *upward_includes(root, rooms), *remove_all_calls(root)]
    for p in problems:
        print(p)
    print("check_house: the rules, and where each applies:", *RULES, sep="\n  ")
    print(f"check_house: {len(problems)} breach(es) of the house rules" if problems else "check_house: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
