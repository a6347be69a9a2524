#!/usr/bin/python3
"""The lint of doc_commands.py: a page with one block of each kind, and exactly the blocks that
show output no test compares are named, by file:line; the transcripts are parsed as written."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_commands import shown_commands, unchecked_output  # noqa: E402

PAGE = """# A page

```sh
make            # commands only: fine
```

```
output nobody checks
```

- an item:

  ```
  $ echo indented
  indented
  ```

```text
bit 7 | 6 5 4 3 2 1 0
```

```python
x = f(1)        # the result, in words: fine
y = g(2)        # [1, 2, 3]
```

```console
more output nobody checks
```
"""


def main():
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, "page.md")
        with open(page, "w", encoding="utf-8") as f:
            f.write(PAGE)
        # Lines: 7 the untagged block's fence, 24 the Python result, 27 the console block's fence.
        got = unchecked_output(page, checked=True)
        expected_lines = [f"{page}:7:", f"{page}:24:", f"{page}:27:"]
        assert [p.split(" ")[0] for p in got] == expected_lines, got
        # The same page unchecked: the transcript (fence at 13) is named too.
        got = unchecked_output(page, checked=False)
        assert f"{page}:13: shows commands with output ($ lines), but no test runs this file" in got, got
        # The indented transcript is read without its indentation.
        assert shown_commands(page) == [(14, "echo indented", ["indented"])], shown_commands(page)
    print("doc_commands_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
