"""The launch audit's rules: what the student's launcher really started on the GPU.

The bench records, with CUPTI, every kernel, memcpy and memset that audited
calls of the launcher started (grader/harness/audit.c; the bench JSON's
"audit"): its stream, grid, block, static and dynamic shared memory per
block, registers.  Two rules read those records, each a StaticCheck of
severity "constraint" (performance gets 0; correctness stands):

- "launch stream": every operation ran on the stream the launcher was given.
  The API says launchers are asynchronous on `stream`; work on another stream
  (the legacy default stream, cudaStreamPerThread, a file compiled for
  per-thread default streams) is not ordered with what the caller does next
  on `stream`.  (It would gain nothing in time: the bench's timer covers every
  stream a launcher can reach.)
- "max shared planes" (lab.json constraints.max_shared_planes, lab 6): each
  kernel's shared memory per block, static plus dynamic, as launched, within
  what `planes` planes of its tile need (see plane_bound).

When the audit could not run (no CUPTI), the stream rule is reported as not
verified (a note), and a lab whose constraint needs the launches gets its
performance "not measured" rather than a verdict made up from nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..base.labspec import LabSpec
from . import ptx
from .checks import MAX_REPORTED, StaticCheck

#: One plane of a block's tile with its one-cell halo ring and some padding, over the tile's
#: own cells: (tx + 2 + 2 pad)(ty + 2) / (tx ty) stays below 1.75 for tiles at least 32 cells
#: wide and 14 tall with 4 cells of padding (lab 6's reference: (128 + 8) x 16 / (128 x 14) =
#: 1.21), while two planes without any halo already need 2.
PLANE_HALO_FACTOR = 1.75
#: Cells of one plane a thread may own: two rows of a float4 (lab 5's design), or fewer.
CELLS_PER_THREAD_ROWS = 2


def kernel_label(name: str) -> str:
    """A kernel's name as the report shows it (template arguments kept)."""
    return ptx.kernel_label(name)


def _launches(data: dict) -> list[dict]:
    audit = data.get("audit") or {}
    return [x for x in audit.get("launches", []) if isinstance(x, dict)]


def stream_check(data: dict) -> StaticCheck:
    """Every audited operation on the launcher's stream (module docstring)."""
    name = "launch stream"
    audit = data.get("audit") or {}
    if audit.get("status") != "ok":
        return StaticCheck(name, "skipped", "constraint",
                           f"not verified: {audit.get('message') or 'the launch audit did not run'}")
    elsewhere = [x for x in _launches(data) if not x.get("on_launcher_stream", True)]
    calls = audit.get("calls", 0)
    if not elsewhere:
        return StaticCheck(name, "pass", "constraint",
                           f"every kernel and copy of {calls} audited call(s) ran on the launcher's stream")
    details = [f"{x.get('launcher')}: {x.get('kind')} {kernel_label(x.get('name', '?'))} ran on stream "
               f"{x.get('stream')} ({x.get('count', 1)} time(s) in {calls} audited call(s))"
               for x in elsewhere[:MAX_REPORTED]]
    return StaticCheck(name, "fail", "constraint",
                       f"{len(elsewhere)} operation(s) ran on another stream than the one the launcher was "
                       "given (the legacy default stream, cudaStreamPerThread, or stream 0 in a file built "
                       "for per-thread default streams): launch every kernel and copy on `stream`; "
                       "performance gets 0", details)


def plane_bound(planes: int, nx: int, ny: int, grid: list[int], threads: int, load_bytes: int) -> tuple[int, str]:
    """(bytes of shared memory per block that `planes` planes of a kernel's tile may use, how).

    The tile's cells in one plane: the block's share of an x-y plane of the grid,
    C = nx * ny / (gridDim.x * gridDim.y) (a kernel that marches along z keeps
    gridDim.z for z-chunks), but no more than CELLS_PER_THREAD_ROWS rows of its
    widest global load per thread (load_bytes / 4 cells each): a block that
    loops over several tiles (fewer blocks than tiles) cannot claim a larger
    share than its threads can hold.  A plane may add its halo ring and padding:
        allowed = planes x PLANE_HALO_FACTOR x 4 bytes x C.
    """
    blocks = max(1, grid[0] * grid[1])
    share = nx * ny / blocks
    per_thread = CELLS_PER_THREAD_ROWS * max(1, load_bytes // 4)
    cells = min(share, threads * per_thread)
    allowed = int(math.floor(planes * PLANE_HALO_FACTOR * 4 * cells))
    how = (f"{planes} plane(s) x {PLANE_HALO_FACTOR} (halo and padding) x 4 bytes x {cells:.0f} cells "
           f"(the block's share of a {nx} x {ny} plane: {share:.0f}; at most {threads} threads x "
           f"{per_thread} cells)")
    return allowed, how


def planes_check(spec: LabSpec, data: dict, build_dir: Path) -> StaticCheck | None:
    """lab.json constraints.max_shared_planes against the audited launches (None without it)."""
    planes = spec.constraints.max_shared_planes
    if planes is None:
        return None
    name = "max shared planes"
    audit = data.get("audit") or {}
    if audit.get("status") != "ok":
        return StaticCheck(name, "skipped", "constraint",
                           f"not verified: {audit.get('message') or 'the launch audit did not run'}")
    try:
        module = ptx.parse_ptx((Path(build_dir) / "kernel.ptx").read_text(errors="replace"))
        widths = {f.name: ptx.widest_global_load(f, module) for f in module.functions if f.kind == "entry"}
    except OSError:
        widths = {}
    nx, ny = int(data.get("nx", 1)), int(data.get("ny", 1))
    failures, details = [], []
    for x in _launches(data):
        if x.get("kind") != "kernel":
            continue
        used = int(x.get("static_smem", 0)) + int(x.get("dynamic_smem", 0))
        if used == 0:
            continue
        block, grid = x.get("block", [1, 1, 1]), x.get("grid", [1, 1, 1])
        threads = block[0] * block[1] * block[2]
        allowed, how = plane_bound(planes, nx, ny, grid, threads, widths.get(x.get("name"), 4) or 4)
        shown = kernel_label(x.get("name", "?"))
        line = (f"kernel {shown}: launched with {grid[0]}x{grid[1]}x{grid[2]} blocks of "
                f"{block[0]}x{block[1]}x{block[2]} threads, {used} bytes of shared memory per block "
                f"({x.get('static_smem', 0)} static, {x.get('dynamic_smem', 0)} dynamic); "
                f"at most {allowed} allowed = {how}")
        if used > allowed:
            failures.append(f"kernel {shown} uses {used} bytes of shared memory per block, more than the "
                            f"{allowed} bytes that {planes} plane(s) of its tile need")
        details.append(line)
    if failures:
        return StaticCheck(name, "fail", "constraint",
                           failures[0] + (f" (and {len(failures) - 1} more finding(s))" if len(failures) > 1
                                          else "") + ": performance gets 0", failures[1:] + details)
    if not details:
        return StaticCheck(name, "pass", "constraint", "no kernel launched with shared memory")
    return StaticCheck(name, "pass", "constraint",
                       f"at most {planes} plane(s) of shared memory per block, as launched: every kernel "
                       "within its bound", details)


def check_launches(spec: LabSpec, data: dict | None, build_dir: Path) -> list[StaticCheck]:
    """The audit's checks for one timed run (empty when there are no bench figures)."""
    if not data:
        return []
    checks = [stream_check(data)]
    planes = planes_check(spec, data, build_dir)
    if planes is not None:
        checks.append(planes)
    return checks
