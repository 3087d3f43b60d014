"""Which C names the student's object may not define: every symbol, defined or referenced, of what
check and bench are linked with, read from the libraries themselves (never a list kept by hand).

Shared libraries: `readelf -d` (NEEDED, RUNPATH; resolved through RUNPATH, ldconfig's cache, the
usual directories) and `nm -D`, recursively; static ones with `nm -g`: the harness objects and
libharness.a, Check's libcheck.a, the CUDA runtime.  taken_names() never raises: Taken.error says
what could not be read, and the symbol check then refuses a C-linkage definition it could not clear.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import process
from .names import TOOL_TIMEOUT_S

PROGRAMS = ("check", "bench")
_SYSTEM_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
_DYNAMIC = re.compile(r"\((NEEDED|RUNPATH|RPATH)\)\s+[^\[]*\[([^\]]*)\]")
_CACHE_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


@dataclass
class Taken:
    """names: C name -> (the file that defines it, or else the first that refers to it; whether
    that file defines it); error: what could not be read ("" when everything was)."""

    names: dict[str, tuple[str, bool]] = field(default_factory=dict)
    error: str = ""

    def add(self, symbols: list[tuple[str, bool]], where: Path) -> None:
        for name, defined in symbols:
            name = name.split("@", 1)[0]
            if name not in self.names or defined and not self.names[name][1]:
                self.names[name] = (Path(where).name, defined)

    def says(self, name: str) -> str:
        """'libc.so.6 defines', or 'libfoo.so uses' for a name a file only refers to."""
        where, defined = self.names[name]
        return f"{where} {'defines' if defined else 'uses'}"


def nm_names(path: Path, dynamic: bool) -> list[tuple[str, bool]] | None:
    """(name, defined) of each symbol of a library or object (`nm -D` for a shared library's
    dynamic table, `nm -g` for an object or archive's global ones), or None when nm cannot read it."""
    run = process.run(["nm", "-D" if dynamic else "-g", str(path)], TOOL_TIMEOUT_S)
    if run.returncode != 0 and not run.stdout:
        return None
    rows = [line.split() for line in run.stdout.splitlines() if not line.endswith(":")]
    return [(parts[-1], parts[-2] not in ("U", "w", "v")) for parts in rows if len(parts) >= 2]


def dynamic_section(path: Path) -> tuple[list[str], list[str]]:
    """(NEEDED libraries, RUNPATH/RPATH directories) of an ELF file, from `readelf -d`."""
    run = process.run(["readelf", "-d", str(path)], TOOL_TIMEOUT_S)
    needed, paths = [], []
    for kind, value in _DYNAMIC.findall(run.stdout):
        if kind == "NEEDED":
            needed.append(value)
        else:
            paths += [p.replace("$ORIGIN", str(Path(path).parent)) for p in value.split(":") if p]
    return needed, paths


def ldconfig_cache() -> dict[str, str]:
    """library file name -> path, from `ldconfig -p` (the dynamic loader's cache; a 64-bit entry
    before a 32-bit one of the same name); {} without it."""
    tool = shutil.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig")
                                            if os.access(p, os.X_OK)), None)
    if not tool:
        return {}
    entries = [m.groups() for line in process.run([tool, "-p"], TOOL_TIMEOUT_S).stdout.splitlines()
               if (m := _CACHE_LINE.match(line))]
    cache: dict[str, str] = {}
    for name, _, path in sorted(entries, key=lambda e: "64" not in e[1]):
        cache.setdefault(name, path)
    return cache


def shared_libraries(programs: list[Path]) -> tuple[list[Path], list[str]]:
    """(every shared library the programs need, directly or not; the names that were not found)."""
    cache = ldconfig_cache()
    found: dict[str, Path] = {}
    missing: list[str] = []
    todo = [(Path(p), []) for p in programs]
    while todo:
        path, inherited = todo.pop()
        needed, runpath = dynamic_section(path)
        for name in needed:
            if name in found or name in missing:
                continue
            where = next((Path(d) / name for d in runpath + inherited if (Path(d) / name).is_file()), None) \
                or (Path(cache[name]) if name in cache else None) \
                or next((Path(d) / name for d in _SYSTEM_DIRS if (Path(d) / name).is_file()), None)
            if where is None:
                missing.append(name)
                continue
            found[name] = where
            todo.append((where, runpath + inherited))
    return list(found.values()), missing


def cuda_runtime(nvcc: str | None) -> Path | None:
    """The toolkit's CUDA runtime library that nvcc links (static by default), beside nvcc."""
    if not nvcc:
        return None
    root = Path(nvcc).resolve().parent.parent
    return next((d / name for d in [root / "lib64", root / "lib", *sorted(root.glob("targets/*/lib"))]
                 for name in ("libcudart_static.a", "libcudart.so") if (d / name).is_file()), None)


def check_library() -> list[Path]:
    """Check's static library (and shared one, where installed), from pkg-config's libdir."""
    if not shutil.which("pkg-config"):
        return []
    libdir = process.run(["pkg-config", "--variable=libdir", "check"], TOOL_TIMEOUT_S).stdout.strip()
    return [p for p in (Path(libdir) / "libcheck.a", Path(libdir) / "libcheck.so") if libdir and p.is_file()]


def taken_names(build_dir: Path, nvcc: str | None, kit_root: Path = KIT_ROOT) -> Taken:
    """Every C name the libraries and objects that check and bench are linked with define or
    reference (module docstring).  BUILD_DIR/kernel.o, the student's own, is left out."""
    taken, build_dir, problems = Taken(), Path(build_dir), []
    if not (shutil.which("nm") and shutil.which("readelf")):
        return Taken(error="nm or readelf (binutils) is not installed")
    programs = [build_dir / p for p in PROGRAMS if (build_dir / p).is_file()]
    if not programs:
        problems.append(f"no {' or '.join(PROGRAMS)} program in the build directory")
    libraries, missing = shared_libraries(programs)
    problems += [f"{name} not found" for name in missing]
    static = [o for o in sorted(build_dir.glob("*.o")) if o.name != "kernel.o"]
    static += sorted((Path(kit_root) / "build" / "harness").glob("*/libharness.a")) + check_library()
    runtime = cuda_runtime(nvcc)
    if runtime is None:
        problems.append("the CUDA runtime library was not found beside nvcc")
    # The harness and Check first, then the runtime, then the shared libraries by name (libc
    # first): a name several define is shown as the first's.
    for path, dynamic in [(p, False) for p in static] + ([(runtime, runtime.suffix == ".so")] if runtime else []) \
            + [(p, True) for p in sorted(libraries, key=lambda p: p.name)]:
        if (names := nm_names(path, dynamic)) is None:
            problems.append(f"nm could not read {path}")
        else:
            taken.add(names, path)
    taken.error = "; ".join(problems)
    return taken
