"""The diagnosis without counters (grader/README.md, section 8), from the build (command.static_facts),
the launches the audit saw in the bench run (only kernels that ran are diagnosed) and the GPU's limits
per SM (gpuprobe).  Figures per kernel, read by the rules of mode "code":

- gld/gst_sectors_per_request: the mean over analysable global loads (stores) of the 32-byte sectors a
  warp's request touches (lane i is threadIdx (i % blockDim.x, i / blockDim.x); a stride holding a
  kernel parameter puts each lane in a sector of its own); *_ideal_sectors, global_excess as in
  counters mode; shared_conflict_share: the mean share of replayed wavefronts ((k - 1) / k for k ways);
  worst_global_*, worst_shared_*: the worst access's PTX line, operation, stride and figure;
- theoretical_occupancy (percent), occupancy_limiter, limited_by_*: the Occupancy Calculator's rule;
- spill_bytes, registers, block_size, smem_per_block, div_rem_ptx, div_rem_per_cell as in counters mode.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ...base import gpuprobe
from ...grading import bench as grading_bench
from . import access
from .common import EXIT_FAILED, ProfileError, bench_cells, build_figures, inputs_record

#: The environment variable that forces this mode (`make profile` where the counters would work).
FORCE_ENV = "STENCIL_PROFILE_COUNTERS"
#: Registers are allocated per warp in units of this many (CUDA Occupancy Calculator).
REGISTER_UNIT = 256


def forced(environ=None) -> bool:
    """True when STENCIL_PROFILE_COUNTERS=off (or 0, no) asks for the diagnosis without counters."""
    env = os.environ if environ is None else environ
    return env.get(FORCE_ENV, "").strip().lower() in ("off", "0", "no")


def require_gpu() -> gpuprobe.ProbeResult:
    """The GPU the bench will run on (the probe's quick form); ProfileError when there is none."""
    probe = gpuprobe.probe(quick=True)
    if not probe.ok:
        raise ProfileError(f"no GPU to run the bench on ({probe.message or probe.status}): nothing to diagnose here")
    return probe


def collect(spec, impl: str, build_dir, seed: int | None, static: dict, why: str) -> dict:
    """Run the bench (as make check does) and the probe; returns the inputs record of this mode.
    why: why there are no counters (shown in the report).  The graded BUILD_DIR/bench.json is put
    back, this run's kept as profile-bench.json.  Raises ProfileError."""
    probe = require_gpu()
    graded = Path(build_dir) / "bench.json"
    kept = graded.read_bytes() if graded.is_file() else None
    try:
        run = grading_bench.run_bench(build_dir, spec.bench.timeout_s, seed)
    finally:
        if graded.is_file():
            shutil.copyfile(graded, Path(build_dir) / "profile-bench.json")
        if kept is not None:
            graded.write_bytes(kept)
        else:
            graded.unlink(missing_ok=True)
    if not run.data:
        raise ProfileError(f"the bench did not run ({run.status}: {run.message})", EXIT_FAILED)
    return inputs_record(spec, impl, "code", run.data.get("device"), no_counters=why, limits=probe.limits,
                         bench=run.data, static=static)


def occupancy(threads: int, registers: int, smem: int, limits: dict) -> tuple[float | None, list[str]]:
    """(theoretical occupancy in percent, what limits it) of blocks of `threads` threads using
    `registers` per thread and `smem` bytes of shared memory, on an SM with these limits."""
    warp_slots = limits.get("threads_per_sm", 0) // 32
    if not threads or not warp_slots:
        return None, []
    warps = -(-threads // 32)
    by = {"block size (warps per SM)": warp_slots // warps, "blocks per SM": limits.get("blocks_per_sm") or 10**6}
    if registers:
        per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
        by["registers"] = limits.get("registers_per_sm", 0) // (per_warp * warps)
    if smem:
        by["shared memory"] = limits.get("smem_per_sm", 0) // (smem + limits.get("smem_reserved_per_block", 0))
    least = min(by.values())
    return 100.0 * least * warps / warp_slots, [what for what, n in by.items() if n == least]


def _stride_text(stride: list | None, value) -> str:
    if value == "runtime":
        params = sorted({a.rsplit("_param_", 1)[-1].split("+")[0] for atoms, _ in stride or [] for a in atoms
                         if a.startswith("param:")})
        which = f"the kernel's parameter {', '.join(str(int(p) + 1) for p in params if p.isdigit())}" if params \
            else "a run-time value"
        return f"a multiple of {which} (such as a row length)"
    return f"{value} bytes"


def _accesses(fact: dict, block: list[int], grid: list[int]) -> dict:
    """The access figures of one kernel (module docstring)."""
    widest = max([a["width"] for a in fact.get("accesses", []) if a["space"] == "global"] + [4])
    loads, stores, shares, worst, skipped = [], [], [], {}, 0
    for a in fact.get("accesses", []):
        sx, sy = (access.stride_bytes(a[k], block, grid) for k in ("stride_x", "stride_y"))
        if sx is None or (block[0] < 32 and not isinstance(sy, int)) or (a["space"] != "global" and sx == "runtime"):
            skipped += 1
            continue
        offsets = access.lane_offsets(sx if isinstance(sx, int) else 0, sy if isinstance(sy, int) else 0, block[0])
        if a["space"] == "global":
            figure = 32 if sx == "runtime" else access.global_sectors(offsets, a["width"])
            (loads if a["op"] == "load" else stores).append(figure)
        else:
            fronts, ideal = access.shared_wavefronts(offsets, a["width"])
            shares.append((fronts - ideal) / fronts)
            figure = fronts / ideal
        prefix = "worst_global" if a["space"] == "global" else "worst_shared"
        if prefix not in worst or figure > worst[prefix][0]:
            worst[prefix] = (figure, a, _stride_text(a["stride_x"], sx))
    mean = (lambda v: sum(v) / len(v) if v else None)
    f = {"gld_sectors_per_request": mean(loads), "gst_sectors_per_request": mean(stores),
         "gld_ideal_sectors": float(widest), "gst_ideal_sectors": float(widest),
         "shared_conflict_share": mean(shares), "accesses_analysed": len(loads) + len(stores) + len(shares),
         "accesses_skipped": skipped}
    ratios = [x / widest for x in (f["gld_sectors_per_request"], f["gst_sectors_per_request"]) if x is not None]
    f["global_excess"] = max(ratios) if ratios else None
    for prefix, (figure, a, stride) in worst.items():
        f.update({f"{prefix}_figure": float(figure), f"{prefix}_line": float(a["line"]), f"{prefix}_op": a["op"],
                  f"{prefix}_width": float(a["width"]), f"{prefix}_stride": stride})
    return f


def derive(fact: dict, launch: dict | None, inputs: dict) -> dict:
    """The figures of one kernel (module docstring).  launch: the audit's record of it (None: it
    was not audited; lanes are then taken as consecutive threadIdx.x and the occupancy is unknown)."""
    seen = launch or {}
    block, grid = list(seen.get("block") or [32, 1, 1]), list(seen.get("grid") or [0, 0, 0])
    threads = block[0] * block[1] * block[2]
    smem = seen.get("static_smem", 0) + seen.get("dynamic_smem", 0) if launch else None
    registers = seen.get("registers") or fact.get("registers") or 0
    cells = bench_cells(inputs["bench"])
    occ, limiters = occupancy(threads, registers, smem or 0, inputs.get("limits") or {}) if launch else (None, [])
    threads_per_cell = grid[0] * grid[1] * grid[2] * threads / cells if launch and cells else None
    return _accesses(fact, block, grid) | build_figures(fact, limiters, threads_per_cell) | {
        "theoretical_occupancy": occ,
        "registers": float(registers) if registers else None, "block_size": float(threads) if launch else None,
        "smem_per_block": float(smem) if smem is not None else None,
        "launches": float(launch.get("count", 0)) if launch else None}


def kernels(inputs: dict) -> list[dict]:
    """The kernels to diagnose: those the audit saw launched (every kernel of the build when
    the audit did not run), each with its figures."""
    static = inputs.get("static", {})
    audit = (inputs["bench"].get("audit") or {})
    launched: dict[str, dict] = {}
    for x in audit.get("launches") or []:
        if x.get("kind") == "kernel" and x.get("name") in static:
            launched.setdefault(x["name"], x)
    names = list(launched) if audit.get("status") == "ok" else list(static)
    out = []
    for name in names:
        fact = static[name]
        launch = launched.get(name)
        out.append({"name": name, "label": fact.get("label", name),
                    "block": "({}, {}, {})".format(*launch["block"]) if launch else "?",
                    "grid": "({}, {}, {})".format(*launch["grid"]) if launch else "?",
                    "static": fact, "figures": derive(fact, launch, inputs)})
    return out
