#!/usr/bin/python3
"""Docs that cannot drift: run every command a markdown file shows with its output, and compare.

A shown command is a line starting with "$ " inside a fenced code block (a trailing backslash
continues it on the next line); the lines after it, up to the next "$ " line or the end of the
block, are its expected output (standard output and standard error together, trailing blanks
ignored). In the expected output a line "..." stands for any number of lines, and "..." inside
a line for any text (the elision marker for times, paths and long tables). The commands of one
file run in order, in one working folder, through bash.

--lint FILE_OR_FOLDER (a folder: its *.md) checks that no fenced block there shows output that no
test compares. Every fenced block is one of:
  - a transcript: it has "$ " lines, and its file is run here or named by --checked-elsewhere;
  - commands without output: tagged sh (or bash);
  - code or a file's text: tagged with its language (cpp, cmake, toml, json, python, ...); a
    python block may not show results (a ">>> " line, or a comment that starts with a value:
    "# [", "# {", "# (", "# '", "# tensor(", "# array(");
  - a figure that is no program's output (a bit layout, pseudo-code, a folder tree), or the record
    of a measurement no test can repeat (a profile): tagged text.
An untagged block, or one tagged console or output, without "$ " lines is output no test checks.

usage: doc_commands.py --workdir DIR [--link NAME=TARGET]... [--path DIR]... [--env KEY=VALUE]...
                       [--lint FILE_OR_FOLDER]... [--checked-elsewhere FILE]... FILE.md...
(--link makes DIR/NAME a symbolic link to TARGET first, e.g. build=<the build folder>.)
Exit 0 when every command printed what its file shows and no linted block shows unchecked output;
1 otherwise, naming each file:line.
"""
import argparse
import os
import re
import subprocess
import sys


def fenced_blocks(path):
    """(line number of the opening fence, tag, [(line number, text)]) for each fenced block.
    A fence may be indented (inside a list item); its indentation is taken off the block's lines."""
    blocks, current = [], None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        stripped = line.lstrip(" ")
        if stripped.startswith("```"):
            if current is None:
                current = (i + 1, stripped[3:].strip(), [], len(line) - len(stripped))
            else:
                blocks.append(current[:3])
                current = None
        elif current is not None:
            indent = current[3]
            current[2].append((i + 1, line[indent:] if line[:indent].strip() == "" else line))
    return blocks


def shown_commands(path):
    """(line number, command, expected output lines) for each "$ " command in a fenced block."""
    commands = []
    for _, _, lines in fenced_blocks(path):
        current, k = None, 0
        while k < len(lines):
            number, line = lines[k]
            if line.startswith("$ "):
                if current:
                    commands.append(current)
                command = line[2:]
                while command.endswith("\\") and k + 1 < len(lines):
                    k += 1
                    command = command[:-1] + " " + lines[k][1].strip()
                current = (number, command, [])
            elif current:
                current[2].append(line.rstrip())
            k += 1
        if current:
            commands.append(current)
    return commands


PYTHON_RESULT = re.compile(r"^\s*>>> |#\s*(\[|\{|\(|'|tensor\(|array\()")


def unchecked_output(path, checked):
    """file:line and why, for each fenced block of `path` that shows output no test compares.
    `checked`: whether this file's transcripts are run (here or elsewhere)."""
    problems = []
    for number, tag, lines in fenced_blocks(path):
        language = tag.split()[0] if tag else ""
        if any(text.startswith("$ ") for _, text in lines):
            if not checked:
                problems.append(f"{path}:{number}: shows commands with output ($ lines), but no test runs this file")
        elif language in ("", "console", "output"):
            problems.append(f"{path}:{number}: shows text no test checks: make it a $ command whose output the "
                            "test compares, or tag it (sh: commands only; text: a figure; or its language)")
        elif language == "python":
            for line_number, text in lines:
                if PYTHON_RESULT.search(text):
                    problems.append(f"{path}:{line_number}: a Python block shows a result no test checks: "
                                    "print it in a $ command instead")
    return problems


def line_pattern(expected):
    return re.compile("".join(".*" if part == "..." else re.escape(part)
                              for part in re.split(r"(\.\.\.)", expected)) + r"\Z", re.S)


def matches(expected, got):
    """Whether the output lines `got` match the expected lines (with "..." wildcards)."""
    memo = {}

    def match(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(expected):
            result = j == len(got)
        elif expected[i] == "...":
            result = any(match(i + 1, k) for k in range(j, len(got) + 1))
        else:
            result = j < len(got) and line_pattern(expected[i]).match(got[j]) is not None and match(i + 1, j + 1)
        memo[(i, j)] = result
        return result

    return match(0, 0)


def trimmed(lines):
    lines = [l.rstrip() for l in lines]
    while lines and lines[-1] == "":
        lines.pop()
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--link", action="append", default=[], help="NAME=TARGET: DIR/NAME links to TARGET")
    parser.add_argument("--path", action="append", default=[], help="prepended to PATH")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the commands")
    parser.add_argument("--lint", action="append", default=[], help="a markdown file, or a folder of them, to lint")
    parser.add_argument("--checked-elsewhere", action="append", default=[],
                        help="a file whose $ commands another test runs")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    for item in args.link:
        name, _, target = item.partition("=")
        link = os.path.join(args.workdir, name)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(target, link)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(args.path + [env.get("PATH", "")])
    for item in args.env:
        key, _, value = item.partition("=")
        env[key] = value
    failures, count = 0, 0
    for path in args.files:
        for number, command, expected in shown_commands(path):
            count += 1
            run = subprocess.run(["bash", "-c", command], cwd=args.workdir, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
            got = trimmed(run.stdout.decode("utf-8", "replace").split("\n"))
            if not matches(trimmed(expected), got):
                failures += 1
                print(f"{path}:{number}: the output differs from the file's\n  $ {command}\n"
                      f"  exit {run.returncode}\n  expected:\n" + "".join(f"    {l}\n" for l in trimmed(expected)) +
                      "  got:\n" + "".join(f"    {l}\n" for l in got), file=sys.stderr)
    print(f"doc_commands: {count - failures} of {count} shown commands print what their files show")
    checked = {os.path.realpath(p) for p in args.files + args.checked_elsewhere}
    linted, problems = [], []
    for item in args.lint:
        linted += sorted(os.path.join(item, n) for n in os.listdir(item) if n.endswith(".md")) \
            if os.path.isdir(item) else [item]
    for path in linted:
        problems += unchecked_output(path, os.path.realpath(path) in checked)
    for problem in problems:
        print(problem, file=sys.stderr)
    if linted:
        print(f"doc_commands: {len(linted)} files linted, {len(problems)} blocks show output no test checks")
    return 1 if failures or problems or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
