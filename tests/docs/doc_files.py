#!/usr/bin/python3
"""The files a markdown page shows: write each fenced block that follows a line "**NAME**" (blank
lines between allowed) to DIR/NAME, exactly as the page shows it, so a test builds the page's own
code rather than a copy (tests/out_of_tree: docs/writing-a-plugin.md's nf4 project).

usage: doc_files.py FILE.md DIR
Prints each file written; exit 1 when the page shows no such file.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_commands import fenced_blocks  # noqa: E402  (one parser for both)

FILE_TITLE = re.compile(r"^\*\*([A-Za-z0-9_.-]+)\*\*$")


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    page, out = sys.argv[1], sys.argv[2]
    with open(page, encoding="utf-8") as f:
        lines = f.read().split("\n")
    written = 0
    for number, _, block in fenced_blocks(page):
        k = number - 2  # the line above the fence (0-based)
        while k >= 0 and lines[k].strip() == "":
            k -= 1
        title = FILE_TITLE.match(lines[k].strip()) if k >= 0 else None
        if not title:
            continue
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, title.group(1)), "w", encoding="utf-8") as f:
            f.write("".join(text + "\n" for _, text in block))
        print(os.path.join(out, title.group(1)))
        written += 1
    if written == 0:
        print(f"{page}: shows no file (a fenced block after a line **NAME**)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
