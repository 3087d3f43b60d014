"""What the grader reads in BUILD_DIR/kernel.ptx, the PTX of the student's file.

- The static stage's PTX checks (check_ptx): no integer div/rem (lab 3: a
  constraint, performance 0 when it fails), and whether any function declares
  shared memory (labs 2, 4, 5, 6, 8): a fast first signal for the student, never
  the verdict, which is the launch audit's (launches.py), on the kernels the
  launcher really started.
- What the launch audit needs of each launched kernel: its widest global load
  (cells per thread load), whether it reads shared memory (ld.shared: a tile
  written and never read is no tile), and its global accesses narrower than
  the fp32 grids (8- and 16-bit loads and stores, conversions to half or 8-bit
  floats: grids kept in another format between sweeps).

With -lineinfo (lab.mk builds the PTX so) every instruction follows a `.loc F L`
line naming its line L of source file F (`.file F "path"`), so a finding names
the line of kernel.cu, and the function's readable name (names.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..base.labspec import LabSpec
from .checks import MAX_REPORTED, StaticCheck
from .names import kernel_labels

INT_TYPES = {".s16", ".u16", ".s32", ".u32", ".s64", ".u64"}
# ---------------------------------------------------------------- PTX

_FUNC_HEADER = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(entry|func)\s+"
                          r"(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")
_SHARED_DECL = re.compile(r"^\s*(?:\.(?:extern|visible|weak)\s+)*\.shared((?:\s+\.\w+(?:\s+\d+)?)*)"
                          r"\s+([A-Za-z_$%][\w$]*)\s*(\[\s*(\d*)\s*\])?")
_DIVREM = re.compile(r"^\s*(?:@!?%?\w+\s+)?((?:div|rem)(?:\.\w+)+)")
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


def integer_div_rem(module: PtxModule) -> list[tuple[str, str, int]]:
    """(instruction, function, PTX line) for each integer div/rem instruction."""
    found = []
    for fn in module.functions:
        for number, line in fn.lines:
            m = _DIVREM.match(line)
            if m and INT_TYPES & {"." + s for s in m.group(1).split(".")[1:]}:
                found.append((m.group(1), fn.name, number))
    return found


def shared_users(module: PtxModule) -> list[str]:
    """One phrase per function that declares or references shared memory."""
    users = []
    for fn in module.functions:
        what = [f"{name} ({size} bytes, static)" if size is not None else f"{name} (static)"
                for name, size in fn.shared]
        for name, size, extern in module.shared:
            if any(re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", text) for _, text in fn.lines):
                what.append(f"{name} ({'dynamic, extern' if extern else f'{size} bytes, module scope'})")
        if what:
            kind = "kernel" if fn.kind == "entry" else "device function"
            users.append(f"{kind} {fn.name}: {', '.join(what)}")
    return users


def check_ptx(spec: LabSpec, build_dir: Path) -> list[StaticCheck]:
    """The PTX checks lab.json asks for (none when it asks for none): no div/rem (severity
    "constraint") and the shared-memory signal (severity "signal": it costs nothing by itself)."""
    c = spec.constraints
    wanted = [(n, sev) for n, sev, on in (("no div/rem", "constraint", c.no_div_rem),
                                          ("shared memory", "signal", c.shared_memory)) if on]
    checks: list[StaticCheck] = []
    if wanted:
        ptx_path = Path(build_dir) / "kernel.ptx"
        try:
            module = parse_ptx(ptx_path.read_text(errors="replace"))
        except OSError as err:
            return [StaticCheck(n, "fail", sev, f"cannot read {ptx_path} ({err.strerror or err}): the "
                                "constraint cannot be verified") for n, sev in wanted]
        if c.no_div_rem:
            checks.append(_check_div_rem(module))
        if c.shared_memory:
            checks.append(_check_shared(module))
    return checks


# ---------------------------------------------------------------- what the launch audit needs
#
# Lab 6's plane constraint is judged on the launch (launches.py, from the bench's CUPTI
# records); from the PTX it needs each kernel's widest global load: 4 bytes for float, 16 for
# float4 (ld.global...v4.f32), or a cp.async of 16 bytes.  A thread that loads its cells of a
# plane W bytes at a time owns W/4 cells of each row it loads.

_OPCODE = re.compile(r"^\s*\{?\s*(?:@!?%?\w+\s+)?([a-z][\w.:]*)")      # `{ cvt...}`: inline asm
_VECTOR = re.compile(r"^v(\d+)$")
_SCALAR_TYPE = re.compile(r"^[bfsu](\d+)$")
_CP_ASYNC_SIZE = re.compile(r"\]\s*,\s*(\d+)\s*[,;]")
_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$%][\w$]*)")


def global_load_bytes(line: str) -> int:
    """Bytes one global load instruction of a PTX line moves per thread (0 when it is not one).

    ld/ldu with the .global state space: vector count times element size
    (ld.global.nc.v4.f32: 16); cp.async ... .shared.global with a constant
    size: that size.  Bulk copies (cp.async.bulk, sized by a register) count 0.
    """
    m = _OPCODE.match(line)
    if not m:
        return 0
    parts = m.group(1).split(".")
    if parts[0] in ("ld", "ldu") and "global" in parts:
        count = next((int(v.group(1)) for p in parts if (v := _VECTOR.match(p))), 1)
        bits = next((int(t.group(1)) for p in reversed(parts) if (t := _SCALAR_TYPE.match(p))), 32)
        return count * bits // 8
    if parts[:2] == ["cp", "async"] and "global" in parts and "bulk" not in parts:
        size = _CP_ASYNC_SIZE.search(line)
        return int(size.group(1)) if size else 0
    return 0


def _callees(fn: PtxFunction, by_name: dict[str, PtxFunction]) -> list[PtxFunction]:
    """fn and every device function it calls, directly or not."""
    seen, todo = {fn.name: fn}, [fn]
    while todo:
        for _, text in todo.pop().lines:
            for m in _CALL.finditer(text):
                callee = by_name.get(m.group(1))
                if callee and callee.name not in seen:
                    seen[callee.name] = callee
                    todo.append(callee)
    return list(seen.values())


def widest_global_load(fn: PtxFunction, module: PtxModule) -> int:
    """Bytes of the widest global load in kernel fn and the device functions it calls (0: none)."""
    by_name = {f.name: f for f in module.functions}
    return max((global_load_bytes(text) for f in _callees(fn, by_name) for _, text in f.lines), default=0)


_NARROW_TYPES = {"u8", "s8", "b8", "u16", "s16", "b16", "f16", "bf16", "f16x2", "bf16x2", "e4m3", "e5m2",
                 "e4m3x2", "e5m2x2", "e2m1x2", "e2m3x2", "e3m2x2", "ue8m0x2"}
_NARROW_FLOATS = {"f16", "bf16", "f16x2", "bf16x2", "e4m3x2", "e5m2x2", "e2m1x2", "e2m3x2", "e3m2x2", "ue8m0x2"}
_OTHER_SPACES = {"local", "shared", "param", "const", "tex"}


def _spaces(parts: list[str]) -> list[str]:
    """The state spaces an opcode names, in order ('shared::cta' counts as 'shared')."""
    return [p.split("::")[0] for p in parts if p.split("::")[0] in _OTHER_SPACES | {"global"}]


def _instructions(fn: PtxFunction, module: PtxModule):
    """(function name, PTX line, opcode, its dot-separated parts, its state spaces) of every
    instruction of kernel fn and of the device functions it calls."""
    by_name = {f.name: f for f in module.functions}
    for f in _callees(fn, by_name):
        for number, text in f.lines:
            if m := _OPCODE.match(text):
                parts = m.group(1).split(".")
                yield f.name, number, m.group(1), parts, _spaces(parts)


def reads_shared(fn: PtxFunction, module: PtxModule) -> bool:
    """Whether kernel fn (or a device function it calls) reads shared memory: a load, matrix
    load, atomic or reduction on the .shared state space, a copy out of shared memory
    (cp.async.bulk ... .global.shared), or a generic load in a function that takes the
    generic address of shared memory (cvta.shared)."""
    generic_shared, generic_load = set(), set()
    for name, _, _, parts, spaces in _instructions(fn, module):
        if parts[0] in ("ld", "ldu", "ldmatrix", "atom", "red") and "shared" in spaces:
            return True
        if parts[0] == "cp" and len(spaces) == 2 and spaces[1] == "shared":
            return True                         # destination first: the source is shared memory
        if parts[0] == "cvta" and "shared" in spaces:
            generic_shared.add(name)
        if parts[0] in ("ld", "ldu") and not spaces:
            generic_load.add(name)
    return bool(generic_shared & generic_load)


def narrow_accesses(fn: PtxFunction, module: PtxModule) -> list[tuple[str, str, int]]:
    """(instruction, function, PTX line) of each access to global memory narrower than a float
    in kernel fn and the device functions it calls: a load, store, atomic or reduction of 8- or
    16-bit elements (ld.global.u8, st.global.b16, st.global.v4.u8, red.global.add.f16) on
    global memory or through a generic address, and a conversion to a half or 8-bit float
    format (cvt.rn.f16.f32, cvt.rn.bf16x2.f32).  Grids kept in such a format between sweeps
    move fewer bytes than the fp32 the lab asks for."""
    found = []
    for name, number, opcode, parts, spaces in _instructions(fn, module):
        memory = parts[0] in ("ld", "ldu", "st", "atom", "red") and _NARROW_TYPES & set(parts) \
            and not set(spaces) & _OTHER_SPACES
        if memory or parts[0] == "cvt" and len(parts) >= 3 and parts[-2] in _NARROW_FLOATS:
            found.append((opcode, name, number))
    return found


def _check_div_rem(module: PtxModule) -> StaticCheck:
    found = integer_div_rem(module)
    name = "no div/rem"
    if not found:
        return StaticCheck(name, "pass", "constraint", "no integer div or rem instruction in the PTX")
    shown = kernel_labels(sorted({fn for _, fn, _ in found}))
    by_name = {f.name: f for f in module.functions}
    details = [f"{module.where(by_name[fn], line)}: {insn} in {shown[fn]}" for insn, fn, line in found[:MAX_REPORTED]]
    return StaticCheck(name, "fail", "constraint",
                       f"{len(found)} integer div/rem instruction(s) in the PTX (from / or % on "
                       "integers); this lab asks for none: performance gets 0", details)


def _check_shared(module: PtxModule) -> StaticCheck:
    users = shared_users(module)
    name = "shared memory"
    if users:
        return StaticCheck(name, "pass", "signal", "shared memory declared (the launch audit judges the "
                           "tile on the kernels your launcher starts)", users)
    return StaticCheck(name, "fail", "signal",
                       "no function declares shared memory (__shared__): this lab asks every kernel your "
                       "launcher starts to stage its tile in shared memory, which the launch audit will "
                       "find missing (performance 0)")
