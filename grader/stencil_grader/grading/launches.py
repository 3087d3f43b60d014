"""The launch audit's rules: what the student's launcher really started on the GPU.

The bench records, with CUPTI, every kernel, memcpy and memset that audited
calls of the launcher started (grader/harness/audit.c; the bench JSON's
"audit", keys in base/protocol.py): its stream, grid, block, static and dynamic
shared memory per block, registers.  The rules below read those records and
the PTX of each launched kernel (ptx.py), each a StaticCheck of severity
"constraint" (performance gets 0; correctness stands).  Every kernel the
launcher starts counts; a kernel that is declared and never launched counts
for nothing.

- "launch stream": every operation ran on the stream the launcher was given.
  The API says launchers are asynchronous on `stream`; work on another stream
  is not ordered with what the caller does next on `stream`.  (It gains
  nothing in time: the bench's timer covers every stream a launcher can reach.)
- "shared tile" (lab.json constraints.shared_memory, shared_tile): each kernel
  stages at least its block's input tile in shared memory, as launched, and
  reads it (tile_bound, ptx.reads_shared).
- "max shared planes" (constraints.max_shared_planes, lab 6): each kernel's
  shared memory per block within what `planes` planes of its tile need
  (plane_bound).
- "grid storage" (constraints.grid_storage): no launched kernel reads or writes
  global memory in a format narrower than the fp32 grids (ptx.narrow_accesses).

When the audit could not run (no CUPTI), the stream rule is reported as not
verified (a note), a lab whose constraint needs the launches gets its
performance "not measured" rather than a verdict made up from nothing, and the
storage rule reads every kernel of the PTX instead of the launched ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..base.labspec import LabSpec
from . import ptx
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


def _not_verified(name: str, data: dict) -> StaticCheck | None:
    """A skipped check saying why, when the audit did not run; None when it did."""
    audit = _audit(data)
    if audit.get("status") == "ok":
        return None
    return StaticCheck(name, "skipped", "constraint",
                       f"not verified: {audit.get('message') or 'the launch audit did not run'}")


def stream_check(data: dict) -> StaticCheck:
    """Every audited operation on the launcher's stream (module docstring)."""
    name = "launch stream"
    if skipped := _not_verified(name, data):
        return skipped
    elsewhere = [x for x in _launches(data) if not x.get("on_launcher_stream", True)]
    calls = _audit(data).get("calls", 0)
    if not elsewhere:
        return StaticCheck(name, "pass", "constraint",
                           f"every kernel and copy of {calls} audited call(s) ran on the launcher's stream")
    details = [f"{x['launcher']}: {x['kind']} {kernel_label(x['name'])} ran on stream "
               f"{x['stream']} ({x['count']} time(s) in {calls} audited call(s))"
               for x in elsewhere[:MAX_REPORTED]]
    return StaticCheck(name, "fail", "constraint",
                       f"{len(elsewhere)} operation(s) ran on another stream than the one the launcher was "
                       "given (the legacy default stream, cudaStreamPerThread, or stream 0 in a file built "
                       "for per-thread default streams): launch every kernel and copy on `stream`; "
                       "performance gets 0", details)


def _shape(x: dict) -> tuple[list[int], list[int], int, int]:
    """(grid, block, threads per block, bytes of shared memory per block) of a kernel record."""
    grid, block = x["grid"], x["block"]
    return grid, block, block[0] * block[1] * block[2], int(x["static_smem"]) + int(x["dynamic_smem"])


def _configuration(x: dict) -> str:
    grid, block, _, used = _shape(x)
    return (f"{grid[0]}x{grid[1]}x{grid[2]} blocks of {block[0]}x{block[1]}x{block[2]} threads, {used} bytes "
            f"of shared memory per block ({x['static_smem']} static, {x['dynamic_smem']} dynamic)")


def block_cells(nx: int, ny: int, grid: list[int], threads: int, cells_per_thread: int) -> tuple[float, float]:
    """(the block's share of an x-y plane of the grid, the cells its threads hold at once).

    share = nx * ny / (gridDim.x * gridDim.y): a kernel that marches along z keeps
    gridDim.z for z-chunks, and a 2D grid has one plane.  A block that loops over several
    tiles (fewer blocks than tiles) holds no more at once than its threads do:
    threads x cells_per_thread."""
    share = nx * ny / max(1, grid[0] * grid[1])
    return share, min(share, threads * cells_per_thread)


def tile_bound(halo: int, nx: int, ny: int, grid: list[int], threads: int, load_bytes: int) -> tuple[int, str]:
    """(the fewest bytes of shared memory per block that hold the block's input tile, how).

    The tile's own cells: F, the cells the block's threads load at once, one global
    load each (load_bytes / 4 cells a thread: 4 for a float4), but no more than the
    block's share of an x-y plane (block_cells).  Its halo: a tile of F = W x H cells
    with a halo of h cells on each side (corners left out, as a 5- or 7-point stencil
    needs none) holds F + 2h(W + H) >= F + 4h sqrt(F) cells, the least for any W and H
    (W + H >= 2 sqrt(WH)).  So
        needed = 4 bytes x (F + 4 halo sqrt(F)).
    A textbook tile, input- or output-mapped, a row buffer of a strip (lab 4) and
    lab 5's planes all hold at least that; a tile of the block's own cells without
    their halo, or a few weights, do not.
    """
    share, cells = block_cells(nx, ny, grid, threads, max(1, load_bytes // CELL_BYTES))
    needed = int(math.ceil(CELL_BYTES * (cells + 4 * halo * math.sqrt(cells))))
    how = (f"{CELL_BYTES} bytes x ({cells:.0f} cells" + (f" + a halo of {halo}: 4 x {halo} x sqrt({cells:.0f})"
                                                           if halo else "") +
           f"): {threads} threads x {max(1, load_bytes // CELL_BYTES)} cell(s) a load, at most the block's "
           f"share of a {nx} x {ny} plane ({share:.0f})")
    return needed, how


def plane_bound(planes: int, factor: float, nx: int, ny: int, grid: list[int], threads: int,
                load_bytes: int) -> tuple[int, str]:
    """(bytes of shared memory per block that `planes` planes of a kernel's tile may use, how).

    The tile's cells in one plane: the block's share of an x-y plane, but no more than
    CELLS_PER_THREAD_ROWS rows of its widest global load per thread (block_cells).  A plane
    may add its halo ring and padding, at most `factor` times its cells (lab.json's
    smallest tile, SharedTile.plane_factor):
        allowed = planes x factor x 4 bytes x C.
    """
    per_thread = CELLS_PER_THREAD_ROWS * max(1, load_bytes // CELL_BYTES)
    share, cells = block_cells(nx, ny, grid, threads, per_thread)
    allowed = int(math.floor(planes * factor * CELL_BYTES * cells))
    how = (f"{planes} plane(s) x {factor:g} (halo and padding) x {CELL_BYTES} bytes x {cells:.0f} cells "
           f"(the block's share of a {nx} x {ny} plane: {share:.0f}; at most {threads} threads x "
           f"{per_thread} cells)")
    return allowed, how


@dataclass
class _Kernel:
    """One launched kernel as the rules read it: its audit record, shape and PTX."""

    record: dict
    grid: list[int]
    threads: int
    used: int                           # bytes of shared memory per block, static plus dynamic
    fn: ptx.PtxFunction | None          # its PTX (None: not in kernel.ptx)
    load_bytes: int                     # its widest global load (4 when its PTX is missing)
    shown: str                          # its readable name


def _launched(data: dict, module: ptx.PtxModule | None) -> list[_Kernel]:
    kernels = []
    for x in _kernels(data):
        grid, _, threads, used = _shape(x)
        fn = module.function(x["name"]) if module is not None else None
        kernels.append(_Kernel(x, grid, threads, used, fn, (ptx.widest_global_load(fn, module) if fn else 4) or 4,
                               kernel_label(x["name"])))
    return kernels


def tile_check(spec: LabSpec, data: dict, module: ptx.PtxModule | None) -> StaticCheck | None:
    """lab.json constraints.shared_tile against every launched kernel (None when the lab has none)."""
    tile = spec.constraints.shared_tile
    if tile is None:
        return None
    name = "shared tile"
    if skipped := _not_verified(name, data):
        return skipped
    nx, ny = int(data["nx"]), int(data["ny"])
    failures, details = [], []
    for k in _launched(data, module):
        needed, how = tile_bound(tile.halo, nx, ny, k.grid, k.threads, k.load_bytes)
        if k.used < needed:
            failures.append(f"kernel {k.shown} uses {k.used} bytes of shared memory per block, less than the "
                            f"{needed} bytes of its block's input tile")
        elif k.fn is None:
            failures.append(f"kernel {k.shown} is not in kernel.ptx: whether it reads its tile cannot be told")
        elif not ptx.reads_shared(k.fn, module):
            failures.append(f"kernel {k.shown} never reads shared memory (no ld.shared in its PTX): a tile that "
                            "is only declared, or only written, is no tile")
        details.append(f"kernel {k.shown}: {_configuration(k.record)}; its input tile needs at least {needed} = {how}")
    if not details:
        failures.append("the launcher started no kernel")
    if failures:
        unlaunched = _unlaunched_with_shared(data, module)
        return StaticCheck(name, "fail", "constraint",
                           failures[0] + (f" (and {len(failures) - 1} more finding(s))" if len(failures) > 1 else "")
                           + f". This rule measures, on every kernel your launcher starts (the launch audit), "
                           f"its shared memory per block and whether it reads it; the lab asks: {tile.rule} "
                           "Performance gets 0", failures[1:] + details + unlaunched)
    return StaticCheck(name, "pass", "constraint",
                       "every kernel the launcher started stages at least its block's input tile in shared "
                       "memory and reads it", details)


def _unlaunched_with_shared(data: dict, module: ptx.PtxModule | None) -> list[str]:
    """A line per kernel of the PTX that uses shared memory and was never launched."""
    if module is None:
        return []
    launched = {x["name"] for x in _kernels(data)}
    return [f"kernel {kernel_label(f.name)} declares shared memory but was never launched: it counts for "
            "nothing" for f in module.functions
            if f.kind == "entry" and f.name not in launched and ptx.shared_users(ptx.PtxModule([f], module.shared))]


def planes_check(spec: LabSpec, data: dict, module: ptx.PtxModule | None) -> StaticCheck | None:
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
    for k in _launched(data, module):
        if k.used == 0:
            continue
        allowed, how = plane_bound(planes, factor, nx, ny, k.grid, k.threads, k.load_bytes)
        if k.used > allowed:
            failures.append(f"kernel {k.shown} uses {k.used} bytes of shared memory per block, more than the "
                            f"{allowed} bytes that {planes} plane(s) of its tile need")
        details.append(f"kernel {k.shown}: launched with {_configuration(k.record)}; at most {allowed} allowed = {how}")
    if failures:
        return StaticCheck(name, "fail", "constraint",
                           failures[0] + (f" (and {len(failures) - 1} more finding(s))" if len(failures) > 1
                                          else "") + ": performance gets 0", failures[1:] + details)
    if not details:
        return StaticCheck(name, "pass", "constraint", "no kernel launched with shared memory")
    return StaticCheck(name, "pass", "constraint",
                       f"at most {planes} plane(s) of shared memory per block, as launched: every kernel "
                       "within its bound", details)


def storage_check(spec: LabSpec, data: dict, module: ptx.PtxModule | None) -> StaticCheck | None:
    """lab.json constraints.grid_storage: no launched kernel reads or writes global memory in
    a narrower format than fp32 (ptx.narrow_accesses); every kernel of the PTX when the audit
    did not run.  None when the lab states no storage rule."""
    storage = spec.constraints.grid_storage
    if storage is None:
        return None
    name = "grid storage"
    if module is None:
        return StaticCheck(name, "skipped", "constraint", "not verified: kernel.ptx could not be read")
    audited = _audit(data).get("status") == "ok"
    names = [x["name"] for x in _kernels(data)] if audited else \
        [f.name for f in module.functions if f.kind == "entry"]
    found = []
    for kernel in dict.fromkeys(names):
        fn = module.function(kernel)
        if fn is not None:
            by_name = {f.name: f for f in module.functions}
            found += [f"{module.where(by_name[f], line)}: {insn} in {kernel_label(f)} (kernel "
                      f"{kernel_label(kernel)})" for insn, f, line in ptx.narrow_accesses(fn, module)]
    which = "launched kernel" if audited else "kernel of kernel.ptx (the launch audit did not run)"
    if not found:
        return StaticCheck(name, "pass", "constraint",
                           f"every {which} reads and writes global memory as {storage.type} or wider")
    return StaticCheck(name, "fail", "constraint",
                       f"a {which} reads or writes global memory in a narrower format than {storage.type} "
                       f"({found[0]}). This rule measures the width of every global load and store (and "
                       f"conversions to half or 8-bit floats) in the PTX; the lab asks: {storage.rule} "
                       "Performance gets 0", found[:MAX_REPORTED])


def check_launches(spec: LabSpec, data: dict | None, build_dir: Path) -> list[StaticCheck]:
    """The audit's checks for one timed run (empty when there are no bench figures)."""
    if not data:
        return []
    try:
        module = ptx.parse_ptx((Path(build_dir) / "kernel.ptx").read_text(errors="replace"))
    except OSError:
        module = None
    checks = [stream_check(data), tile_check(spec, data, module), planes_check(spec, data, module),
              storage_check(spec, data, module)]
    return [c for c in checks if c is not None]
