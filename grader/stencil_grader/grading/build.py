"""Build one lab with `make`, read the ptxas resource report, and say what a failed build means.

    make -C LABDIR build IMPL=<starter|reference|DIR> BUILD_DIR=<dir> [CUDA_ARCH=90] [KERNEL_DEFINES=...]

A non-zero exit of make is a compile error.  After a good build BUILD_DIR holds
check, bench, kernel.o, kernel.ptx and ptxas.log (grader/README.md, section
Build); the kernels of ptxas.log get readable labels that tell template
instances apart (names.kernel_labels).

make's whole output, harness commands included, is kept for instructors as
BUILD_DIR/build.log.  What a student reads (BuildResult.message, on the
terminal, in report.json and in Gradescope's results.json) is made from it by
failure_message: the compiler's diagnostics about the student's own file, with
paths relative to it and no line of the harness's build (its cc, nvcc and ar
commands, the grader's temporary and kit paths):

  - the student's file did not compile (make's failing target is kernel.o): what
    nvcc said about it (lab.mk keeps nvcc's messages in BUILD_DIR/nvcc.log), the
    first lines, since later errors often follow from the first;
  - it compiled but did not link (target check or bench): a launcher the lab's
    problem kind needs and kernel.cu does not define becomes "kernel.cu must
    define extern "C" <its declaration in grader/include/stencil_lab.h>"; the
    linker's other lines follow;
  - anything else: make's last lines, without its command lines.

`kit error: ` lines (lab.mk's checks of the machine) are always kept: the
pipeline reads them.  A kernel.cu that is not text (NUL bytes: a binary file,
or UTF-16) or is over MAX_SOURCE_BYTES is refused before make runs, in one line.
Every line of a message has its control characters escaped and is cut at
LINE_WIDTH characters.

No path that someone else named reaches make: the kernel.cu of IMPL=DIR (a student's
folder, whatever its name: spaces, quotes, `$(...)`) is copied to
BUILD_DIR/src/<lab>/kernel.cu (stage_source) and make is given IMPL=BUILD_DIR/src.
make splits its variables at spaces and expands `$`, and lab.mk's recipes hand them
to the shell, so the kit's folder and BUILD_DIR themselves must be plain paths
(make_path_problem); a build where one is not is a kit error (no grade), never a 0.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import kinds, process
from . import names, symbols
from .source import strip_source

DEFAULT_TIMEOUT_S = 300.0
#: Lines of a message at most (the note on what was left out included).
MESSAGE_LINES = 30
#: Characters per line of a message at most (a source line quoted by nvcc can be longer).
LINE_WIDTH = 200
#: make's whole output, in BUILD_DIR.
BUILD_LOG = "build.log"
#: The student API: the launchers' declarations (relative to the kit's root).
API_HEADER = Path("grader") / "include" / "stencil_lab.h"
#: The largest kernel.cu graded, in bytes (1 MiB: the references are under 20 KiB; a larger
#: file is not a kernel, and its static checks alone would take minutes).
MAX_SOURCE_BYTES = 1 << 20
#: Where a build keeps its copy of the kernel.cu of IMPL=DIR: BUILD_DIR/src/<lab>/kernel.cu.
STAGED = "src"


@dataclass
class KernelResources:
    """What ptxas reported for one function on one architecture.

    registers: registers per thread (None for a device function: ptxas reports
        only its stack and spills).
    smem_bytes: static shared memory per block, in bytes (dynamic shared memory
        is sized at launch and not in the report).
    spill_stores, spill_loads, stack_bytes: bytes per thread.
    label: the name shown to people (names.kernel_labels): 'tiled', or
        'stencil3d_zmarch_kernel<true>' for one instance of a kernel template;
        "" until build() sets it.
    """

    name: str
    arch: str | None
    entry: bool
    registers: int | None = None
    smem_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    label: str = ""

    @property
    def short_name(self) -> str:
        return names.short_name(self.name)


@dataclass
class BuildResult:
    """outcome: "ok", "compile_error" or "timeout"; message: when it failed, what the student
    reads (module docstring; make's whole output is BUILD_DIR/build.log); seconds: wall-clock
    time of make."""

    outcome: str
    command: list[str]
    build_dir: Path
    seconds: float = 0.0
    message: str = ""
    kernels: list[KernelResources] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


def impl_source(lab: str, impl: str, kit_root: Path = KIT_ROOT) -> Path:
    """The kernel.cu that `make build IMPL=impl` compiles for this lab.

    starter / reference: KIT/starter/<lab>/kernel.cu, KIT/reference/<lab>/kernel.cu;
    a directory DIR: DIR/<lab>/kernel.cu when it exists, else DIR/kernel.cu.
    """
    if impl in ("starter", "reference"):
        return Path(kit_root) / impl / lab / "kernel.cu"
    nested = Path(impl) / lab / "kernel.cu"
    return nested if nested.is_file() else Path(impl) / "kernel.cu"


_DEFINE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINE_VALUE = re.compile(r"[A-Za-z0-9_.+-]+")


def kernel_defines(defines: dict[str, int | str]) -> str:
    """The KERNEL_DEFINES value for `defines`: '-DNAME=VALUE' words in the dict's order.

    Names are C identifiers, values plain numbers or identifiers (no spaces, quotes or
    shell characters); anything else raises ValueError naming it.
    """
    words = []
    for name, value in defines.items():
        if not _DEFINE_NAME.fullmatch(str(name)):
            raise ValueError(f"kernel define {name!r}: a name is a C identifier ([A-Za-z_][A-Za-z0-9_]*)")
        if not _DEFINE_VALUE.fullmatch(str(value)):
            raise ValueError(f"kernel define {name}={value!r}: a value is a number or an identifier")
        words.append(f"-D{name}={value}")
    return " ".join(words)


def make_command(lab_dir: Path, impl: str, build_dir: Path, arch: str | None = None,
                 defines: dict[str, int | str] | None = None) -> list[str]:
    """The make command line of a build (IMPL directories and BUILD_DIR made absolute).

    defines: -D macros for the lab's kernel.cu only (lab.mk's KERNEL_DEFINES), e.g.
    {"TUNE_K": 8}; an empty dict passes KERNEL_DEFINES= (the file's own defaults, even
    for IMPL=reference on a GPU with a tuning file); None leaves KERNEL_DEFINES to lab.mk.
    """
    if impl not in ("starter", "reference"):
        impl = str(Path(impl).resolve())
    command = ["make", "--no-print-directory", "-C", str(lab_dir), "build", f"IMPL={impl}",
               f"BUILD_DIR={Path(build_dir).resolve()}"]
    if arch:
        command.append(f"CUDA_ARCH={arch}")
    if defines is not None:
        command.append(f"KERNEL_DEFINES={kernel_defines(defines)}")
    return command


def build(lab_dir: Path, impl: str, build_dir: Path, arch: str | None = None,
          timeout_s: float = DEFAULT_TIMEOUT_S, defines: dict[str, int | str] | None = None) -> BuildResult:
    """Run the build; never raises for a failing build (see BuildResult.outcome).

    impl: starter, reference, or a directory whose kernel.cu (impl_source) is built from
    the copy stage_source makes.  defines: see make_command (ValueError for a malformed
    one).  make's whole output (standard output and error, in the order written) goes to
    BUILD_DIR/build.log; a failed build's message is failure_message's (module docstring).
    """
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    kit = Path(lab_dir).absolute().parents[1]
    lab = Path(lab_dir).name
    source = impl_source(lab, impl, kit)
    result = BuildResult("ok", [], build_dir)
    for what, path in (("the kit's folder", kit), ("the build directory", build_dir)):
        if why := make_path_problem(path):
            return _not_run(result, "kit_error", f"kit error: {what} {str(path)!r} {why}, which make cannot "
                            "take in a path: grade from a path without it")
    if why := text_problem(source):
        return _not_run(result, "compile_error", why)
    staged = None
    if impl not in ("starter", "reference"):
        if not source.is_file():
            return _not_run(result, "compile_error", f"no kernel.cu found in {impl}")
        staged = stage_source(source, build_dir, lab)
    command = make_command(lab_dir, str(staged.parents[1]) if staged else impl, build_dir, arch, defines)
    result.command = command
    started = time.time()
    # One pipe for both streams keeps the log in the order make wrote it.  The shell only runs
    # its arguments ("$@", never parsed): the command is an argument list of paths the grader
    # made (above), as every command of the grader is; no string of a student reaches it.
    run = process.run(["sh", "-c", 'exec "$@" 2>&1', "sh", *command], timeout_s)
    result.seconds = run.seconds
    log = (run.stdout + run.stderr).strip("\n")
    (build_dir / BUILD_LOG).write_text(log + "\n", encoding="utf-8")
    where = Paths(staged or source, build_dir, kit)
    if run.timed_out:
        result.outcome = "timeout"
        result.message = "\n".join([f"the build did not finish: make {run.describe()}; its last lines:"]
                                   + tidy(make_lines(log), where, MESSAGE_LINES - 1, keep="last"))
    elif run.returncode != 0:
        result.outcome = "compile_error"
        header = kit / API_HEADER if (kit / API_HEADER).is_file() else KIT_ROOT / API_HEADER
        result.message = failure_message(log, where, lab_launchers(lab_dir), header,
                                         fresh_since=started) or f"make {run.describe()}"
        result.message = "\n".join([result.message] + compiler_hints(result.message))
    else:
        ptxas = build_dir / "ptxas.log"
        if ptxas.is_file():
            result.kernels = parse_ptxas_log(ptxas.read_text(errors="replace"))
            labels = names.kernel_labels([k.name for k in result.kernels])
            for k in result.kernels:
                k.label = labels[k.name]
    return result


def _not_run(result: BuildResult, outcome: str, message: str) -> BuildResult:
    """result, failed with outcome and message before make ran (build.log says so)."""
    result.outcome, result.message = outcome, message
    (result.build_dir / BUILD_LOG).write_text(f"make was not run: {message}\n", encoding="utf-8")
    return result


# ---------------------------------------------------------------- what a failed build means

_MAKE_SAFE = re.compile(r"[\w./+@-]+")


def make_path_problem(path: Path) -> str | None:
    """Why make cannot be given `path` (absolute), e.g. "holds a space", or None.

    make splits variables at white space, expands `$`, reads `#`, `%`, `:`, `=` and `,`
    in its own syntax, and its recipes pass paths to the shell: a path is taken only when
    it holds nothing but letters and digits (any script), `_ . / + @ -`."""
    text = os.path.abspath(path)
    if _MAKE_SAFE.fullmatch(text):
        return None
    bad = next(c for c in text if not _MAKE_SAFE.fullmatch(c))
    return "holds a space" if bad == " " else f"holds the character {bad!r}"


def size_problem(source: Path) -> str | None:
    """Why `source` is too large to grade (over MAX_SOURCE_BYTES), in one line, or None."""
    try:
        size = Path(source).stat().st_size
    except OSError:
        return None
    if size <= MAX_SOURCE_BYTES:
        return None
    return (f"{Path(source).name} is {size / 1e6:.1f} MB, over the {MAX_SOURCE_BYTES >> 20} MiB a kernel.cu may "
            "have: submit the CUDA C++ source of your kernel only")


def stage_source(source: Path, build_dir: Path, lab: str) -> Path:
    """Copy `source` to BUILD_DIR/src/<lab>/kernel.cu (the path make is given; module docstring)
    and return that path.  An identical copy is left as it is, so that make rebuilds exactly
    when the file's content changed (a new copy is newer than the build)."""
    target = Path(build_dir) / STAGED / lab / "kernel.cu"
    data = Path(source).read_bytes()
    try:
        same = target.read_bytes() == data
    except OSError:
        same = False
    if not same:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return target


def text_problem(source: Path) -> str | None:
    """Why `source` is not source text the compiler can read, in one line, or None.

    A file over MAX_SOURCE_BYTES is refused (size_problem).  A NUL byte makes a file binary
    (git's test, xdiff-interface.c buffer_is_binary, applied to the whole file): a compiled object, an archive, or text saved as UTF-16 (which starts
    with a byte-order mark, FF FE or FE FF, and is named so).  nvcc would answer such a file
    with a hundred errors full of control bytes.  A file that cannot be read gives None:
    make's own check names what is missing.
    """
    source = Path(source)
    if why := size_problem(source):
        return why
    offset, nul, head = 0, -1, b""
    try:
        with source.open("rb") as f:
            while nul < 0 and (chunk := f.read(1 << 20)):      # 1 MiB at a time, whatever the file's size
                head = head or chunk[:2]
                nul = chunk.find(b"\0")
                offset += len(chunk) if nul < 0 else nul
    except OSError:
        return None
    if nul < 0:
        return None
    if head in (b"\xff\xfe", b"\xfe\xff"):
        return (f"{source.name} is not a text file the compiler can read: it is UTF-16 text; "
                "save it as UTF-8 (or plain ASCII) and submit it again")
    return (f"{source.name} is not a text file: it holds NUL bytes (the first at byte {offset}), "
            "as a compiled or other binary file does; submit the CUDA C++ source of your kernel")


_PRINTF_UNDECLARED = re.compile(r'identifier "(?:std::)?printf" is undefined|namespace "std" has no member "printf"')
PRINTF_HINT = ("hint: printf in a kernel needs #include <cstdio> at the top of kernel.cu; printf on the GPU is "
               "allowed (the report shows what it prints), printf in host code is not")


def compiler_hints(message: str) -> list[str]:
    """Lines that add what nvcc's own words leave out, for the mistakes students make most (a
    kernel's printf without its header: nvcc says only that printf is undefined); [] when none."""
    return [PRINTF_HINT] if _PRINTF_UNDECLARED.search(message) else []


def lab_launchers(lab_dir: Path) -> tuple[str, ...]:
    """The launchers a lab's kernel.cu must define, in the order the harness calls them.

    The problem kind that lab.json's "api" names, from grader/kinds.json (base/kinds.py);
    () when lab.json or the kind cannot be read (the linker's own message then stands).
    """
    try:
        api = json.loads((Path(lab_dir) / "lab.json").read_text())["api"]
        return tuple(launcher.name for launcher in kinds.get(api).launchers)
    except (OSError, ValueError, KeyError, TypeError):       # KindError is a ValueError
        return ()


def declaration(name: str, header: Path = KIT_ROOT / API_HEADER) -> str | None:
    """The declaration of function `name` in `header`, on one line without its ';', e.g.
    'void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny, stencil2d_coeffs c,
    cudaStream_t stream)'; None when the header cannot be read or does not declare it."""
    try:
        code = strip_source(Path(header).read_text(errors="replace"))[0]      # comments blanked
    except OSError:
        return None
    code = re.sub(r"^[ \t]*#.*$", "", code, flags=re.MULTILINE)
    m = re.search(r"(?:^|[;{}])\s*([^;{}]*?\b" + re.escape(name) + r"\s*\([^;{}]*\))\s*;", code)
    return " ".join(m.group(1).split()) if m else None


@dataclass
class Paths:
    """The paths a message names, and what it shows instead: the student's file by its name,
    files beside it, in the build directory and in the kit relative to those."""

    source: Path
    build_dir: Path
    kit: Path

    def relative(self, text: str) -> str:
        """text with the student's file as 'kernel.cu', paths in its folder relative to it,
        build products by their names, kit files relative to the kit's root, and anything
        else under the temporary directory by its name alone."""
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
    line = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line.replace("\t", "    "))
    return line if len(line) <= LINE_WIDTH else line[:LINE_WIDTH - 4] + " ..."


def tidy(lines: list[str], where: Paths, most: int, keep: str = "first") -> list[str]:
    """Lines for a student: paths relative (Paths.relative), printable, at most `most` of them,
    the first (keep="first") or the last ("last"), with a line saying how many were left out."""
    lines = [printable(where.relative(line)) for line in lines]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
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
    """True for a command line make echoed, flush left ('cc -std=c11 ... -c lab_driver.c',
    'ar rcs ...', lab.mk's 'nvcc kernel.cu (starter)'); False for a diagnostic ('nvcc fatal   :
    ...') or a source line a compiler quotes (indented)."""
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
    """What nvcc said about the student's file: BUILD_DIR/nvcc.log (lab.mk writes there nvcc's
    messages without ptxas's resource report), or None when that file is missing, older than
    fresh_since (time.time(), seconds) or empty."""
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
    """What a failed link means for the student: one paragraph per launcher the lab needs and
    the linker did not find, then the linker's other lines (without the harness's objects'
    'in function' headers and collect2's summary).  The linker's lines are those after the
    last command make echoed (the link's), all of make_lines when it echoed none."""
    lines = log.splitlines()
    echoed = [i for i, line in enumerate(lines) if is_command(line)]
    lines = make_lines("\n".join(lines[echoed[-1] + 1:] if echoed else lines))
    # nvcc's intermediate file of the student's host code, with the section offset, is the file itself.
    lines = [_NVCC_TEMP.sub(where.source.name, line) for line in lines]
    undefined = {m.group(1) for line in lines for m in _UNDEFINED.finditer(line)}
    missing = [name for name in launchers if name in undefined]
    out: list[str] = []
    if missing:
        try:
            text = where.source.read_text(errors="replace")
        except OSError:
            text = ""
        cxx = cxx_definitions(where.build_dir / "kernel.o", missing)
        for name in missing:
            decl = declaration(name, header) or f"void {name}(...)"
            out.append(f'{where.source.name} must define extern "C" {decl}')
            out.append(f"  (declared in {API_HEADER.as_posix()}: the harness calls it, and the linker found no "
                       f"function {name} with C linkage in {where.source.name})")
            for shown in cxx.get(name, []):
                out.append(f"  {where.source.name} defines {shown} with C++ linkage: to the linker that is "
                           "another function.")
                out.append('  Give it exactly these parameters, and C linkage (extern "C", which including '
                           "stencil_lab.h gives it).")
        if not text.strip():
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
    """name -> the C++ functions of that name the object defines, demangled ('stencil2d_sweep(float
    const*, float*, int, int, CUstream_st*)'): a launcher written with other parameters or
    without extern "C".  {} when the object or nm is missing."""
    if not Path(obj).is_file():
        return {}
    run = process.run(["nm", "-P", str(obj)], names.TOOL_TIMEOUT_S)
    if run.returncode != 0:
        return {}
    _, defined = symbols.parse_nm(run.stdout)
    mangled = [s.name for s in defined if s.name.startswith("_Z")]
    table = names.demangle(mangled)
    found: dict[str, list[str]] = {}
    for name in launchers:
        found[name] = sorted({table[m] for m in mangled if table[m].startswith(name + "(")})
    return found


def failure_message(log: str, where: Paths, launchers: tuple[str, ...], header: Path,
                    fresh_since: float = 0.0) -> str:
    """The message of a failed build, from make's whole output (module docstring).

    log: make's output; where: the student's file, the build directory and the kit;
    launchers: the lab's (lab_launchers); header: the student API (declarations);
    fresh_since: when make started (time.time()), to tell this build's nvcc.log from an
    earlier one's.  "" when nothing is left to say (the caller then says how make ended).
    """
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


_COMPILING = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(text: str) -> list[KernelResources]:
    """Per-function resources from `nvcc -Xptxas -v` output, in the order ptxas reported them.

    The report is a sequence of lines such as

        ptxas info    : Compiling entry function '_Z5tiledPKfPfi' for 'sm_90'
        ptxas info    : Function properties for _Z5tiledPKfPfi
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 16 registers, used 1 barriers, 1040 bytes smem, 372 bytes cmem[0]

    repeated per architecture; a device function that is not inlined gets a
    "Function properties" block only.  Lines of any other kind are ignored.
    """
    found: dict[tuple[str, str | None], KernelResources] = {}
    arch = None
    current: KernelResources | None = None
    for line in text.splitlines():
        if m := _COMPILING.search(line):
            arch = m.group(2)
            current = found.setdefault((m.group(1), arch), KernelResources(m.group(1), arch, True))
        elif m := _PROPERTIES.search(line):
            key = (m.group(1), arch)
            current = found.setdefault(key, KernelResources(m.group(1), arch, False))
        elif current and (m := _FRAME.search(line)):
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        elif current and (m := _USED.search(line)):
            current.registers = int(m.group(1))
            smem = _SMEM.search(line)
            current.smem_bytes = int(smem.group(1)) if smem else 0
    return list(found.values())
