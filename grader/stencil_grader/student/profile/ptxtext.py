"""The profile's reader of BUILD_DIR/kernel.ptx, the PTX of the student's file: never a judge.

The lab's rules are judged on the machine code of the linked program (grading/sass.py).  The
profile (`make profile`, a diagnosis and no grade) reads each function's body in the PTX for the
address arithmetic of each access (access.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FUNC_HEADER = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(entry|func)\s+"
                          r"(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")


@dataclass
class PtxFunction:
    name: str
    kind: str                                   # "entry" (a kernel) or "func" (a device function)
    lines: list[tuple[int, str]] = field(default_factory=list)   # (line number, text without comment)


def parse_ptx(text: str) -> list[PtxFunction]:
    """The functions of PTX text, each with its body's lines; a prototype (`.extern .func ...;`)
    has no body and is none."""
    functions: list[PtxFunction] = []
    pending: PtxFunction | None = None
    current: PtxFunction | None = None
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split("//", 1)[0]
        if depth == 0:
            if m := _FUNC_HEADER.match(stripped):
                pending = PtxFunction(m.group(2), m.group(1))
            if pending and "{" in stripped:
                current, pending = pending, None
                functions.append(current)
            elif pending and stripped.rstrip().endswith(";"):
                pending = None
        elif current:
            current.lines.append((number, stripped))
        depth += stripped.count("{") - stripped.count("}")
        if depth <= 0:
            depth, current = 0, None
    return functions
