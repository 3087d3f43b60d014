"""The lexical rules on the student's source, read with comments and literals blanked (strip_source).

check_source: an `#include` of the harness is forbidden; a copy to the host named on its line, a
cudaMemcpy*Async of unnamed direction and a #define of a cudaMemcpy name are only a "signal" (the
launch audit judges where copies go).  The calls the file makes are judged on the compiled object
(symbols.py).  check_notes (status "warn", no GPU needed): a TODO(labNN) still there, a constant
block over 1024 threads.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from .checks import MAX_REPORTED, StaticCheck

_TO_HOST = ("a copy to or from host memory: the launcher computes on the GPU, in the device buffers it "
            "is given (a device-to-host copy would move the work to the CPU; the grader does every "
            "host copy)")
_UNNAMED_KIND = ("a cudaMemcpy*Async must name its direction, cudaMemcpyDeviceToDevice (or "
                 "cudaMemcpyHostToDevice for a few coefficients): a launcher copies nothing to the host")
_REDEFINED = "a #define of a cudaMemcpy name hides a copy's direction"
#: CUDA's copy directions that reach host memory (or may: cudaMemcpyDefault follows the pointers).
HOST_COPY_KINDS = ("cudaMemcpyDeviceToHost", "cudaMemcpyHostToHost", "cudaMemcpyDefault")
#: Directions a cudaMemcpy*Async call may name.
ALLOWED_COPY_KINDS = ("cudaMemcpyDeviceToDevice", "cudaMemcpyHostToDevice")
_HARNESS_INCLUDE = ("the harness's header: the student file sees only stencil_lab.h and CUDA's "
                    "headers, never the grader's internals")

# ---------------------------------------------------------------- C/C++ source

#: One token the rules must not read inside: a comment; a number (so that the ' of 1'000 starts no
#: character literal); a raw string R"delim(...)delim" (prefixes u8, u, U, L); a string or character
#: literal, to its closing quote or its line's end (a backslash escapes the next character, a newline too).
_LEXEME = re.compile(r"""
    (?P<comment>//(?:\\.|[^\\\n])*\\?|/\*.*?(?:\*/|\Z))
  | (?<![A-Za-z0-9_.'])[0-9][A-Za-z0-9_.']*
  | (?<![A-Za-z0-9_])(?:u8|u|U|L)?R"(?:(?P<raw>(?P<delim>[^(]*)\(.*?\)(?P=delim))"|(?P<open_raw>.*))
  | (?P<quote>["'])(?P<literal>(?:\\.|(?!(?P=quote))[^\\\n])*\\?)(?P=quote)?""", re.S | re.X)


def strip_source(src: str) -> tuple[str, str]:
    """(src without comments, src without comments and literals' contents), blanked with spaces: both
    keep src's length and every newline, so offsets and line numbers carry over."""
    code, bare = list(src), list(src)
    for m in _LEXEME.finditer(src):
        if m.group("comment") is not None:
            start, end, also_code = m.start(), m.end(), True
        elif m.group("raw") is not None or m.group("quote"):
            start, end, also_code = *m.span("raw" if m.group("raw") is not None else "literal"), False
        elif m.group("open_raw") is not None:          # unterminated: blanked to the last character but one
            start, end, also_code = m.start("open_raw"), len(src) - 1, False
        else:
            continue                                   # a number
        for k in range(start, end):
            if src[k] != "\n":
                bare[k] = " "
                if also_code:
                    code[k] = " "
    return "".join(code), "".join(bare)


def header_code(header: Path) -> str:
    """A C header's code, comments blanked (strip_source) and preprocessor lines dropped; OSError
    when it cannot be read."""
    code = strip_source(Path(header).read_text(errors="replace"))[0]
    return re.sub(r"^[ \t]*#.*$", "", code, flags=re.MULTILINE)


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]*)[>"]', re.MULTILINE)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(cudaMemcpy\w*)", re.MULTILINE)
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_ASYNC_COPY = re.compile(r"\b(cudaMemcpy\w*Async(?:_ptsz)?)\s*\(")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _arguments(text: str) -> list[str]:
    """text, what follows an opening parenthesis, split at its top-level commas, to the parenthesis that
    closes it (to its end when none does)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth < 0 or ch == "," and depth == 0:
            parts, start = parts + [text[start:i]], i + 1
        if depth < 0:
            return parts
    return parts + [text[start:]]


def lexical_findings(src: str) -> list[tuple[int, str, str]]:
    """(line, what, why) for each use the lexical rules forbid in C/C++ source src, in order (comments
    and literals do not count; preprocessor lines do)."""
    code, bare = strip_source(src)
    findings = [(_line_of(code, m.start()), "#include {}{}{}".format(m.group(1), m.group(2).strip(),
                                                                       ">" if m.group(1) == "<" else '"'),
                 _HARNESS_INCLUDE) for m in _INCLUDE.finditer(code) if Path(m.group(2).strip()).name == "harness.h"]
    findings += [(_line_of(bare, m.start()), f"#define {m.group(1)}", _REDEFINED) for m in _DEFINE.finditer(bare)]
    findings += [(_line_of(bare, m.start()), m.group(0), _TO_HOST) for m in _IDENT.finditer(bare)
                 if m.group(0) in HOST_COPY_KINDS]
    findings += [(_line_of(bare, m.start()), m.group(1), _UNNAMED_KIND) for m in _ASYNC_COPY.finditer(bare)
                 if not set(_IDENT.findall(" ".join(_arguments(bare[m.end():])))) & {*ALLOWED_COPY_KINDS, *HOST_COPY_KINDS}]
    return sorted(findings)


def check_source(source: Path) -> StaticCheck:
    """The "source rules" check of one student file (the lexical rules above): severity
    "forbidden" when the harness is included, else "signal" (the copies' early message)."""
    name = "source rules"
    try:
        src = Path(source).read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        return StaticCheck(name, "fail", "forbidden",
                           f"cannot read the student file {source}: {err.strerror or err}")
    findings = lexical_findings(src)
    if not findings:
        return StaticCheck(name, "pass", "forbidden", f"no copy to the host, copy of unnamed direction, #define of a "
                           f"cudaMemcpy name or harness include in {Path(source).name} (the calls it makes: "
                           "linked symbols)")
    details = [f"line {line}: {what}: {why}" for line, what, why in findings[:MAX_REPORTED]] \
        + ([f"... and {len(findings) - MAX_REPORTED} more"] if len(findings) > MAX_REPORTED else [])
    if all(why != _HARNESS_INCLUDE for _, _, why in findings):
        return StaticCheck(name, "fail", "signal",
                           f"{len(findings)} copy or copies in {Path(source).name} that may reach host memory: "
                           "the launch audit will judge where they go (performance 0 if they leave the GPU)",
                           details)
    return StaticCheck(name, "fail", "forbidden",
                       f"{len(findings)} forbidden use(s) in {Path(source).name}; the lab is not run",
                       details)


# ---------------------------------------------------------------- notes (no grade)

MAX_THREADS_PER_BLOCK = 1024
_TODO = re.compile(r"\bTODO\((lab\d\d)\)")
_CONSTANT = re.compile(r"^[ \t]*(?:#[ \t]*define[ \t]+(\w+)[ \t]+\(?(\d+)[uU]?\)?[ \t]*$"
                       r"|(?:static[ \t]+)?(?:constexpr|const)[ \t]+(?:unsigned[ \t]+)?(?:int|unsigned)[ \t]+(\w+)"
                       r"[ \t]*=[ \t]*(\d+)[uU]?[ \t]*;)", re.MULTILINE)
_DIM3_DECL = re.compile(r"\bdim3[ \t]+(\w+)[ \t]*(?:=[ \t]*dim3[ \t]*)?[({]([^(){};]*)[)}]")
_LAUNCH = re.compile(r"<<<")


def _constant_value(expr: str, constants: dict[str, int]) -> int | None:
    """A product of integer literals and named constants ("32 * TILE"), or None."""
    values = [int(f) if f.isdigit() else constants.get(f) for f in (x.strip().rstrip("uU") for x in expr.split("*"))]
    return None if None in values else math.prod(values)


def _threads(args: str, constants: dict[str, int]) -> int | None:
    """The threads of dim3(args) (each argument constant), or None."""
    sizes = [_constant_value(a, constants) for a in args.split(",")] if args.strip() else [None]
    return None if None in sizes else math.prod(sizes)


def block_size_findings(src: str) -> list[tuple[int, int]]:
    """(line, threads) for each launch whose block has a constant size over 1024 threads: the
    second argument of <<<...>>>, a literal, a named constant (#define, const or constexpr int),
    dim3(...) of those, or a dim3 variable declared with them."""
    _, bare = strip_source(src)
    constants = {m.group(1) or m.group(3): int(m.group(2) or m.group(4)) for m in _CONSTANT.finditer(bare)}
    blocks = {m.group(1): _threads(m.group(2), constants) for m in _DIM3_DECL.finditer(bare)}
    found = []
    for m in _LAUNCH.finditer(bare):
        config = bare[m.end():bare.find(">>>", m.end())]
        if len(parts := _arguments(config)) < 2:
            continue
        block = parts[1].strip()
        inner = re.fullmatch(r"dim3[ \t]*\((.*)\)", block, re.DOTALL)
        threads = _threads(inner.group(1), constants) if inner else blocks.get(block, _constant_value(block, constants))
        if threads is not None and threads > MAX_THREADS_PER_BLOCK:
            found.append((_line_of(bare, m.start()), threads))
    return found


def check_notes(source: Path) -> StaticCheck | None:
    """The "notes" of one student file (module docstring), status "warn"; None when there are
    none or the file cannot be read (check_source says so)."""
    try:
        src = Path(source).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    details = []
    todos = [(_line_of(src, m.start()), m.group(1)) for m in _TODO.finditer(src)]
    if todos:
        lines = ", ".join(str(line) for line, _ in todos[:MAX_REPORTED])
        details.append(f"TODO({todos[0][1]}) still on line{'s' if len(todos) > 1 else ''} {lines}: the starter's "
                       "unfinished parts; its correctness cases fail until they are done")
    for line, threads in block_size_findings(src):
        details.append(f"line {line}: a block of {threads} threads: a CUDA block holds at most "
                       f"{MAX_THREADS_PER_BLOCK}, so this launch fails (invalid configuration argument)")
    if not details:
        return None
    return StaticCheck("notes", "warn", "note", f"{len(details)} thing(s) to fix in {Path(source).name} "
                       "before a GPU grades it", details)
