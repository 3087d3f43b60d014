"""The launch audit's rules on what the student's launcher really started on the GPU.

Reads the bench JSON's "audit" records (keys: base/protocol.py) and the SASS of each launched kernel
(sass.py, matched by mangled name); each rule is a StaticCheck of severity "constraint": "launch
stream", "host memory", "shared tile", "max shared planes", "grid storage", "no float atomics".  It
fails closed: lost records fail every rule, a launched kernel missing from the machine code fails the
rules that read code; without the audit (no CUPTI) a rule is "not verified".  What each rule measures
and why: grader/README.md, sections 3 and 6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..base.labspec import LabSpec
from . import sass
from .checks import MAX_REPORTED, StaticCheck
from .names import kernel_label

#: Cells of one plane a thread may own, for the plane rule's upper bound: two rows of its
#: widest global load (lab 5's design), or fewer.
CELLS_PER_THREAD_ROWS = 2
#: Bytes of one cell of a grid: the API's grids are float.
CELL_BYTES = 4


def _audit(data: dict) -> dict:
    return data.get("audit") or {}


def _launches(data: dict) -> list[dict]:
    return [x for x in _audit(data).get("launches", []) if isinstance(x, dict)]


def _kernels(data: dict) -> list[dict]:
    return [x for x in _launches(data) if x.get("kind") == "kernel"]


def _rule(name: str, status: str, message: str, details: list[str] | None = None) -> StaticCheck:
    return StaticCheck(name, status, "constraint", message, details or [])


def _not_verified(name: str, data: dict) -> StaticCheck | None:
    """A skipped check saying why, when the audit did not run; None when it did."""
    audit = _audit(data)
    return None if audit.get("status") == "ok" else \
        _rule(name, "skipped", f"not verified: {audit.get('message') or 'the launch audit did not run'}")


def stream_check(data: dict) -> StaticCheck:
    """Every audited operation on the launcher's stream (module docstring)."""
    name = "launch stream"
    if skipped := _not_verified(name, data):
        return skipped
    elsewhere = [x for x in _launches(data) if not x.get("on_launcher_stream", True)]
    calls = _audit(data).get("calls", 0)
    if not elsewhere:
        return _rule(name, "pass", f"every kernel and copy of {calls} audited call(s) ran on the launcher's stream")
    details = [f"{x['launcher']}: {x['kind']} {kernel_label(x['name'])} ran on stream "
               f"{x['stream']} ({x['count']} time(s) in {calls} audited call(s))"
               for x in elsewhere[:MAX_REPORTED]]
    return _rule(name, "fail", f"{len(elsewhere)} operation(s) ran on another stream than the one the launcher was "
                 "given (the legacy default stream, cudaStreamPerThread, or stream 0 in a file built for per-thread "
                 "default streams): launch every kernel and copy on `stream`; performance gets 0", details)


def block_cells(nx: int, ny: int, grid: list[int], threads: int, cells_per_thread: int) -> tuple[float, float]:
    """(the block's share of an x-y plane, nx * ny / (gridDim.x * gridDim.y), the cells its threads
    hold at once: at most threads x cells_per_thread)."""
    share = nx * ny / max(1, grid[0] * grid[1])
    return share, min(share, threads * cells_per_thread)


def tile_bound(halo: int, nx: int, ny: int, grid: list[int], threads: int, load_bytes: int) -> tuple[int, str]:
    """(the fewest bytes of shared memory per block that hold the block's input tile, how):
    4 bytes x (F + 4 halo sqrt(F)), F the cells the block's threads load at once (block_cells;
    grader/README.md, section 3)."""
    share, cells = block_cells(nx, ny, grid, threads, max(1, load_bytes // CELL_BYTES))
    needed = int(math.ceil(CELL_BYTES * (cells + 4 * halo * math.sqrt(cells))))
    how = (f"{CELL_BYTES} bytes x ({cells:.0f} cells" + (f" + a halo of {halo}: 4 x {halo} x sqrt({cells:.0f})"
                                                           if halo else "") +
           f"): {threads} threads x {max(1, load_bytes // CELL_BYTES)} cell(s) a load, at most the block's "
           f"share of a {nx} x {ny} plane ({share:.0f})")
    return needed, how


def plane_bound(planes: int, factor: float, nx: int, ny: int, grid: list[int], threads: int,
                load_bytes: int) -> tuple[int, str]:
    """(bytes of shared memory per block that `planes` planes of a kernel's tile may use, how):
    planes x factor x 4 bytes x C, C at most CELLS_PER_THREAD_ROWS rows of its widest load a
    thread (block_cells), factor SharedTile.plane_factor."""
    per_thread = CELLS_PER_THREAD_ROWS * max(1, load_bytes // CELL_BYTES)
    share, cells = block_cells(nx, ny, grid, threads, per_thread)
    allowed = int(math.floor(planes * factor * CELL_BYTES * cells))
    how = (f"{planes} plane(s) x {factor:g} (halo and padding) x {CELL_BYTES} bytes x {cells:.0f} cells "
           f"(the block's share of a {nx} x {ny} plane: {share:.0f}; at most {threads} threads x "
           f"{per_thread} cells)")
    return allowed, how


class _Kernel:
    """One launched kernel as the rules read it: its audit record, shape and SASS (fn: None when
    the student's machine code lacks it)."""

    def __init__(self, record: dict, code: Code):
        self.record, self.grid, block = record, record["grid"], record["block"]
        self.threads = block[0] * block[1] * block[2]
        self.used = int(record["static_smem"]) + int(record["dynamic_smem"])     # bytes per block
        self.fn = code.get(record["name"])
        self.load_bytes = (sass.widest_global_load(self.fn) if self.fn else 4) or 4   # its widest global load
        self.shown = kernel_label(record["name"])
        self.configuration = (f"{'x'.join(map(str, self.grid))} blocks of {'x'.join(map(str, block))} threads, "
                              f"{self.used} bytes of shared memory per block ({record['static_smem']} static, "
                              f"{record['dynamic_smem']} dynamic)")


@dataclass
class Code:
    """The student's kernels as the driver loaded them on the GPU that ran (sass.for_device)."""

    kernels: dict[str, sass.SassFunction]
    elf: str                            # "sm_90", or why there is none

    def get(self, name: str) -> sass.SassFunction | None:
        """The kernel's code, or None when it has none, or more than one (sass.SassFunction.copies)."""
        fn = self.kernels.get(name)
        return fn if fn and fn.copies == 1 else None

    def missing(self, name: str) -> str:
        once = " once" if name in self.kernels else ""
        return (f"kernel {kernel_label(name)} was launched but is not in the machine code of kernel.cu{once} "
                f"({self.elf}): the audit cannot match it to the code that ran")


def _failed(name: str, failures: list[str], details: list[str], tail: str = ": performance gets 0") -> StaticCheck:
    return _rule(name, "fail", failures[0] + (
        f" (and {len(failures) - 1} more finding(s))" if len(failures) > 1 else "") + tail, failures[1:] + details)


def tile_check(spec: LabSpec, data: dict, code: Code) -> StaticCheck | None:
    """lab.json constraints.shared_tile against every launched kernel (None when the lab has none)."""
    tile = spec.constraints.shared_tile
    if tile is None:
        return None
    name = "shared tile"
    if skipped := _not_verified(name, data):
        return skipped
    nx, ny = int(data["nx"]), int(data["ny"])
    failures, details = [], []
    for k in (_Kernel(x, code) for x in _kernels(data)):
        needed, how = tile_bound(tile.halo, nx, ny, k.grid, k.threads, k.load_bytes)
        if k.fn is None:
            failures.append(code.missing(k.record["name"]))
        elif k.used < needed:
            failures.append(f"kernel {k.shown} uses {k.used} bytes of shared memory per block, less than the "
                            f"{needed} bytes of its block's input tile")
        elif not sass.reads_shared(k.fn):
            failures.append(f"kernel {k.shown} never reads shared memory (no LDS in its machine code): a tile "
                            "that is only declared, or only written, is no tile")
        details.append(f"kernel {k.shown}: {k.configuration}; its input tile needs at least {needed} = {how}")
    if not details:
        failures.append("the launcher started no kernel")
    if failures:
        launched = {x["name"] for x in _kernels(data)}
        unlaunched = [f"kernel {kernel_label(n)} uses shared memory but was never launched: it counts for nothing"
                      for n, fn in code.kernels.items() if n not in launched and sass.uses_shared(fn)]
        return _failed(name, failures, details + unlaunched,
                       f". This rule measures, on every kernel your launcher starts (the launch audit), its "
                       f"shared memory per block and whether its machine code reads it; the lab asks: {tile.rule} "
                       "Performance gets 0")
    return _rule(name, "pass", "every kernel the launcher started stages at least its block's input tile in shared "
                 "memory and reads it", details)


def planes_check(spec: LabSpec, data: dict, code: Code) -> StaticCheck | None:
    """lab.json constraints.max_shared_planes against the audited launches (None without it)."""
    planes = spec.constraints.max_shared_planes
    if planes is None:
        return None
    name = "max shared planes"
    if skipped := _not_verified(name, data):
        return skipped
    factor = spec.constraints.shared_tile.plane_factor
    nx, ny = int(data["nx"]), int(data["ny"])
    failures, details = [], []
    for k in (_Kernel(x, code) for x in _kernels(data)):
        if k.fn is None:
            failures.append(code.missing(k.record["name"]))
        if k.used == 0:
            continue
        allowed, how = plane_bound(planes, factor, nx, ny, k.grid, k.threads, k.load_bytes)
        if k.used > allowed:
            failures.append(f"kernel {k.shown} uses {k.used} bytes of shared memory per block, more than the "
                            f"{allowed} bytes that {planes} plane(s) of its tile need")
        details.append(f"kernel {k.shown}: launched with {k.configuration}; at most {allowed} allowed = {how}")
    if failures:
        return _failed(name, failures, details)
    if not details:
        return _rule(name, "pass", "no kernel launched with shared memory")
    return _rule(name, "pass", f"at most {planes} plane(s) of shared memory per block, as launched: every kernel "
                 "within its bound", details)


def _code_rule(data: dict, code: Code, launchers: set[str] | None, finder) -> tuple[list[str], str]:
    """(findings of finder(fn) on every launched kernel of `launchers` (all: None), or on every kernel
    of the machine code when the audit did not run; which kernels were read)."""
    if _audit(data).get("status") != "ok":
        return ([f"{fn.where(o)}: {op}" for fn in code.kernels.values() for o, op in finder(fn)],
                f"kernel of the machine code ({code.elf}; the launch audit did not run)")
    found = []
    for x in _kernels(data):
        if launchers is None or x.get("launcher") in launchers:
            fn = code.get(x["name"])
            found += [code.missing(x["name"])] if fn is None else [f"{fn.where(o)}: {op}" for o, op in finder(fn)]
    return list(dict.fromkeys(found)), f"launched kernel ({code.elf})"


def storage_check(spec: LabSpec, data: dict, code: Code) -> StaticCheck | None:
    """lab.json constraints.grid_storage: no launched kernel reads or writes global memory in
    a narrower format than fp32 (sass.narrow_accesses).  None when the lab states none."""
    storage = spec.constraints.grid_storage
    if storage is None:
        return None
    name = "grid storage"
    found, which = _code_rule(data, code, None, sass.narrow_accesses)
    if not found:
        return _rule(name, "pass", f"every {which} reads and writes global memory as {storage.type} or wider")
    return _rule(name, "fail", f"a {which} reads or writes global memory in a narrower format than {storage.type} "
                 f"({found[0]}). This rule measures the width of every global load and store (and conversions to "
                 f"half or 8-bit floats) in the machine code; the lab asks: {storage.rule} Performance gets 0",
                 found[:MAX_REPORTED])


def atomics_check(data: dict, code: Code) -> StaticCheck | None:
    """No floating-point atomic (or compare-and-swap) in a launched kernel of a launcher the kind
    asks determinism of (bench JSON launchers[].repeats > 0).  None when it asks of none."""
    deterministic = {x.get("name") for x in data.get("launchers") or [] if x.get("repeats", 0) > 0}
    if not deterministic:
        return None
    name = "no float atomics"
    if skipped := _not_verified(name, data):
        return skipped
    found, which = _code_rule(data, code, deterministic, sass.float_atomics)
    if not found:
        return _rule(name, "pass", f"no floating-point atomic in a {which} of {', '.join(sorted(deterministic))}")
    return _rule(name, "fail", f"a {which} adds with a floating-point atomic or a compare-and-swap ({found[0]}): "
                 "the order of such additions changes from run to run, so the sum's bits do, whatever is rounded "
                 "afterwards; sum in a fixed order (a tree, then one block or a last-block pass). Performance gets 0",
                 found[:MAX_REPORTED])


#: CUPTI's memory kinds that are the GPU's own (audit.c names them).
DEVICE_MEMORY = {"device", "device_static", "array"}


def host_memory_check(data: dict) -> StaticCheck:
    """No audited copy or set reached memory outside the GPU (module docstring)."""
    name = "host memory"
    if skipped := _not_verified(name, data):
        return skipped
    reached = [x for x in _launches(data) if x.get("kind") in ("memcpy", "memset")
               and not {x.get("src_memory"), x.get("dst_memory")} <= DEVICE_MEMORY]
    if not reached:
        return _rule(name, "pass", "every copy and set stayed in the GPU's memory")
    details = [f"{x['launcher']}: a {x['kind']} of {x.get('bytes', 0)} bytes from {x.get('src_memory')} to "
               f"{x.get('dst_memory')} memory ({x['count']} time(s))" for x in reached[:MAX_REPORTED]]
    return _rule(name, "fail", f"{details[0]}: a launcher works in the device buffers it is given, and the audit "
                 "saw it reach host (or unknown) memory, whatever the source calls it; performance gets 0", details)


def _blind(data: dict) -> str | None:
    """Why the audit cannot vouch for what it saw (records lost), or None."""
    audit = _audit(data)
    if audit.get("status") != "ok" or isinstance(lost := audit.get("lost", 0), int) and lost == 0:
        return None
    return (f"the audit could not see every launch: {lost} record(s) of the audited calls were lost (more "
            "operations than it keeps, records CUPTI dropped, or a call it could not delimit); every rule it "
            "feeds fails rather than pass on what it saw")


def check_launches(spec: LabSpec, data: dict | None, build_dir: Path, program: str = "bench") -> list[StaticCheck]:
    """The audit's checks for one timed run (empty when there are no bench figures), on the machine
    code of BUILD_DIR/<program>, the program that ran it (bench.BenchRun.program).  Raises
    sass.SassError when that program cannot be disassembled."""
    if not data:
        return []
    c = spec.constraints
    reads_code = c.shared_tile or c.max_shared_planes is not None or c.grid_storage or \
        any(x.get("repeats", 0) > 0 for x in data.get("launchers") or [])
    kernels, elf = sass.for_device(sass.student_code(build_dir, data.get("cc"), program), data.get("cc")) if reads_code else ({}, "")
    code = Code(kernels, elf)
    checks = [c for c in (stream_check(data), host_memory_check(data), tile_check(spec, data, code),
                          planes_check(spec, data, code), storage_check(spec, data, code),
                          atomics_check(data, code)) if c is not None]
    if (blind := _blind(data)) is not None:
        return [_rule(c.name, "fail", blind, [c.message]) for c in checks]
    if reads_code and not kernels and _kernels(data):
        return [_rule(c.name, "skipped", f"not verified: {elf}") if c.name not in
                ("launch stream", "host memory") else c for c in checks]
    return checks
