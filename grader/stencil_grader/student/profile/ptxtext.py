"""The profile's reader of BUILD_DIR/kernel.ptx, the PTX of the student's file: never a judge.

The lab's rules are judged on the machine code of the linked program (grading/sass.py).  The
profile (`make profile`, a diagnosis and no grade) reads the PTX for what it says line by line:
each function's body with the source line of each instruction (with -lineinfo every
instruction follows a `.loc F L` line naming its line L of source file F, `.file F "path"`) and
the address arithmetic of each access (access.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_FUNC_HEADER = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(entry|func)\s+"
                          r"(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")
_SHARED_DECL = re.compile(r"^\s*(?:\.(?:extern|visible|weak)\s+)*\.shared((?:\s+\.\w+(?:\s+\d+)?)*)"
                          r"\s+([A-Za-z_$%][\w$]*)\s*(\[\s*(\d*)\s*\])?")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)(?:.*\binlined_at\s+(\d+)\s+(\d+))?")


@dataclass
class PtxFunction:
    name: str
    kind: str                                   # "entry" (a kernel) or "func" (a device function)
    lines: list[tuple[int, str]] = field(default_factory=list)   # (line number, text) of the body
    shared: list[tuple[str, int | None]] = field(default_factory=list)  # declared in the body: (name, bytes)
    header: list[str] = field(default_factory=list)  # between the name and the body: parameters and
                                                      # performance directives (.maxntid, .reqntid, ...)
    loc: dict[int, tuple[int, int]] = field(default_factory=dict)  # PTX line -> (.file number, source
                                                                    # line) of the last .loc before it


@dataclass
class PtxModule:
    functions: list[PtxFunction]
    shared: list[tuple[str, int | None, bool]]  # module scope: (name, bytes or None, extern)
    files: dict[int, str] = field(default_factory=dict)    # .file number -> source path

    def function(self, name: str) -> PtxFunction | None:
        return next((f for f in self.functions if f.name == name), None)

    def where(self, fn: PtxFunction, number: int) -> str:
        """'kernel.cu line 52 (kernel.ptx line 130)' for PTX line `number` of fn, from the
        last .loc before it; 'kernel.ptx line 130' without one (PTX built without -lineinfo)."""
        file_no, line = fn.loc.get(number, (0, 0))
        if line and file_no in self.files:
            return f"{Path(self.files[file_no]).name} line {line} (kernel.ptx line {number})"
        return f"kernel.ptx line {number}"


def parse_ptx(text: str) -> PtxModule:
    """Split PTX into functions (with their body lines and the source line of each) and
    module-scope shared variables."""
    functions: list[PtxFunction] = []
    module_shared = []
    files: dict[int, str] = {}
    pending: PtxFunction | None = None
    current: PtxFunction | None = None
    depth = 0
    loc = (0, 0)
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split("//", 1)[0]
        if m := _FILE.match(stripped):
            files[int(m.group(1))] = m.group(2)
        if depth == 0:
            loc = (0, 0)
            if m := _FUNC_HEADER.match(stripped):
                pending = PtxFunction(m.group(2), m.group(1))
                pending.header.append(stripped[m.end():].split("{", 1)[0])
            elif pending:
                pending.header.append(stripped.split("{", 1)[0])
            elif m := _SHARED_DECL.match(stripped):
                module_shared.append((m.group(2), _decl_bytes(m), ".extern" in stripped.split(".shared")[0]))
            if pending and "{" in stripped:
                current, pending = pending, None
                functions.append(current)
            elif pending and stripped.rstrip().endswith(";"):
                pending = None                  # a prototype (.extern .func ...;), no body
        elif current:
            if (m := _LOC.match(stripped)) and int(m.group(2)) > 0:     # line 0: made by the compiler
                loc = (int(m.group(1)), int(m.group(2)))
                if m.group(3) and m.group(3) != m.group(1):             # a library header inlined into
                    loc = (int(m.group(3)), int(m.group(4)))            # the student's line: that line
            current.lines.append((number, stripped))
            current.loc[number] = loc
            if m := _SHARED_DECL.match(stripped):
                current.shared.append((m.group(2), _decl_bytes(m)))
        depth += stripped.count("{") - stripped.count("}")
        if depth <= 0:
            depth, current = 0, None
    return PtxModule(functions, module_shared, files)


def _decl_bytes(m: re.Match) -> int | None:
    """Bytes of a `.shared .align A .b8 name[N]` declaration (None when unsized or not .b8)."""
    if m.group(4) and ".b8" in m.group(1):
        return int(m.group(4))
    return None
