"""PTX constraints, read from BUILD_DIR/kernel.ptx: no integer div/rem (lab 3), shared memory
used (labs 2, 4, 5, 6, 8), and what the launch audit needs of each kernel (its widest global load).

A failed constraint has severity "constraint": correctness still runs and counts; performance gets 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..base.labspec import LabSpec
from .build import short_name
from .checks import MAX_REPORTED, StaticCheck

INT_TYPES = {".s16", ".u16", ".s32", ".u32", ".s64", ".u64"}
# ---------------------------------------------------------------- PTX

_FUNC_HEADER = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(entry|func)\s+"
                          r"(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")
_SHARED_DECL = re.compile(r"^\s*(?:\.(?:extern|visible|weak)\s+)*\.shared((?:\s+\.\w+(?:\s+\d+)?)*)"
                          r"\s+([A-Za-z_$%][\w$]*)\s*(\[\s*(\d*)\s*\])?")
_DIVREM = re.compile(r"^\s*(?:@!?%?\w+\s+)?((?:div|rem)(?:\.\w+)+)")


@dataclass
class PtxFunction:
    name: str
    kind: str                                   # "entry" (a kernel) or "func" (a device function)
    lines: list[tuple[int, str]] = field(default_factory=list)   # (line number, text) of the body
    shared: list[tuple[str, int | None]] = field(default_factory=list)  # declared in the body: (name, bytes)
    header: list[str] = field(default_factory=list)  # between the name and the body: parameters and
                                                      # performance directives (.maxntid, .reqntid, ...)


@dataclass
class PtxModule:
    functions: list[PtxFunction]
    shared: list[tuple[str, int | None, bool]]  # module scope: (name, bytes or None, extern)


def parse_ptx(text: str) -> PtxModule:
    """Split PTX into functions (with their body lines) and module-scope shared variables."""
    functions: list[PtxFunction] = []
    module_shared = []
    pending: PtxFunction | None = None
    current: PtxFunction | None = None
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split("//", 1)[0]
        if depth == 0:
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
            current.lines.append((number, stripped))
            if m := _SHARED_DECL.match(stripped):
                current.shared.append((m.group(2), _decl_bytes(m)))
        depth += stripped.count("{") - stripped.count("}")
        if depth <= 0:
            depth, current = 0, None
    return PtxModule(functions, module_shared)


def _decl_bytes(m: re.Match) -> int | None:
    """Bytes of a `.shared .align A .b8 name[N]` declaration (None when unsized or not .b8)."""
    if m.group(4) and ".b8" in m.group(1):
        return int(m.group(4))
    return None


def integer_div_rem(module: PtxModule) -> list[tuple[str, str, int]]:
    """(instruction, function, line) for each integer div/rem instruction."""
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
    """The PTX constraints lab.json asks for (none when it asks for none)."""
    c = spec.constraints
    wanted = [n for n, on in (("no div/rem", c.no_div_rem), ("shared memory", c.shared_memory)) if on]
    checks: list[StaticCheck] = []
    if wanted:
        ptx_path = Path(build_dir) / "kernel.ptx"
        try:
            module = parse_ptx(ptx_path.read_text(errors="replace"))
        except OSError as err:
            return [StaticCheck(n, "fail", "constraint",
                                f"cannot read {ptx_path} ({err.strerror or err}): the constraint "
                                "cannot be verified") for n in wanted]
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

_OPCODE = re.compile(r"^\s*(?:@!?%?\w+\s+)?([a-z][\w.:]*)")
_VECTOR = re.compile(r"^v(\d+)$")
_SCALAR_TYPE = re.compile(r"^[bfsu](\d+)$")
_CP_ASYNC_SIZE = re.compile(r"\]\s*,\s*(\d+)\s*[,;]")
_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$%][\w$]*)")
_NTID = re.compile(r"\.(reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


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


def block_threads(fn: PtxFunction) -> tuple[int, str] | None:
    """(threads per block, how it is known) from a kernel's .reqntid or .maxntid, else None."""
    found = {}
    for m in _NTID.finditer(" ".join(fn.header)):
        dims = [int(d) for d in m.groups()[1:] if d is not None]
        found[m.group(1)] = dims
    for directive, source in (("reqntid", "__block_size__"), ("maxntid", "__launch_bounds__")):
        if directive in found:
            dims = found[directive]
            threads = 1
            for d in dims:
                threads *= d
            return threads, f".{directive} {'x'.join(map(str, dims))}, from {source}"
    return None


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


_TEMPLATE_ARGS = re.compile(r"I((?:L[ibj]-?\d+E)+)E")
_INT_ARG = re.compile(r"L[ibj](-?\d+)E")


def kernel_label(mangled: str) -> str:
    """'tiled' for _Z5tiledPKfPfi, 'sweep<4>' for a kernel template with integer arguments."""
    shown = short_name(mangled)
    m = re.match(r"_Z(\d+)", mangled)
    if m and shown != mangled:
        rest = mangled[m.end() + int(m.group(1)):]
        if t := _TEMPLATE_ARGS.match(rest):
            shown += "<" + ", ".join(_INT_ARG.findall(t.group(1))) + ">"
    return shown


def _check_div_rem(module: PtxModule) -> StaticCheck:
    found = integer_div_rem(module)
    name = "no div/rem"
    if not found:
        return StaticCheck(name, "pass", "constraint", "no integer div or rem instruction in the PTX")
    details = [f"kernel.ptx line {line}: {insn} in {fn}" for insn, fn, line in found[:MAX_REPORTED]]
    return StaticCheck(name, "fail", "constraint",
                       f"{len(found)} integer div/rem instruction(s) in the PTX (from / or % on "
                       "integers); this lab asks for none: performance gets 0", details)


def _check_shared(module: PtxModule) -> StaticCheck:
    users = shared_users(module)
    name = "shared memory"
    if users:
        return StaticCheck(name, "pass", "constraint", "shared memory declared", users)
    return StaticCheck(name, "fail", "constraint",
                       "no kernel declares shared memory (__shared__); this lab asks for a "
                       "shared-memory tile: performance gets 0")
