"""Leave the instructor-only parts out of the student kit's Markdown files (make dist).

The full kit documents each thing once.  Where a document also names what the student
kit does not ship (tests/, the reference solutions, calibration), that text is marked,
and pack.sh removes it from the copy that ships, so the student kit never points at a
file it does not have.  Three marks, all HTML comments (invisible where Markdown is
rendered):

    <!-- instructor-only -->              on a line of its own: the lines from it to the
    ...                                   closing line, both marks included, are removed
    <!-- /instructor-only -->

    text <!-- instructor-only -->more text<!-- /instructor-only --> text
                                          inside a line (or across lines): the span from
                                          the opening to the closing mark is removed

    <!-- instructor-only: last column -->
                                          on a line of its own before a table (blank lines
                                          between allowed): the table's last column is
                                          removed, header and separator included

Usage: python3 instructor_only.py FILE...   rewrites each FILE in place; exit status 1,
with the file and line named, for an opening mark without its closing one or the reverse,
or a column mark with no table after it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

OPEN, CLOSE = "<!-- instructor-only -->", "<!-- /instructor-only -->"
COLUMN = "<!-- instructor-only: last column -->"
_BLOCK = re.compile(r"^" + re.escape(OPEN) + r"[ \t]*\n.*?^" + re.escape(CLOSE) + r"[ \t]*(\n|\Z)",
                    re.MULTILINE | re.DOTALL)
_SPAN = re.compile(re.escape(OPEN) + r".*?" + re.escape(CLOSE), re.DOTALL)
_LAST_CELL = re.compile(r"\|[^|]*\|[ \t]*$")


class MarkError(ValueError):
    """An unbalanced mark; the message names the line."""


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _drop_last_columns(text: str) -> str:
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() != COLUMN:
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            out.append(lines[j])
            j += 1
        if j == len(lines) or not lines[j].lstrip().startswith("|"):
            raise MarkError(f"line {i + 1}: {COLUMN} is not followed by a table")
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            out.append(_LAST_CELL.sub("|", lines[j]))
            j += 1
        i = j
    return "\n".join(out)


def strip(text: str) -> str:
    """text without its instructor-only parts (module docstring); MarkError for a mark
    left unbalanced, naming its line in text."""
    text = _drop_last_columns(text)
    text = _BLOCK.sub("", text)
    text = _SPAN.sub("", text)
    for mark in (OPEN, CLOSE):
        if (at := text.find(mark)) >= 0:
            raise MarkError(f"line {_line_of(text, at)} (after the marked parts before it were removed): "
                            f"{mark} has no {'closing' if mark == OPEN else 'opening'} mark")
    return text


def main(paths: list[str]) -> int:
    for path in map(Path, paths):
        try:
            path.write_text(strip(path.read_text()))
        except MarkError as err:
            print(f"make dist: {path}: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
