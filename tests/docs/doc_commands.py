#!/usr/bin/python3
"""Docs that cannot drift: run every command a markdown file shows with its output, and compare.

A shown command is a line starting with "$ " inside a fenced code block (a trailing backslash
continues it on the next line); the lines after it, up to the next "$ " line or the end of the
block, are its expected output (standard output and standard error together, trailing blanks
ignored). In the expected output a line "..." stands for any number of lines, and "..." inside
a line for any text. The commands of one file run in order, in one working folder, through bash.

usage: doc_commands.py --workdir DIR [--link NAME=TARGET]... [--path DIR]... [--env KEY=VALUE]... FILE.md...
(--link makes DIR/NAME a symbolic link to TARGET first, e.g. build=<the build folder>.)
Exit 0 when every command printed what its file shows; 1 otherwise, naming each file:line.
"""
import argparse
import os
import re
import subprocess
import sys


def shown_commands(path):
    """(line number, command, expected output lines) for each "$ " command in a fenced block."""
    commands, in_block, current = [], False, None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            if current:
                commands.append(current)
                current = None
            in_block = not in_block
        elif in_block and line.startswith("$ "):
            if current:
                commands.append(current)
            number, command = i + 1, line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            current = (number, command, [])
        elif in_block and current:
            current[2].append(line.rstrip())
        i += 1
    return commands


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
    return 1 if failures or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
