"""Static checks: what the student file calls, and what its PTX contains.

Two kinds, with different costs (the policy itself is in score.py):

- forbidden calls (severity "forbidden"): identifiers the student's kernel.cu
  may not use, found after C/C++ comments and string/char literals are blanked
  out, plus `#include` of the harness.  The lab gets 0 and is not run.
- PTX constraints (severity "constraint") read from BUILD_DIR/kernel.ptx:
  no integer div/rem (lab 3), shared memory used (labs 2, 4, 5, 6).
  Correctness still runs and counts; performance gets 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .labspec import LabSpec

MAX_REPORTED = 20

_COPY = ("memory copy: the launcher computes on the GPU, in the device buffers it is given "
         "(a device-to-host copy would move the work to the CPU; the grader does every host copy)")
_SYNC = ("host synchronisation: launchers are asynchronous on their stream; the harness "
         "synchronises and times")
_HOSTMEM = "host or managed memory: the launcher works on the device memory the harness allocated"
_DEVICE = "device control: the harness chose the device and owns its state"
_ALLOC = ("allocation: a launcher allocates nothing (on a hot path it would cost more than the sweep); "
          "every buffer comes from the harness, and scratch space can be a static __device__ array")
_PROCESS = "starting a process: a kernel file runs no other program"

#: Identifiers every lab forbids, with the reason a student sees.
DEFAULT_FORBIDDEN: dict[str, str] = {
    "cudaDeviceSynchronize": _SYNC, "cudaStreamSynchronize": _SYNC, "cudaEventSynchronize": _SYNC,
    "cudaMallocManaged": _HOSTMEM, "cudaMallocHost": _HOSTMEM, "cudaHostAlloc": _HOSTMEM,
    "cudaHostRegister": _HOSTMEM,
    "cudaDeviceReset": _DEVICE, "cudaSetDevice": _DEVICE,
    "malloc": _ALLOC, "calloc": _ALLOC, "realloc": _ALLOC,
    "cudaMalloc": _ALLOC, "cudaMallocAsync": _ALLOC, "cudaFree": _ALLOC, "cudaFreeAsync": _ALLOC,
    "system": _PROCESS, "popen": _PROCESS, "fork": _PROCESS,
    "fopen": "file access: a kernel file reads and writes no files",
    "getenv": "reading the environment: the grader's settings are not the kernel's business",
    "dlopen": "loading a library at run time: a kernel file uses only what the build links",
}
#: Identifier prefixes every lab forbids.
DEFAULT_FORBIDDEN_PREFIXES: dict[str, str] = {
    "cudaMemcpy": _COPY,
    "harness_": "a harness function: the student file may not call into the grader",
    "cpu_": "a harness CPU function (the CPU reference among them): the answer must be computed on the GPU",
}
_HARNESS_INCLUDE = ("the harness's header: the student file sees only stencil_lab.h and CUDA's "
                    "headers, never the grader's internals")
_LAB_FORBIDDEN = "forbidden in this lab (lab.json constraints.forbidden_calls)"

INT_TYPES = {".s16", ".u16", ".s32", ".u32", ".s64", ".u64"}


@dataclass
class StaticCheck:
    """One static check.

    status: "pass", "fail" or "skipped"; severity: what a failure costs,
    "forbidden" (lab gets 0, not run) or "constraint" (performance gets 0).
    details: one line per finding ("line 12: cudaMemcpy: memory copy: ...").
    """

    name: str
    status: str
    severity: str
    message: str
    details: list[str] = field(default_factory=list)


@dataclass
class StaticResult:
    checks: list[StaticCheck] = field(default_factory=list)

    def failed(self, severity: str) -> list[StaticCheck]:
        return [c for c in self.checks if c.status == "fail" and c.severity == severity]

    @property
    def forbidden(self) -> bool:
        return bool(self.failed("forbidden"))

    @property
    def constraint_failed(self) -> bool:
        return bool(self.failed("constraint"))


# ---------------------------------------------------------------- C/C++ source

_RAW_PREFIX = re.compile(r"(?:^|[^A-Za-z0-9_])(?:u8|u|U|L)?R$")
_NUMBER_START = re.compile(r"[A-Za-z0-9_.']*$")


def strip_source(src: str) -> tuple[str, str]:
    """Blank out C/C++ comments, and also string and character literals.

    Returns (without_comments, without_comments_and_literals).  Both have the
    length and line structure of src (every newline kept), so line numbers carry
    over.  A literal keeps its quotes; its contents become spaces.
    """
    code = list(src)      # comments blanked
    bare = list(src)      # comments and literal contents blanked
    i, n = 0, len(src)

    def blank(start: int, end: int, also_code: bool) -> None:
        for k in range(start, end):
            if src[k] != "\n":
                bare[k] = " "
                if also_code:
                    code[k] = " "

    while i < n:
        ch = src[i]
        nxt = src[i + 1] if i + 1 < n else ""
        if ch == "/" and nxt == "/":
            end = i
            while end < n and src[end] != "\n":
                end += 2 if src[end] == "\\" and end + 1 < n else 1
            blank(i, end, True)
            i = end
        elif ch == "/" and nxt == "*":
            end = src.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end, True)
            i = end
        elif ch == '"' and _RAW_PREFIX.search(src[max(0, i - 4):i]):
            open_paren = src.find("(", i)
            delim = src[i + 1:open_paren] if open_paren >= 0 else ""
            close = src.find(")" + delim + '"', open_paren + 1) if open_paren >= 0 else -1
            end = n if close < 0 else close + len(delim) + 2
            blank(i + 1, end - 1, False)
            i = end
        elif ch in "\"'":
            if ch == "'" and _is_digit_separator(src, i):
                i += 1
                continue
            end = i + 1
            while end < n and src[end] != ch and src[end] != "\n":
                end += 2 if src[end] == "\\" else 1
            blank(i + 1, min(end, n), False)
            i = end + 1
        else:
            i += 1
    return "".join(code), "".join(bare)


def _is_digit_separator(src: str, i: int) -> bool:
    """True for the ' in 1'000'000 (C++14): the token before it starts with a digit."""
    token = _NUMBER_START.search(src[max(0, i - 64):i]).group(0)
    return bool(token) and token[0].isdigit()


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]*)[>"]', re.MULTILINE)
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def forbidden_reason(identifier: str, extra: tuple[str, ...] = ()) -> str | None:
    """Why identifier is forbidden in a student file, or None when it is allowed."""
    if identifier in DEFAULT_FORBIDDEN:
        return DEFAULT_FORBIDDEN[identifier]
    for prefix, reason in DEFAULT_FORBIDDEN_PREFIXES.items():
        if identifier.startswith(prefix):
            return reason
    if identifier in extra:
        return _LAB_FORBIDDEN
    return None


def find_forbidden(src: str, extra: tuple[str, ...] = ()) -> list[tuple[int, str, str]]:
    """(line, what, why) for each forbidden identifier or include in C/C++ source src.

    Comments and string/char literals do not count; preprocessor lines do
    (a #define of a forbidden name is as good as a call).
    """
    code, bare = strip_source(src)
    findings = []
    for m in _INCLUDE.finditer(code):
        target = m.group(2).strip()
        if Path(target).name == "harness.h":
            close = ">" if m.group(1) == "<" else '"'
            shown = f"#include {m.group(1)}{target}{close}"
            findings.append((_line_of(code, m.start()), shown, _HARNESS_INCLUDE))
    for m in _IDENT.finditer(bare):
        reason = forbidden_reason(m.group(0), extra)
        if reason:
            findings.append((_line_of(bare, m.start()), m.group(0), reason))
    findings.sort()
    return findings


def check_source(source: Path, extra: tuple[str, ...] = ()) -> StaticCheck:
    """The "forbidden calls" check of one student file."""
    name = "forbidden calls"
    try:
        src = Path(source).read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        return StaticCheck(name, "fail", "forbidden",
                           f"cannot read the student file {source}: {err.strerror or err}")
    findings = find_forbidden(src, extra)
    if not findings:
        return StaticCheck(name, "pass", "forbidden", f"none in {Path(source).name}")
    details = [f"line {line}: {what}: {why}" for line, what, why in findings[:MAX_REPORTED]]
    if len(findings) > MAX_REPORTED:
        details.append(f"... and {len(findings) - MAX_REPORTED} more")
    return StaticCheck(name, "fail", "forbidden",
                       f"{len(findings)} forbidden use(s) in {Path(source).name}; the lab is not run",
                       details)


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
    if c.max_shared_planes is not None:
        checks.append(StaticCheck("max shared planes", "skipped", "constraint",
                                  f"at most {c.max_shared_planes} plane(s) of shared memory: "
                                  "not implemented yet, not checked"))
    return checks


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


def run_static(spec: LabSpec, source: Path, build_dir: Path) -> StaticResult:
    """Every static check of one lab build."""
    return StaticResult([check_source(source, spec.constraints.forbidden_calls)]
                        + check_ptx(spec, build_dir))
