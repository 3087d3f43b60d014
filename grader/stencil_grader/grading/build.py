"""Build one lab with `make` and read the ptxas resource report.

    make -C LABDIR build IMPL=<starter|reference|DIR> BUILD_DIR=<dir> [CUDA_ARCH=90]

A non-zero exit of make is a compile error; the last lines of its output are
the message.  After a good build BUILD_DIR holds check, bench, kernel.ptx and
ptxas.log (grader/README.md, section Build).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import process

DEFAULT_TIMEOUT_S = 300.0
MESSAGE_LINES = 30


@dataclass
class KernelResources:
    """What ptxas reported for one function on one architecture.

    registers: registers per thread (None for a device function: ptxas reports
        only its stack and spills).
    smem_bytes: static shared memory per block, in bytes (dynamic shared memory
        is sized at launch and not in the report).
    spill_stores, spill_loads, stack_bytes: bytes per thread.
    """

    name: str
    arch: str | None
    entry: bool
    registers: int | None = None
    smem_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0

    @property
    def short_name(self) -> str:
        return short_name(self.name)


@dataclass
class BuildResult:
    """outcome: "ok", "compile_error" or "timeout"; message: the last lines of make's output
    when it failed; seconds: wall-clock time of make."""

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


def make_command(lab_dir: Path, impl: str, build_dir: Path, arch: str | None = None) -> list[str]:
    """The make command line of a build (IMPL directories and BUILD_DIR made absolute)."""
    if impl not in ("starter", "reference"):
        impl = str(Path(impl).resolve())
    command = ["make", "--no-print-directory", "-C", str(lab_dir), "build", f"IMPL={impl}",
               f"BUILD_DIR={Path(build_dir).resolve()}"]
    if arch:
        command.append(f"CUDA_ARCH={arch}")
    return command


def build(lab_dir: Path, impl: str, build_dir: Path, arch: str | None = None,
          timeout_s: float = DEFAULT_TIMEOUT_S) -> BuildResult:
    """Run the build; never raises for a failing build (see BuildResult.outcome)."""
    Path(build_dir).mkdir(parents=True, exist_ok=True)
    command = make_command(lab_dir, impl, build_dir, arch)
    run = process.run(command, timeout_s)
    result = BuildResult("ok", command, Path(build_dir), seconds=run.seconds)
    output = (run.stdout + "\n" + run.stderr).strip()
    if run.timed_out:
        result.outcome = "timeout"
        result.message = f"make {run.describe()}\n" + process.tail_lines(output, MESSAGE_LINES)
    elif run.returncode != 0:
        result.outcome = "compile_error"
        result.message = process.tail_lines(output, MESSAGE_LINES) or f"make {run.describe()}"
    else:
        log = Path(build_dir) / "ptxas.log"
        if log.is_file():
            result.kernels = parse_ptxas_log(log.read_text(errors="replace"))
    return result


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


_MANGLED = re.compile(r"^_Z(\d+)")


def short_name(mangled: str) -> str:
    """'tiled' for '_Z5tiledPKfPfi'; other names (extern "C", nested) unchanged."""
    m = _MANGLED.match(mangled)
    if m:
        length = int(m.group(1))
        name = mangled[m.end():m.end() + length]
        if len(name) == length:
            return name
    return mangled
