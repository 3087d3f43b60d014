"""Build one lab with `make`, and read the ptxas resource report of a good build.

    make -C LABDIR build IMPL=<starter|reference|DIR> BUILD_DIR=<dir> [CUDA_ARCH=90] [KERNEL_DEFINES=...]

make's whole output goes to BUILD_DIR/build.log; a failed build's message is buildmessage.py's.
The kernel.cu of IMPL=DIR is copied to BUILD_DIR/src/<lab>/kernel.cu (stage_source), so no path a
student named reaches make; the kit and BUILD_DIR must be paths make can take (make_path_problem),
else kit_error.  grader/README.md, section 1.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import process
from . import names
from .buildmessage import Paths, compile_error_message, timeout_message

DEFAULT_TIMEOUT_S = 300.0
#: make's whole output, in BUILD_DIR.
BUILD_LOG = "build.log"
#: The largest kernel.cu graded, in bytes (1 MiB: the references are under 20 KiB; a larger
#: file is not a kernel, and its static checks alone would take minutes).
MAX_SOURCE_BYTES = 1 << 20
#: Where a build keeps its copy of the kernel.cu of IMPL=DIR: BUILD_DIR/src/<lab>/kernel.cu.
STAGED = "src"


@dataclass
class KernelResources:
    """What ptxas reported for one function on one architecture: registers per thread (None for a
    device function), static shared memory per block and spills and stack per thread in bytes;
    label: the name people read (names.kernel_labels), "" until build() sets it."""

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
    """outcome: "ok", "compile_error", "kit_error" (the kit or the machine is at fault: a path make
    cannot take, a `kit error: ` line of lab.mk) or "timeout"; message: what the student reads of a
    failure; seconds: make's wall-clock time."""

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
    """The kernel.cu that `make build IMPL=impl` compiles: KIT/<impl>/<lab>/kernel.cu for starter and
    reference, else DIR/<lab>/kernel.cu when it exists, else DIR/kernel.cu."""
    if impl in ("starter", "reference"):
        return Path(kit_root) / impl / lab / "kernel.cu"
    nested = Path(impl) / lab / "kernel.cu"
    return nested if nested.is_file() else Path(impl) / "kernel.cu"


_DEFINE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINE_VALUE = re.compile(r"[A-Za-z0-9_.+-]+")


def kernel_defines(defines: dict[str, int | str]) -> str:
    """The KERNEL_DEFINES value for `defines`: '-DNAME=VALUE' words in the dict's order; ValueError
    for a name that is no C identifier or a value that is no number or identifier."""
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
    """The make command line of a build (paths made absolute).  defines: -D macros for kernel.cu
    ({"TUNE_K": 8}); {} passes KERNEL_DEFINES= (the file's defaults); None leaves it to lab.mk."""
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
    """Run the build (impl: as make_command's; a directory's kernel.cu staged first); never raises
    for a failing build (BuildResult.outcome), ValueError for a malformed define."""
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    kit, lab = Path(lab_dir).absolute().parents[1], Path(lab_dir).name
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
    result.command = command = make_command(lab_dir, str(staged.parents[1]) if staged else impl, build_dir, arch,
                                            defines)
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
        result.outcome, result.message = "timeout", timeout_message(log, where, run.describe())
    elif run.returncode != 0:
        result.outcome = "compile_error"
        result.message = compile_error_message(log, where, lab_dir, started, run.describe())
    elif (ptxas := build_dir / "ptxas.log").is_file():
        result.kernels = parse_ptxas_log(ptxas.read_text(errors="replace"))
        labels = names.kernel_labels([k.name for k in result.kernels])
        for k in result.kernels:
            k.label = labels[k.name]
    # lab.mk's own checks (a missing Check library, a lab without a problem-kind module) say
    # `kit error: ...`, which no line of nvcc's starts with: the machine's fault, not the student's.
    if not result.ok and any(line.startswith("kit error: ") for line in result.message.splitlines()):
        result.outcome = "kit_error"
    return result


def _not_run(result: BuildResult, outcome: str, message: str) -> BuildResult:
    """result, failed with outcome and message before make ran (build.log says so)."""
    result.outcome, result.message = outcome, message
    (result.build_dir / BUILD_LOG).write_text(f"make was not run: {message}\n", encoding="utf-8")
    return result


# ---------------------------------------------------------------- what make may be given

_MAKE_SAFE = re.compile(r"[\w./+@-]+")


def make_path_problem(path: Path) -> str | None:
    """Why make cannot be given `path` (absolute), e.g. "holds a space", or None: only letters and
    digits (any script) and `_ . / + @ -` are safe in make's variables and its recipes' shell."""
    bad = next((c for c in os.path.abspath(path) if not _MAKE_SAFE.fullmatch(c)), None)
    return None if bad is None else "holds a space" if bad == " " else f"holds the character {bad!r}"


def size_problem(source: Path) -> str | None:
    """Why `source` is too large to grade (over MAX_SOURCE_BYTES), in one line, or None."""
    try:
        size = Path(source).stat().st_size
    except OSError:
        return None
    return None if size <= MAX_SOURCE_BYTES else (f"{Path(source).name} is {size / 1e6:.1f} MB, over the {MAX_SOURCE_BYTES >> 20} MiB a kernel.cu may "
            "have: submit the CUDA C++ source of your kernel only")


def stage_source(source: Path, build_dir: Path, lab: str) -> Path:
    """Copy `source` to BUILD_DIR/src/<lab>/kernel.cu and return that path; an identical copy is left
    as it is, so that make rebuilds exactly when the content changed."""
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
    """Why `source` is no source text the compiler can read, in one line, or None: over
    MAX_SOURCE_BYTES, or a NUL byte anywhere (git's binary test; UTF-16 named as such).  A file
    that cannot be read gives None: make names what is missing."""
    source = Path(source)
    if why := size_problem(source):
        return why
    try:
        with source.open("rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)      # never more, whatever the file is (a device)
    except OSError:
        return None
    if (offset := data.find(b"\0")) < 0:
        return None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return (f"{source.name} is not a text file the compiler can read: it is UTF-16 text; "
                "save it as UTF-8 (or plain ASCII) and submit it again")
    return (f"{source.name} is not a text file: it holds NUL bytes (the first at byte {offset}), "
            "as a compiled or other binary file does; submit the CUDA C++ source of your kernel")


# ---------------------------------------------------------------- what a good build reports

_COMPILING = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(text: str) -> list[KernelResources]:
    """Per-function resources from `nvcc -Xptxas -v` output ("Compiling entry function", "Function
    properties for", "N bytes stack frame, ...", "Used N registers, ... N bytes smem" lines, per
    architecture), in the order ptxas reported them; other lines are ignored."""
    found: dict[tuple[str, str | None], KernelResources] = {}
    arch, current = None, None
    for line in text.splitlines():
        if m := _COMPILING.search(line):
            arch = m.group(2)
            current = found.setdefault((m.group(1), arch), KernelResources(m.group(1), arch, True))
        elif m := _PROPERTIES.search(line):
            current = found.setdefault((m.group(1), arch), KernelResources(m.group(1), arch, False))
        elif current and (m := _FRAME.search(line)):
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        elif current and (m := _USED.search(line)):
            current.registers = int(m.group(1))
            current.smem_bytes = int(smem.group(1)) if (smem := _SMEM.search(line)) else 0
    return list(found.values())
