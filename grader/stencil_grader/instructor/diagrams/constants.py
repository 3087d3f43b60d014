"""The labs' own constants, read from their sources, so that a diagram cannot disagree with them:
every `constexpr int NAME = EXPR[, NAME = EXPR];` and `#define NAME INT` whose value is an integer
expression of the ones before it (+ - * / % and parentheses; / as C's on non-negative operands).
"""

from __future__ import annotations

import re
from pathlib import Path

from ...base.files import display_path
from ...grading.source import strip_source

_CONSTEXPR = re.compile(r"\bconstexpr\s+int\s+([^;{}]+);")          # one or more NAME = EXPR, comma separated
_DECLARATOR = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*([\w\s+\-*/%()]+?)\s*$")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([0-9]+)[ \t]*$", re.MULTILINE)
_BLOCK = re.compile(r"\bdim3\s+block\s*\(\s*([0-9]+)\s*,\s*([0-9]+)\s*\)")


class DiagramError(Exception):
    """A lab source lacks a constant a diagram is drawn from; the message names the file and it."""


def _evaluate(expr: str, known: dict[str, int]) -> int | None:
    """The value of a C integer expression (digits, names, + - * / % and parentheses, as _DECLARATOR
    admits) over `known`, or None when it names anything else.  The text is the kit's own source,
    and the expression has no attribute, call target or builtin to reach."""
    if "**" in expr:                  # not C
        return None
    try:
        value = eval(expr.replace("/", "//"), {"__builtins__": {}}, dict(known))     # noqa: S307
    except Exception:                 # an unknown name, a call, a division by zero: not a constant here
        return None
    return value if type(value) is int else None


def read(path: Path) -> dict[str, int]:
    """{NAME: value} of every integer constant of a kernel file (module docstring), in order."""
    code = strip_source(Path(path).read_text(encoding="utf-8"))[0]
    events = [(m.start(), m.group(1), m.group(2)) for m in _DEFINE.finditer(code)]
    for m in _CONSTEXPR.finditer(code):
        for i, part in enumerate(m.group(1).split(",")):
            if (d := _DECLARATOR.match(part)):
                events.append((m.start() + i, d.group(1), d.group(2)))
    found: dict[str, int] = {}
    for _, name, expr in sorted(events):
        if (value := _evaluate(expr, found)) is not None:
            found[name] = value
    return found


def need(path: Path, *names: str) -> tuple[int, ...]:
    """The values of `names` in the kernel file `path`; DiagramError naming what is missing."""
    found = read(path)
    missing = [n for n in names if n not in found]
    if missing:
        raise DiagramError(f"{display_path(path)}: no integer constant {', '.join(missing)} "
                           "(the diagrams are drawn from it)")
    return tuple(found[n] for n in names)


def block_shape(path: Path) -> tuple[int, int]:
    """(blockDim.x, blockDim.y) of the launcher's `dim3 block(BX, BY)`; DiagramError when absent."""
    m = _BLOCK.search(strip_source(Path(path).read_text(encoding="utf-8"))[0])
    if not m:
        raise DiagramError(f"{display_path(path)}: no `dim3 block(BX, BY)` (the diagrams are drawn from it)")
    return int(m.group(1)), int(m.group(2))
