"""The dashed ceilings under the tour's roof: the fp32 peak without FMA (lab 8's) and the rate ceilings
of DESIGN_COUNTS, one design's cost per cell update of one resource, counted once by hand for one build;
and this GPU's shared-memory roof, measured (grader/harness/smem_roof.cu built and run):

    python3 grader/grade.py smem-roof [--json handouts/data/SLUG/smem-roof.json]   (make smem-roof SLUG=h100)

The program reports, for conflict-free loads of 4 and of 16 bytes, the bytes per clock one SM's shared
memory delivers (the median over the SMs, and the lowest); the hardware's figure is 128 (32 banks x 4 bytes,
CUDA C++ Programming Guide, "Shared Memory").  Its record (kind "smem-roof", rows "4B" and "16B") replaces
that figure in the shared-memory ceiling (roofline_ceilings).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec, toolkit
from ..base.cliargs import UsageError
from ..grading import plot
from ..grading.plot import FP32_LANES_PER_SM, positive
from .records import DATA_DIR, RecordError, load_recordings, record_header

#: Thread instructions an SM issues per clock at most: 4 warp schedulers, one warp instruction each
#: (Volta to Hopper: NVIDIA's V100, A100 and H100 architecture whitepapers).
ISSUE_PER_SM_PER_CLOCK = 4 * 32
#: Four-byte shared-memory accesses an SM serves per clock without bank conflicts: 32 banks of 4 bytes
#: (CUDA C++ Programming Guide, compute capabilities 5.x and later, "Shared Memory").
SHARED_ACCESSES_PER_SM_PER_CLOCK = 32


@dataclass(frozen=True)
class Ceiling:
    """`gflops` useful GFLOP/s at most for the kernels `label` names; `how`: the arithmetic (the legend's)."""

    label: str
    gflops: float
    how: str


def peak_fp32_no_fma_gflops(sm_count: int, clock_mhz: float, lanes_per_sm: int = FP32_LANES_PER_SM) -> float:
    """Half of plot.peak_fp32_gflops: each lane completes one FMUL or FADD (1 FLOP) per clock where an
    FMA is 2; lab 8 rounds every product and sum on its own (__fmul_rn, __fadd_rn), so this is its roof."""
    return plot.peak_fp32_gflops(sm_count, clock_mhz, lanes_per_sm) / 2


def rate_ceiling_gflops(sm_count: int, clock_mhz: float, per_sm_per_clock: float, per_useful_update: float,
                        flop_per_cell: float) -> float:
    """Useful GFLOP/s allowed by a resource every SM serves at per_sm_per_clock, when a useful update
    costs per_useful_update of it (redundant updates included): SMs x rate x clock / cost x FLOP per
    update.  A ceiling, not a prediction (the resource busy on every clock).  ValueError unless > 0."""
    return (positive("sm_count", sm_count) * positive("per_sm_per_clock", per_sm_per_clock)
            * positive("clock_mhz", clock_mhz) * 1e6 / positive("per_useful_update", per_useful_update)
            * positive("flop_per_cell", flop_per_cell) / 1e9)


def strip_redundancy(K: int, VEC: int, SEG: int, **_ignored) -> float:
    """Cell updates per useful one of lab 8's reference (its kernel's header): a warp's strip is
    32 VEC columns with H = VEC x ceil(K / VEC) halo columns on each side, so it stores 32 VEC - 2H;
    a segment of SEG stored rows computes SEG + 2K.  R = 32 VEC / (32 VEC - 2H) x (SEG + 2K) / SEG
    (K = 8, VEC = 4, SEG = 128: 128/112 x 144/128 = 1.29)."""
    strip = 32 * VEC
    halo = -(-K // VEC) * VEC
    if strip <= 2 * halo or SEG < 1:
        raise ValueError(f"K={K}, VEC={VEC}, SEG={SEG}: a strip of {strip} columns stores none")
    return strip / (strip - 2 * halo) * (SEG + 2 * K) / SEG


def tile_redundancy(K: int, tx: int, ty: int) -> float:
    """Cell updates per useful one of an overlapped tile (handouts/08-temporal-blocking.md, "Design 1"):
    sweep s of K computes (tx + 2(K-s)) x (ty + 2(K-s)) cells for tx x ty useful ones, so
    R = 1 + (K-1)(tx + ty)/(tx ty) + 2(K-1)(2K-1)/(3 tx ty)  (128 x 64 at K = 8: 1.173)."""
    return 1 + (K - 1) * (tx + ty) / (tx * ty) + 2 * (K - 1) * (2 * K - 1) / (3 * tx * ty)


@dataclass(frozen=True)
class DesignCount:
    """What one design's hot loop costs per cell update of one resource (rate_ceiling_gflops).  row: the
    tour row (records.row_id) counted; params: the TUNE_ parameters of the build counted (None: none),
    which the build the tour timed must have for the ceiling to be drawn."""

    row: str
    label: str
    unit: str                   # what is counted: "instructions", "shared-memory accesses"
    per_update: float
    per_sm_per_clock: int
    redundancy: float
    params: dict | None
    source: str


#: The one place of the design counts that the tour's roofline draws as ceilings (2D, 9 FLOP per
#: update).  Lab 8's handout ("The roofs") and answer key derive them; the counts are development
#: notes, made once by hand, and must be made again when the kernel changes.
DESIGN_COUNTS = (
    DesignCount(
        "08/reference", "instruction issue, lab 8 reference", "instructions",
        per_update=732 / 64, per_sm_per_clock=ISSUE_PER_SM_PER_CLOCK,
        redundancy=strip_redundancy(K=8, VEC=4, SEG=128),
        params={"K": 8, "VEC": 4, "SEG": 128, "WARPS": 2, "OCC": 16, "AHEAD": 3},
        source="nvdisasm of the sm_90 build (CUDA 13.0) of reference/08-temporal-blocking/kernel.cu with "
               "these parameters (an H100, 2026-11-25, a development note): the interior loop issues 732 "
               "instructions per two rows of a thread, 64 cell updates (576 FMUL and FADD, 32 SHFL, 31 MOV, "
               "8 LDS, loop and addresses), 11.4 per update; times 1.29 updates per useful one "
               "(strip_redundancy)"),
    DesignCount(
        "08/good_overlapped_tile", "shared memory, overlapped tile", "shared-memory accesses",
        per_update=6, per_sm_per_clock=SHARED_ACCESSES_PER_SM_PER_CLOCK,
        redundancy=tile_redundancy(8, 128, 64), params=None,
        source="its source: 5 operand loads and 1 store of 4 bytes in shared memory per update, a 128 x 64 "
               "tile at K = 8 (tile_redundancy: 1.17 updates per useful one); conflict-free at best"),
)


def roofline_ceilings(rows: list, sm_count: int, clock_mhz: float, params_of=None,
                      shared_bytes_per_clock: float | None = None) -> tuple[list[Ceiling], list[str]]:
    """The ceilings of the tour's roofline and a note for each one left out: with any 2D row, the fp32
    peak without FMA; for each DESIGN_COUNTS row in the tour, its rate ceiling when params_of(lab,
    impl) (the TUNE_ parameters of the build timed; None: unknown) equals the count's params.
    rows: tour.TourRow; sm_count and clock_mhz (maximum SM clock, MHz) as for plot.peak_fp32_gflops;
    shared_bytes_per_clock: the GPU's measured shared-memory roof for 4-byte loads (bytes per clock per SM,
    measured by smem-roof), which replaces SHARED_ACCESSES_PER_SM_PER_CLOCK x 4; None: the datasheet's."""
    two_d = [r for r in rows if r.part_id != "3d" and not r.part.startswith("3D")]
    if not two_d:
        return [], []
    notes: list[str] = []
    ceilings = [Ceiling(
        "fp32 without FMA (2D)", peak_fp32_no_fma_gflops(sm_count, clock_mhz),
        f"half the FMA peak: {sm_count} SMs x {FP32_LANES_PER_SM} lanes x 1 FLOP x {clock_mhz:.0f} MHz; "
        "lab 8 rounds every product and sum (__fmul_rn, __fadd_rn)")]
    timed = {r.id: r for r in two_d}
    for count in DESIGN_COUNTS:
        row = timed.get(count.row)
        if row is None:
            continue
        if count.params is not None:
            used = params_of(row.lab, row.impl) if params_of else None
            if used != count.params:
                text = [" ".join(f"{k}={v}" for k, v in p.items()) if p else "unknown parameters"
                        for p in (count.params, used)]
                notes.append(f"(no {count.label} ceiling: its count holds for the build {text[0]}, this tour built "
                             f"{text[1]})")
                continue
        work = labspec.load(KIT_ROOT / "labs" / row.lab / "lab.json").kind.launchers[0]
        rate, label = count.per_sm_per_clock, count.label
        if shared_bytes_per_clock and count.per_sm_per_clock == SHARED_ACCESSES_PER_SM_PER_CLOCK:
            rate, label = shared_bytes_per_clock / 4, f"{count.label} (measured roof)"
        gflops = rate_ceiling_gflops(sm_count, clock_mhz, rate, count.per_update * count.redundancy,
                                     work.flop_per_cell)
        ceilings.append(Ceiling(
            label, gflops,
            f"{sm_count} SMs x {rate:.4g} {count.unit} per clock x {clock_mhz:.0f} MHz / "
            f"({count.per_update:.1f} per update x {count.redundancy:.2f} updates per useful one); "
            f"{gflops * work.bytes_per_cell / work.flop_per_cell:,.0f} GB/s effective"))
    return ceilings, notes


# ------------------------------------------------------------------ the measured shared-memory roof

SMEM_ROOF_CU = KIT_ROOT / "grader" / "harness" / "smem_roof.cu"
SMEM_ROOF_DIR = KIT_ROOT / "build" / "smem-roof"


def run_program(argv: list[str], timeout_s: float, failing: str) -> subprocess.CompletedProcess:
    """argv run to its end, its output captured as text, whatever its exit status.  Raises
    UsageError("<failing>: <why>") when it cannot start or runs past timeout_s."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UsageError(f"{failing}: {err}") from None


def build_smem_roof(cc: str, nvcc: str | None = None, out_dir: Path = SMEM_ROOF_DIR) -> Path:
    """smem_roof built for compute capability cc ("9.0") into out_dir; its path.  Raises UsageError (exit 2)
    without nvcc or when nvcc fails (its last lines)."""
    nvcc = nvcc or toolkit.find_nvcc()
    if nvcc is None:
        raise UsageError(f"smem-roof needs nvcc (the CUDA toolkit): {toolkit.why_no_nvcc()}")
    arch = cc.replace(".", "")
    out = Path(out_dir) / f"smem_roof-sm_{arch}"
    out.parent.mkdir(parents=True, exist_ok=True)
    done = run_program([nvcc, "-O3", "-std=c++17", f"-arch=sm_{arch}", "-o", str(out), str(SMEM_ROOF_CU)], 300,
                       f"nvcc could not build {SMEM_ROOF_CU.name}")
    if done.returncode != 0:
        last = " / ".join(done.stderr.strip().splitlines()[-3:])
        raise UsageError(f"nvcc could not build {SMEM_ROOF_CU.name}: {last}")
    return out


def measure_smem_roof(binary: Path, timeout_s: float = 120) -> dict:
    """What the program printed (its JSON object, grader/harness/smem_roof.cu).  Raises UsageError when it
    fails (no GPU, a CUDA error: its message), runs past timeout_s or prints no JSON."""
    done = run_program([str(binary)], timeout_s, f"{binary.name} did not run to its end")
    if done.returncode != 0:
        raise UsageError((done.stderr.strip() or f"{binary.name} ended with exit status {done.returncode}"))
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        raise UsageError(f"{binary.name} printed no JSON: {done.stdout[:200]!r}") from None


def smem_roof_record(data: dict, source: str) -> dict:
    """The record of one run (kind "smem-roof", its fields: records.RECORD_FORMAT) from what it printed."""
    record = record_header("smem-roof", source, {"name": data["device"], "compute_capability": data["cc"],
                                                 "sm_count": data["sm_count"]})
    record["rows"] = [{"id": f"{a['bytes']}B", **a} for a in data["accesses"]]
    return record


def recorded_bytes_per_clock(slug: str, width: int = 4, data_dir: Path = DATA_DIR) -> float | None:
    """The recorded bytes per clock per SM of `width`-byte loads on GPU `slug`; None without a recording."""
    try:
        record = load_recordings(data_dir).get(slug, "smem-roof").data
    except RecordError:
        return None
    row = next((r for r in record["rows"] if r["id"] == f"{width}B"), None)
    return float(row["bytes_per_clock_per_sm"]) if row else None
