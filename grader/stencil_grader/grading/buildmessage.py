"""What a failed build means for the student: the message made from make's whole output.

failure_message keeps the compiler's diagnostics about the student's own file (paths relative to
it, no line of the harness's build): nvcc.log when kernel.o failed; for a failed link, "kernel.cu
must define extern "C" <declaration>" per missing launcher, then the linker's lines; else make's
last lines.  `kit error: ` lines are always kept.  Lines are escaped and cut at LINE_WIDTH;
compiler_hints adds what nvcc leaves out.  grader/README.md, section 1.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import KIT_ROOT
from ..base import kinds
from . import symbols
from .source import header_code

#: Lines of a message at most (the note on what was left out included).
MESSAGE_LINES = 30
#: Characters per line of a message at most (a source line quoted by nvcc can be longer).
LINE_WIDTH = 200
#: The student API: the launchers' declarations (relative to the kit's root).
API_HEADER = Path("grader") / "include" / "stencil_lab.h"


_PRINTF_UNDECLARED = re.compile(r'identifier "(?:std::)?printf" is undefined|namespace "std" has no member "printf"')
PRINTF_HINT = ("hint: printf in a kernel needs #include <cstdio> at the top of kernel.cu; printf on the GPU is "
               "allowed (the report shows what it prints), printf in host code is not")


def compiler_hints(message: str) -> list[str]:
    """Lines that add what nvcc's own words leave out (a kernel's printf without <cstdio>), or []."""
    return [PRINTF_HINT] if _PRINTF_UNDECLARED.search(message) else []


def lab_launchers(lab_dir: Path) -> tuple[str, ...]:
    """The launchers a lab's kernel.cu must define (its lab.json's "api" kind, in the harness's order);
    () when lab.json or the kind cannot be read."""
    try:
        api = json.loads((Path(lab_dir) / "lab.json").read_text())["api"]
        return tuple(launcher.name for launcher in kinds.get(api).launchers)
    except (OSError, ValueError, KeyError, TypeError):       # KindError is a ValueError
        return ()


def declaration(name: str, header: Path = KIT_ROOT / API_HEADER) -> str | None:
    """The declaration of function `name` in `header` on one line, without its ';' ('void
    stencil2d_sweep(const float *d_in, ...)'); None when the header cannot be read or lacks it."""
    try:
        code = header_code(header)
    except OSError:
        return None
    m = re.search(r"(?:^|[;{}])\s*([^;{}]*?\b" + re.escape(name) + r"\s*\([^;{}]*\))\s*;", code)
    return " ".join(m.group(1).split()) if m else None


@dataclass
class Paths:
    """The paths a message names: the student's file, the build directory and the kit."""

    source: Path
    build_dir: Path
    kit: Path

    def relative(self, text: str) -> str:
        """text with the student's file by its name, paths under its folder, the build directory and
        the kit relative to them, anything else under the temporary directory by its name."""
        pairs = []
        for path, shown in ((self.source, self.source.name), (self.source.parent, ""),
                            (self.build_dir, ""), (self.kit, "")):
            for form in {os.path.abspath(path), os.path.realpath(path)}:
                if form != os.sep:
                    pairs.append((form if shown else form.rstrip(os.sep) + os.sep, shown))
        for form, shown in sorted(pairs, key=lambda p: -len(p[0])):
            text = re.sub(r"(?<![\w./-])" + re.escape(form), lambda m: shown, text)
        temp = re.escape(tempfile.gettempdir().rstrip(os.sep))
        return re.sub(r"(?<![\w./-])" + temp + r"/[^\s'\"`()\[\]]*?([^/\s'\"`()\[\]]+)(?=[\s'\"`():,\[\]]|$)",
                      lambda m: m.group(1), text, flags=re.MULTILINE)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(line: str) -> str:
    """line with tabs as four spaces, other control characters as \\xNN, cut at LINE_WIDTH."""
    return cut(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line.replace("\t", "    ")))


def cut(line: str) -> str:
    """line cut at LINE_WIDTH characters, " ..." saying so."""
    return line if len(line) <= LINE_WIDTH else line[:LINE_WIDTH - 4] + " ..."


def tidy(lines: list[str], where: Paths, most: int, keep: str = "first") -> list[str]:
    """Lines for a student: paths relative (Paths.relative), printable, at most `most` of them,
    the first (keep="first") or the last ("last"), with a line saying how many were left out."""
    lines = [printable(where.relative(line)) for line in lines]
    said = [i for i, line in enumerate(lines) if line.strip()]
    lines = lines[said[0]:said[-1] + 1] if said else []
    if len(lines) <= most:
        return lines
    left = len(lines) - (most - 1)
    if keep == "first":
        return lines[:most - 1] + [f"... {left} more line(s) (fix the first error first: later ones often "
                                   "follow from it)"]
    return [f"... {left} line(s) before these"] + lines[-(most - 1):]


_MAKE_NOISE = re.compile(r"^g?make(\[\d+\])?: (\*\*\* \[.*\] Error \d+|\*\*\* Waiting for unfinished jobs"
                         r"|(Entering|Leaving) directory)")
_FAILED_TARGET = re.compile(r"^g?make(?:\[\d+\])?: \*\*\* \[(?:.*?:\d+: )?(.+?)\] Error \d+", re.MULTILINE)
#: Programs whose command lines make echoes (lab.mk's recipes), also as x86_64-linux-gnu-gcc-12
#: or python3.11: never the student's diagnostics.
_TOOL = re.compile(r"(?:[\w.]+-)*(cc|c\+\+|g\+\+|gcc|clang|clang\+\+|nvcc|ar|ranlib|ld|mkdir|mv|cp|rm|sh|bash"
                   r"|python)[-.\d]*")
_TOOL_SAYS = re.compile(r"^\S+\s+(fatal|error|warning|info)\b")


def is_command(line: str) -> bool:
    """True for a command line make echoed, flush left ('ar rcs ...'); False for a diagnostic
    ('nvcc fatal   : ...') or a source line a compiler quotes (indented)."""
    words = line.split()
    return (bool(words) and not line[:1].isspace() and bool(_TOOL.fullmatch(os.path.basename(words[0])))
            and not _TOOL_SAYS.match(line))


def make_lines(log: str) -> list[str]:
    """The lines of make's output that are not its command lines nor its own bookkeeping
    ('make: *** [...] Error 1', 'Entering directory')."""
    return [line for line in log.splitlines() if not is_command(line) and not _MAKE_NOISE.match(line)]


def failed_target(log: str) -> str:
    """The file name of the target make's output says failed ('kernel.o', 'check'), or ''."""
    found = _FAILED_TARGET.findall(log)
    return os.path.basename(found[-1]) if found else ""


def compiler_lines(build_dir: Path, fresh_since: float) -> list[str] | None:
    """The lines of BUILD_DIR/nvcc.log (nvcc's messages on the student's file), or None when it is
    missing, empty or older than fresh_since (time.time(), seconds)."""
    log = Path(build_dir) / "nvcc.log"
    try:
        if log.stat().st_mtime < fresh_since - 2:     # coarse file-system clocks
            return None
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return lines if any(line.strip() for line in lines) else None


_NVCC_TEMP = re.compile(r"\btmpxft_[0-9a-f]+_[0-9a-f]+-\d+_[\w.-]+?\.cudafe1\.(?:cpp|stub\.c)(?::\([^)]*\))?")
_UNDEFINED = re.compile(r"undefined reference to [`'\u2018]([^'`\u2019]+)['\u2019]")
_IN_FUNCTION = re.compile(r"in function [`'\u2018][^'`\u2019]*['\u2019]:\s*$")


def link_lines(log: str, where: Paths, launchers: tuple[str, ...], header: Path) -> list[str]:
    """What a failed link means for the student: one paragraph per launcher the lab needs and the
    linker did not find, then the linker's other lines (those after the last command make echoed)."""
    lines = log.splitlines()
    echoed = [i for i, line in enumerate(lines) if is_command(line)]
    lines = make_lines("\n".join(lines[echoed[-1] + 1:] if echoed else lines))
    # nvcc's intermediate file of the student's host code, with the section offset, is the file itself.
    lines = [_NVCC_TEMP.sub(where.source.name, line) for line in lines]
    undefined = {m.group(1) for line in lines for m in _UNDEFINED.finditer(line)}
    missing = [name for name in launchers if name in undefined]
    out: list[str] = []
    cxx = cxx_definitions(where.build_dir / "kernel.o", missing) if missing else {}
    for name in missing:
        out += [f'{where.source.name} must define extern "C" {declaration(name, header) or f"void {name}(...)"}',
                f"  (declared in {API_HEADER.as_posix()}: the harness calls it, and the linker found no "
                f"function {name} with C linkage in {where.source.name})"]
        for shown in cxx.get(name, []):
            out += [f"  {where.source.name} defines {shown} with C++ linkage: to the linker that is another function.",
                    '  Give it exactly these parameters, and C linkage (extern "C", which including stencil_lab.h '
                    "gives it)."]
    try:
        empty = not where.source.read_text(errors="replace").strip()
    except OSError:
        empty = True
    if missing and empty:
        out.append(f"  ({where.source.name} is empty)")
    rest = []
    for line in lines:
        names = set(_UNDEFINED.findall(line))
        if names and names <= set(missing):
            if rest and _IN_FUNCTION.search(rest[-1]) and "kernel.o" not in rest[-1]:
                rest.pop()                 # the harness's object calling the missing launcher
            continue
        rest.append(line)
    rest = [line for line in rest if line.strip()]
    if out or any(not line.startswith("collect2: ") for line in rest):
        rest = [line for line in rest if not line.startswith("collect2: ")]      # "ld returned 1 exit status"
    if out and rest:
        out.append("the linker also said:")
    return out + rest


def cxx_definitions(obj: Path, launchers: list[str]) -> dict[str, list[str]]:
    """name -> the C++ functions of that name the object defines, demangled (a launcher without
    extern "C"); {} when the object or nm is missing."""
    listing = symbols.read_object(Path(obj)) if Path(obj).is_file() else None
    if listing is None or listing.error:
        return {}
    return {name: sorted({s.demangled for s in listing.defined if s.name.startswith("_Z")
                          and s.demangled.startswith(name + "(")}) for name in launchers}


def failure_message(log: str, where: Paths, launchers: tuple[str, ...], header: Path,
                    fresh_since: float = 0.0) -> str:
    """The message of a failed build from make's output `log` (module docstring); fresh_since: when
    make started (time.time()); "" when nothing is left to say."""
    kit_errors = [line for line in log.splitlines() if line.startswith("kit error: ")][:MESSAGE_LINES // 2]
    most = MESSAGE_LINES - len(kit_errors)
    target = failed_target(log)
    if target == "kernel.o" and (lines := compiler_lines(where.build_dir, fresh_since)) is not None:
        body = tidy(lines, where, most, keep="first")
    elif target in ("check", "bench"):
        body = tidy(link_lines(log, where, launchers, header), where, most, keep="first")
    else:
        body = tidy([line for line in make_lines(log) if not line.startswith("kit error: ")], where, most,
                    keep="last")
    return "\n".join([printable(where.relative(line)) for line in kit_errors] + body)


def timeout_message(log: str, where: Paths, how: str) -> str:
    """The message of a build that did not finish in time: how make ended, then its last lines."""
    return "\n".join([f"the build did not finish: make {how}; its last lines:"]
                     + tidy(make_lines(log), where, MESSAGE_LINES - 1, keep="last"))


def compile_error_message(log: str, where: Paths, lab_dir: Path, fresh_since: float, how: str) -> str:
    """failure_message with the lab's launchers and the kit's API header (else how make ended),
    then compiler_hints' lines."""
    header = where.kit / API_HEADER if (where.kit / API_HEADER).is_file() else KIT_ROOT / API_HEADER
    message = failure_message(log, where, lab_launchers(lab_dir), header, fresh_since=fresh_since) or f"make {how}"
    return "\n".join([message] + compiler_hints(message))
