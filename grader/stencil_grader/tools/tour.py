"""The optimisation tour (`make tour`), target calibration (`make calibrate`), and the
recorded runs the handouts' figures come from.

tour: builds each kernel of TOUR_PARTS, times it with its lab's bench on the local
GPU, and prints the seeds' optimisation table, one table per part:

    2d    the 2D references in lab order (lab 3's modulo baseline, its starter, before
          lab 3's reference), lab 8's reference last;
    3d    the textbook's 3D kernels (kept as known submissions) and the references of
          labs 5 and 6, on the 3D bench grid;
    lab8  lab 8's other designs: its starter (one sweep per pass) and the known-good
          overlapped tile, on the 2D bench grid.

Columns: kernel, milliseconds per sweep (one launcher call's median over its sweeps,
so lab 4's and lab 8's multi-sweep calls compare fairly), effective GB/s (compulsory
bytes over the median time, 1 GB = 1e9 bytes), the fraction of the copy bandwidth
measured in the same bench run, the step speed-up (time per sweep of the row above over
this row's) and the cumulative speed-up (the part's first row over this row).  A row
whose kernel.cu is not in this copy of the kit (a student kit has no reference/ and no
tests/) is left out.  With a plot path it also draws the path as bars and the roofline
of the local GPU with every row on it (grading/plot.py; matplotlib optional), and under
its roof, dashed, the ceilings of roofline_ceilings: the fp32 peak without FMA, and the
rate ceilings of DESIGN_COUNTS (lab 8's reference: instruction issue; the overlapped
tile: shared memory).

`tour --json FILE` writes the run as a *recorded run* (record_tour), the self-describing
JSON that `grade.py figures` renders into README.md and the handouts; RECORD_FORMAT says
what every record holds.  `record-check` turns the reports a `make check` left behind into
one such record, and `calibrate --json FILE` records a calibration.

calibrate: times every lab's reference several times on the local GPU and writes a
targets entry for this GPU into each lab.json (score.calibrated_target is the rule; the
median ratio goes in as reference_ratio); other GPUs' entries are kept.  A lab whose
lab.json has a `targets_policy` (a bonus lab: the same floor and target on every GPU) is
timed for the record but never rewritten.
"""

from __future__ import annotations

import datetime
import json
import shutil
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import KIT_ROOT, __version__
from ..base import labspec, toolkit
from ..grading import bench, build, plot, score

#: The format of every recorded run (tour, check, calibrate), read by tools/figures.py:
#:   record            "tour", "check" or "calibrate"
#:   format            RECORD_FORMAT (an integer; a reader refuses a format it does not know)
#:   provisional       true while the figures are not a run of the tool named in `source`
#:   source            how the figures were produced (a command line, or where they were transcribed from)
#:   date              the day of the run, YYYY-MM-DD (UTC); started_at: the moment, ISO 8601
#:   kit               {version, commit, modified}: the grader's version and the git commit of the kit
#:                     (modified: uncommitted changes were present), null where unknown
#:   device            {name, compute_capability, sm_count, sm_clock_max_mhz, driver, cuda}: the GPU as
#:                     the bench reports it, the driver and the maximum SM clock from nvidia-smi, the
#:                     CUDA release of the nvcc that built the kernels; null where unknown
#:   copy_gbps         the median of the copy bandwidths measured with the rows (GB/s), or null
#:   rows              a list of objects, each with a unique "id" ("NN/impl": the lab's number and the
#:                     implementation's folder name, e.g. "05/reference", "05/naive_3d")
#: and per record kind:
#:   tour              parts [{id, title, grid, scaled_down}]; rows: part, lab, impl, kernel, steps,
#:                     sweeps_per_pass, repetitions, ms_median (one call), ms_per_sweep, gbps, copy_gbps,
#:                     ratio, step_speedup (over the row above in its part; null for the first),
#:                     cumulative_speedup (over the part's first row)
#:   check             impl; rows: lab, impl, verdict, points, max_points, cases_passed, cases_total,
#:                     ratio, gbps, copy_gbps, ms_median, steps, seconds, target {table, floor, target},
#:                     launchers {name: {ms_median, gbps, ratio}} (lab 7 has two), generated_at
#:   calibrate         runs; rows: lab, ratios (one per run), median, floor, target, written, policy
#:   profile           ncu_version; rows: lab, impl, kernel, ratio, gbps, copy_gbps, figures, findings
#:                     (tools/profilerecord.py: make profile's analysis of recorded profile inputs)
#: A field that was not measured is null.  Times are milliseconds, bandwidths GB/s (1 GB = 1e9 B),
#: ratios fractions of the copy bandwidth of the same bench run.
RECORD_FORMAT = 1

#: (lab, impl, what the row shows), in the order of the seeds' table.  impl is "reference",
#: "starter" or a folder relative to the kit (a known submission).
TOUR_ROWS = (
    ("01-naive-5pt", "reference", "lab 1 reference: one thread per cell"),
    ("02-shared-tiling", "reference", "lab 2 reference: 64 x 32 shared tile, 8 rows per thread"),
    ("03-boundary-neat", "starter", "lab 3 starter: periodic, wrap by / and %"),
    ("03-boundary-neat", "reference", "lab 3 reference: periodic, float4, no division"),
    ("04-max-smem", "reference", "lab 4 reference: float4 strips, 8 sweeps per call"),
    ("08-temporal-blocking", "reference", "lab 8 reference: temporal blocking, 8 sweeps per pass"),
)

#: The 3D part, on its own grid.
TOUR_ROWS_3D = (
    ("05-z-coarsening", "reference/tour/05-z-coarsening/naive_3d", "naive 3D: one thread per cell"),
    ("05-z-coarsening", "reference/tour/05-z-coarsening/book_shared_tile_t8",
     "book: 3D shared tile, T = 8"),
    ("05-z-coarsening", "reference/tour/05-z-coarsening/book_z_coarsening_t32",
     "book: z-coarsening, T = 32"),
    ("05-z-coarsening", "reference", "lab 5 reference: z-march, float4, next plane ahead"),
    ("06-register-tiling", "reference/tour/06-register-tiling/book_register_tiling_t32",
     "book: register tiling, T = 32"),
    ("06-register-tiling", "reference", "lab 6 reference: register tiling, float4, 3 planes ahead"),
)

#: Lab 8's other designs (its reference ends the 2D part): the figures its handout's
#: targets policy is judged by.
TOUR_ROWS_LAB8 = (
    ("08-temporal-blocking", "starter", "lab 8 starter: lab 2's tile, one sweep per pass"),
    ("08-temporal-blocking", "reference/tour/08-temporal-blocking/good_overlapped_tile",
     "lab 8 overlapped tile, 8 sweeps per pass (known good)"),
)

#: (id, dimensions, rows): the tour's parts, in the order they are timed and printed.
TOUR_PARTS = (("2d", "2D", TOUR_ROWS), ("3d", "3D", TOUR_ROWS_3D), ("lab8", "2D, lab 8's designs", TOUR_ROWS_LAB8))

#: Sweeps a row's kernel fuses into one pass over DRAM, where more than one
#: (its place on the roofline: plot.intensity).
SWEEPS_PER_PASS = {("08-temporal-blocking", "reference"): 8,
                   ("08-temporal-blocking", "reference/tour/08-temporal-blocking/good_overlapped_tile"): 8}


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
    """What one design's hot loop costs per cell update of one resource, counted once, and the
    ceiling that sets on the roofline (plot.rate_ceiling_gflops):

        SMs x per_sm_per_clock x clock / (per_update x redundancy) useful updates per second

    row: the tour row (row_id) of the kernel counted; params: the TUNE_ parameters of the build
    that was counted (its source's defaults merged with the GPU's tuning file must equal them for
    the ceiling to be drawn), None for a kernel without parameters."""

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
        per_update=732 / 64, per_sm_per_clock=plot.ISSUE_PER_SM_PER_CLOCK,
        redundancy=strip_redundancy(K=8, VEC=4, SEG=128),
        params={"K": 8, "VEC": 4, "SEG": 128, "WARPS": 2, "OCC": 16, "AHEAD": 3},
        source="nvdisasm of the sm_90 build (CUDA 13.0) of reference/08-temporal-blocking/kernel.cu with "
               "these parameters (an H100, 2026-11-25, a development note): the interior loop issues 732 "
               "instructions per two rows of a thread, 64 cell updates (576 FMUL and FADD, 32 SHFL, 31 MOV, "
               "8 LDS, loop and addresses), 11.4 per update; times 1.29 updates per useful one "
               "(strip_redundancy)"),
    DesignCount(
        "08/good_overlapped_tile", "shared memory, overlapped tile", "shared-memory accesses",
        per_update=6, per_sm_per_clock=plot.SHARED_ACCESSES_PER_SM_PER_CLOCK,
        redundancy=tile_redundancy(8, 128, 64), params=None,
        source="its source: 5 operand loads and 1 store of 4 bytes in shared memory per update, a 128 x 64 "
               "tile at K = 8 (tile_redundancy: 1.17 updates per useful one); conflict-free at best"),
)


def reference_parameters(lab: str, device: str | None) -> dict | None:
    """The TUNE_ parameters a reference build on `device` uses: its source's defaults, overridden
    by the GPU's tuning file (tools/tune.py, what lab.mk passes); None when they cannot be told (no
    reference, a broken or stale tuning file)."""
    from . import tune

    lab_dir = KIT_ROOT / "labs" / lab
    try:
        params = tune.source_defaults(tune.reference_source(lab_dir))
        params.update(tune.tuned_parameters(lab_dir, device))
    except (tune.TuneError, OSError):
        return None
    return params


def roofline_ceilings(rows: list[TourRow], sm_count: int, clock_mhz: float, device: str | None = None,
                      params_of=reference_parameters) -> tuple[list[plot.Ceiling], list[str]]:
    """The dashed ceilings of the tour's roofline, and a note for each one left out:

    - with any 2D row (2D 5-point, 9 FLOP per update): the fp32 peak without fused multiply-adds
      (plot.peak_fp32_no_fma_gflops), lab 8's roof: its update rounds every product and sum;
    - for each DESIGN_COUNTS entry whose row is in the tour: its rate ceiling, when the build timed
      is the one counted (params_of(lab, device) equals the count's params; a tuning file that
      chose others leaves it out, with a note).
    Each ceiling is in useful GFLOP/s (plot.Ceiling), its `how` the arithmetic that gave it; sm_count
    and clock_mhz (the maximum SM clock, MHz) as for plot.peak_fp32_gflops.  params_of(lab, device):
    the TUNE_ parameters of the reference build timed (reference_parameters; None when unknown)."""
    ceilings: list[plot.Ceiling] = []
    notes: list[str] = []
    two_d = [r for r in rows if r.part_id != "3d" and not r.part.startswith("3D")]
    if not two_d:
        return ceilings, notes
    ceilings.append(plot.Ceiling(
        "fp32 without FMA (2D)", plot.peak_fp32_no_fma_gflops(sm_count, clock_mhz),
        f"half the FMA peak: {sm_count} SMs x {plot.FP32_LANES_PER_SM} lanes x 1 FLOP x {clock_mhz:.0f} MHz; "
        "lab 8 rounds every product and sum (__fmul_rn, __fadd_rn)"))
    timed = {r.id: r for r in two_d}
    for count in DESIGN_COUNTS:
        row = timed.get(count.row)
        if row is None:
            continue
        if count.params is not None:
            used = params_of(row.lab, device)
            if used != count.params:
                notes.append(f"(no {count.label} ceiling: its count holds for the build "
                             f"{_params_text(count.params)}, this tour built "
                             f"{_params_text(used) if used else 'unknown parameters'})")
                continue
        per_useful = count.per_update * count.redundancy
        gflops = plot.rate_ceiling_gflops(sm_count, clock_mhz, count.per_sm_per_clock, per_useful)
        ceilings.append(plot.Ceiling(
            count.label, gflops,
            f"{sm_count} SMs x {count.per_sm_per_clock} {count.unit} per clock x {clock_mhz:.0f} MHz / "
            f"({count.per_update:.1f} per update x {count.redundancy:.2f} updates per useful one); "
            f"{gflops * plot.BYTES_PER_CELL / plot.FLOP_PER_CELL_2D:,.0f} GB/s effective"))
    return ceilings, notes


def _params_text(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


class TourError(RuntimeError):
    """A tour or calibration could not be measured: no GPU, a build or bench failure."""


@dataclass
class TourRow:
    """One timed kernel of the tour (milliseconds, GB/s with 1 GB = 1e9 bytes, ratios of copy)."""

    lab: str
    impl: str
    kernel: str
    ms_per_sweep: float
    gbps: float
    copy_gbps: float
    ratio: float
    step_speedup: float | None
    cumulative_speedup: float
    part: str = ""                  # the part's title ("" when the table has one part)
    part_id: str = ""               # the part's id in TOUR_PARTS ("2d", "3d", "lab8")
    steps: int = 1                  # sweeps per launcher call
    ms_median: float | None = None  # one call's median time
    repetitions: int | None = None
    sweeps_per_pass: int = 1

    @property
    def id(self) -> str:
        return row_id(self.lab, self.impl)


def row_id(lab: str, impl: str) -> str:
    """A row's name in the records: the lab's number and the implementation's folder name,
    "05/reference", "05/naive_3d" (what the handouts' markers address)."""
    return f"{lab[:2]}/{Path(impl).name}"


def _impl_arg(impl: str) -> str:
    """IMPL for make: starter and reference as they are, a folder made absolute from the kit."""
    return impl if impl in ("starter", "reference") else str(KIT_ROOT / impl)


def _build_dir(lab: str, impl: str) -> Path:
    return KIT_ROOT / "build" / "tour" / lab / Path(impl).name


def available(lab: str, impl: str) -> bool:
    """Whether this copy of the kit has the lab and the row's kernel.cu (no reference/ in a
    student kit; labs and known submissions still being written)."""
    return (KIT_ROOT / "labs" / lab / "lab.json").is_file() \
        and build.impl_source(lab, _impl_arg(impl)).is_file()


def measure(lab: str, impl: str, seed: int | None = None) -> dict:
    """Build LAB with IMPL and time it once; returns the bench JSON (see grader/README.md).

    Raises TourError when the build fails, there is no GPU, or the timed output is wrong.
    """
    spec = labspec.load(KIT_ROOT / "labs" / lab / "lab.json")
    build_dir = _build_dir(lab, impl)
    built = build.build(spec.lab_dir, _impl_arg(impl), build_dir)
    if not built.ok:
        raise TourError(f"{lab} ({impl}) does not build:\n{built.message}")
    run = bench.run_bench(build_dir, spec.bench.timeout_s, seed)
    if run.status != "ok":
        raise TourError(f"{lab} ({impl}): {run.status}: {run.message}")
    if not run.data["output_ok"]:
        raise TourError(f"{lab} ({impl}): the timed output is wrong: {run.data['output_message']}")
    return run.data


def tour_rows(results: list[tuple[str, str, str, dict]], part: str = "", part_id: str = "") -> list[TourRow]:
    """Turn (lab, impl, label, bench JSON) measurements into table rows with speed-ups
    over the row above (step) and the first of these rows (cumulative), all in `part`."""
    rows: list[TourRow] = []
    for lab, impl, label, data in results:
        steps = max(1, int(data.get("steps", 1)))
        per_sweep = data["ms_median"] / steps
        step = rows[-1].ms_per_sweep / per_sweep if rows else None
        cumulative = rows[0].ms_per_sweep / per_sweep if rows else 1.0
        rows.append(TourRow(lab, impl, label, per_sweep, data["gbps"], data["copy_gbps"], data["ratio"],
                            step, cumulative, part, part_id, steps, data["ms_median"],
                            data.get("repetitions"), SWEEPS_PER_PASS.get((lab, impl), 1)))
    return rows


def _part_name(dims: str, data: dict) -> str:
    three_d = dims.startswith("3D")
    grid = " x ".join(str(data[k]) for k in (("nx", "ny", "nz") if three_d else ("nx", "ny")))
    return f"{dims}, {grid} grid" + (" (scaled down)" if data.get("scaled_down") else "")


def render(rows: list[TourRow], device: str, markdown: bool = False) -> str:
    """The table as plain text (or Markdown).  Rows of several parts (TourRow.part) come out
    as one table per part, each under its part's name."""
    head = ("kernel", "ms/sweep", "GB/s", "of copy", "step", "cumulative")
    body = [(r.kernel, f"{r.ms_per_sweep:.3f}", f"{r.gbps:.0f}", f"{r.ratio:.2f}",
             "" if r.step_speedup is None else f"{r.step_speedup:.2f}x", f"{r.cumulative_speedup:.2f}x")
            for r in rows]
    parts = list(dict.fromkeys(r.part for r in rows))
    widths = [max(len(str(c[i])) for c in [head, *body]) for i in range(len(head))]
    fmt = lambda cells: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    lines = []
    for part in parts:
        cells = [b for b, r in zip(body, rows) if r.part == part]
        if len(parts) > 1:                          # a title per part, a blank line between parts
            if lines:
                lines.append("")
            lines += [f"**{part}**", ""] if markdown else [f"{part}:"]
        if markdown:
            lines += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
            lines += ["| " + " | ".join(c) + " |" for c in cells]
        else:
            lines += [fmt(head)] + [fmt(c) for c in cells]
    copy = statistics.median(r.copy_gbps for r in rows) if rows else 0.0
    note = "; speed-ups are over the first row of each part" if len(parts) > 1 else ""
    return (f"{device}, copy bandwidth {copy:.0f} GB/s (median over the runs){note}\n" + "\n".join(lines))


def roofline_points(rows: list[TourRow]) -> list[plot.RooflinePoint]:
    """Each row at its arithmetic intensity (2D 5-point: 9 FLOP, 3D 7-point: 13 FLOP per cell,
    times the sweeps fused per pass, over 8 compulsory bytes) and its useful GFLOP/s."""
    points = []
    for r in rows:
        three_d = r.part_id == "3d" or r.part.startswith("3D")
        flop = plot.FLOP_PER_CELL_3D if three_d else plot.FLOP_PER_CELL_2D
        points.append(plot.point_from_gbps(r.kernel, r.gbps, flop, SWEEPS_PER_PASS.get((r.lab, r.impl), 1),
                                           ratio=r.ratio))
    return points


def draw(rows: list[TourRow], device: str, sm_count: int | None, path: Path,
         clock_mhz: float | None = None, roofline_path: Path | None = None, title: str | None = None) -> list[str]:
    """The path as bars (path) and the roofline of this GPU with every row on it (roofline_path,
    default path's stem + "-roofline.png"); returns one line per picture saying what was written or
    why not.  clock_mhz: the maximum SM clock (default: nvidia-smi's, plot.max_sm_clock_mhz);
    title: both pictures' (default: the device's name)."""
    path = Path(path)
    if not plot.path_bars(rows, title or device, path):
        return ["(no plots: matplotlib is not installed)"]
    said = [f"path: {path}"]
    clock = clock_mhz or plot.max_sm_clock_mhz()
    if not sm_count or not clock:
        return said + ["(no roofline: the SM count or the SM clock of this GPU is unknown)"]
    peak = plot.peak_fp32_gflops(sm_count, clock)
    copy = statistics.median(r.copy_gbps for r in rows)
    roof = Path(roofline_path) if roofline_path else path.with_name(path.stem + "-roofline.png")
    ceilings, notes = roofline_ceilings(rows, sm_count, clock, device)
    plot.roofline(roofline_points(rows), device, copy, peak, roof, ceilings,
                  title=f"Roofline: {title}" if title else None)
    return said + [f"roofline: {roof} (peak fp32 {peak / 1e3:.1f} TFLOP/s estimated from {sm_count} SMs "
                   f"at {clock:.0f} MHz; copy {copy:.0f} GB/s)"] \
        + [f"  ceiling: {c.label}, {c.gflops / 1e3:.1f} TFLOP/s ({c.how})" for c in ceilings] + notes


# ------------------------------------------------------------------ what a record says about its run

def _run_text(argv: list[str], timeout_s: float = 30) -> str | None:
    """The standard output of a short command, or None when it cannot run or fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def nvidia_smi_facts(device_name: str | None) -> dict:
    """{driver, sm_clock_max_mhz} of the GPU named device_name (the first one, when no name
    matches) from nvidia-smi; each None when nvidia-smi is missing or does not say."""
    facts = {"driver": None, "sm_clock_max_mhz": None}
    out = _run_text(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                     "--format=csv,noheader,nounits"])
    lines = [[c.strip() for c in line.split(",")] for line in (out or "").splitlines() if line.count(",") >= 2]
    if not lines:
        return facts
    chosen = next((cells for cells in lines if cells[0] == device_name), lines[0])
    facts["driver"] = chosen[1] or None
    try:
        facts["sm_clock_max_mhz"] = float(chosen[2])
    except ValueError:
        pass
    return facts


def cuda_release() -> str | None:
    """The CUDA release of the toolkit the builds use ("13.0"; base/toolkit.py), or None."""
    nvcc = toolkit.find_nvcc()
    return toolkit.release(nvcc, toolkit.cuda_home(nvcc=nvcc)) if nvcc else None


def kit_facts(kit_root: Path = KIT_ROOT) -> dict:
    """{version, commit, modified}: the grader's version, and the kit's git commit and whether the
    checkout had uncommitted changes (both None outside a git checkout)."""
    facts = {"version": __version__, "commit": None, "modified": None}
    if shutil.which("git") is None:
        return facts
    commit = _run_text(["git", "-C", str(kit_root), "rev-parse", "HEAD"])
    if commit:
        facts["commit"] = commit.strip()
        status = _run_text(["git", "-C", str(kit_root), "status", "--porcelain", "--untracked-files=no"])
        facts["modified"] = None if status is None else bool(status.strip())
    return facts


def device_facts(bench_data: dict) -> dict:
    """The record's device object: name, compute capability and SM count as the bench reported
    them, driver and maximum SM clock from nvidia-smi, and the CUDA release of nvcc (None where
    a tool cannot tell)."""
    name = bench_data.get("device")
    facts = {"name": name, "compute_capability": bench_data.get("cc"), "sm_count": bench_data.get("sm_count")}
    smi = nvidia_smi_facts(name)
    facts.update(sm_clock_max_mhz=smi["sm_clock_max_mhz"], driver=smi["driver"], cuda=cuda_release())
    return facts


def record_header(kind: str, source: str, device: dict, started: datetime.datetime) -> dict:
    """The fields every record starts with (RECORD_FORMAT); rows and kind-specific fields follow."""
    return {"record": kind, "format": RECORD_FORMAT, "provisional": False, "source": source,
            "date": started.date().isoformat(), "started_at": started.isoformat(timespec="seconds"),
            "kit": kit_facts(), "device": device, "copy_gbps": None}


def _median_or_none(values) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(values) if values else None


def record_tour(rows: list[TourRow], parts: list[dict], device: dict, started: datetime.datetime) -> dict:
    """The recorded run of a tour (RECORD_FORMAT): every row with its id and figures."""
    record = record_header("tour", "grade.py tour --json (make tour)", device, started)
    record["copy_gbps"] = _median_or_none(r.copy_gbps for r in rows)
    record["parts"] = parts
    record["rows"] = [{"id": r.id, "part": r.part_id, "lab": r.lab, "impl": r.impl, "kernel": r.kernel,
                       "steps": r.steps, "sweeps_per_pass": r.sweeps_per_pass, "repetitions": r.repetitions,
                       "ms_median": r.ms_median, "ms_per_sweep": r.ms_per_sweep, "gbps": r.gbps,
                       "copy_gbps": r.copy_gbps, "ratio": r.ratio, "step_speedup": r.step_speedup,
                       "cumulative_speedup": r.cumulative_speedup} for r in rows]
    return record


def write_record(record: dict, path: Path) -> Path:
    """Write a record as indented JSON (creating its folder); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def run_tour(out_json: Path | None = None, plot_path: Path | None = None, markdown: bool = False) -> str:
    """Measure every row of TOUR_PARTS this copy of the kit has (available()); returns the
    rendered table, writes the recorded run to out_json (record_tour) and the pictures next
    to plot_path.  Raises TourError."""
    started = _now()
    last: dict = {}
    rows: list[TourRow] = []
    parts: list[dict] = []
    for part_id, dims, table_rows in TOUR_PARTS:
        results = []
        for lab, impl, label in table_rows:
            if not available(lab, impl):
                continue
            print(f"timing {lab} ({impl}) ...", flush=True)
            data = measure(lab, impl)
            last = data
            results.append((lab, impl, label, data))
        if results:
            first = results[0][3]
            title = _part_name(dims, first)
            parts.append({"id": part_id, "title": title,
                          "grid": [first.get("nx"), first.get("ny"), first.get("nz", 1)],
                          "scaled_down": bool(first.get("scaled_down"))})
            rows += tour_rows(results, title, part_id)
    if not rows:
        raise TourError("nothing to time: this copy of the kit has none of the tour's kernels "
                        "(a student kit ships no reference/)")
    device = device_facts(last)
    table = render(rows, device["name"] or "unknown GPU", markdown)
    if out_json:
        write_record(record_tour(rows, parts, device, started), out_json)
    if plot_path:
        for line in draw(rows, device["name"] or "unknown GPU", device["sm_count"], plot_path,
                         device["sm_clock_max_mhz"]):
            print(line)
    return table


# ------------------------------------------------------------------ make check, recorded

def check_row(report: dict) -> dict:
    """One lab's row of a check record from its report.json (grading/report.py's to_dict)."""
    perf = report.get("performance") or {}
    bench_data = perf.get("bench") or {}
    corr = report.get("correctness") or {}
    target = perf.get("target") or None
    launchers = {}
    for launcher in bench_data.get("launchers") or []:
        launchers[launcher.get("name")] = {k: launcher.get(k) for k in ("ms_median", "gbps", "ratio")}
    impl = report.get("impl", "")
    seconds = report.get("seconds") or {}
    return {"id": row_id(report["lab"], impl), "lab": report["lab"], "impl": impl,
            "verdict": report.get("verdict"), "points": report.get("points"),
            "max_points": report.get("max_points"),
            "cases_passed": corr.get("passed"), "cases_total": corr.get("total"),
            "ratio": perf.get("ratio"), "gbps": bench_data.get("gbps"), "copy_gbps": bench_data.get("copy_gbps"),
            "ms_median": bench_data.get("ms_median"), "steps": bench_data.get("steps"),
            "seconds": round(sum(v for v in seconds.values() if isinstance(v, (int, float))), 2) or None,
            "target": {k: target.get(k) for k in ("table", "floor", "target")} if target else None,
            "launchers": launchers or None, "generated_at": report.get("generated_at")}


#: The longest a `make check` of every lab may take for its reports to count as one run.
MAX_CHECK_SPAN = datetime.timedelta(hours=6)


def _stamp(report: dict) -> datetime.datetime | None:
    """When a report was written (its generated_at, ISO 8601), or None when it does not say."""
    try:
        stamp = datetime.datetime.fromisoformat(report.get("generated_at") or "")
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.timezone.utc)


def record_check(reports: list[dict], started: datetime.datetime | None = None) -> dict:
    """The recorded run of a `make check` from its labs' report.json objects, in lab order.

    Raises TourError when there is no report, when the reports name different GPUs, when one was
    graded without a GPU (nothing to record), or when they were written more than MAX_CHECK_SPAN
    apart (left over from different runs)."""
    if not reports:
        raise TourError("no report to record: run `make check` (grade.py all) first")
    gpus = [(r.get("gpu") or {}).get("device") or {} for r in reports]
    unmeasured = [r["lab"] for r, gpu in zip(reports, gpus) if not gpu]
    if unmeasured:
        raise TourError(f"no GPU measured {', '.join(unmeasured)}: a record needs a graded run on a GPU")
    names = {gpu.get("name") or gpu.get("device") for gpu in gpus}   # the check's or the bench's key
    if len(names) != 1 or None in names:
        raise TourError(f"the reports come from different GPUs ({', '.join(sorted(map(str, names)))}): "
                        "run make check again on one GPU")
    device = {"name": names.pop(), "compute_capability": gpus[0].get("cc"), "sm_count": gpus[0].get("sm_count")}
    smi = nvidia_smi_facts(device["name"])
    device.update(sm_clock_max_mhz=smi["sm_clock_max_mhz"], driver=smi["driver"], cuda=cuda_release())
    stamps = sorted(_stamp(r) for r in reports if _stamp(r))
    if stamps and stamps[-1] - stamps[0] > MAX_CHECK_SPAN:
        raise TourError(f"the reports were written between {stamps[0]:%Y-%m-%d %H:%M} and {stamps[-1]:%Y-%m-%d %H:%M}, "
                        "not by one make check: run make check again")
    if started is None:
        started = stamps[0] if stamps else _now()
    record = record_header("check", "grade.py all (make check), collected by grade.py record-check",
                           device, started)
    record["impl"] = reports[0].get("impl")
    record["rows"] = [check_row(r) for r in reports]
    record["copy_gbps"] = _median_or_none(row["copy_gbps"] for row in record["rows"])
    return record


def collect_reports(impl: str = "reference", kit_root: Path = KIT_ROOT) -> list[dict]:
    """The report.json that `make check` (grade.py all) left in build/<lab>/<impl> for every lab
    that has one, in lab order."""
    from ..grading.pipeline import default_build_dir

    reports = []
    for lab_dir in labspec.discover_labs(kit_root):
        path = default_build_dir(lab_dir.name, impl, kit_root) / "report.json"
        if path.is_file():
            try:
                reports.append(json.loads(path.read_text()))
            except json.JSONDecodeError as err:
                raise TourError(f"{path} is not JSON ({err.msg}): run make check again") from None
    return reports


# ------------------------------------------------------------------ calibration

def calibrate(runs: int = 3, labs: list[str] | None = None, write: bool = True,
              out_json: Path | None = None) -> list[str]:
    """Time each lab's reference `runs` times and write this GPU's targets into lab.json.

    A lab with a targets_policy (a bonus lab) keeps its targets: its reference is timed for
    the record and the line says whether it reaches the policy's target.  Returns one line per
    lab saying what changed; with out_json, also writes the calibration as a recorded run.
    Raises TourError (nothing is written for a lab that could not be measured).
    """
    started = _now()
    lines, rows, last = [], [], {}
    for lab_dir in labspec.discover_labs():
        if labs and lab_dir.name not in labs:
            continue
        ratios, device = [], None
        for _ in range(runs):
            data = measure(lab_dir.name, "reference")
            ratios.append(data["ratio"])
            device = data["device"]
            last = data
        ratio = statistics.median(ratios)
        path = lab_dir / "lab.json"
        spec = labspec.load(path)
        policy = getattr(spec, "targets_policy", None)
        row = {"id": row_id(lab_dir.name, "reference"), "lab": lab_dir.name, "ratios": ratios, "median": ratio}
        if policy is not None:
            reach = "reaches" if ratio >= policy.target else "falls SHORT of"
            lines.append(f"{lab_dir.name}: {device}: reference {ratio:.3f} of copy, {reach} the targets_policy's "
                         f"target; targets kept (floor {policy.floor:g}, target {policy.target:g} on every GPU)")
            rows.append(dict(row, floor=policy.floor, target=policy.target, written=False, policy=True))
            continue
        floor, target = score.calibrated_target(ratio)
        raw = json.loads(path.read_text())
        old = raw["targets"].get(device)
        date = datetime.date.today().isoformat()
        raw["targets"][device] = {"floor": floor, "target": target,
                                  "calibrated": f"{date}: reference at {ratio:.3f} of copy bandwidth "
                                                f"(median of {runs} runs)",
                                  "reference_ratio": round(ratio, 3)}
        bound = score.generic_bound(labspec.parse(raw, path))
        generic = raw["targets"]["generic"]
        if bound and (generic["floor"] > bound[0] or generic["target"] > bound[1]):
            generic["floor"], generic["target"] = min(generic["floor"], bound[0]), min(generic["target"], bound[1])
            lines.append(f"{lab_dir.name}: generic lowered to floor {generic['floor']}, target {generic['target']}: "
                         "at most the calibrated GPUs' lowest (score.generic_bound)")
        labspec.parse(raw, path)                      # never write a file the grader would reject
        if write:
            path.write_text(json.dumps(raw, indent=2) + "\n")
        was = f"was floor {old['floor']}, target {old['target']}" if old else "new entry"
        lines.append(f"{lab_dir.name}: {device}: reference {ratio:.3f} of copy -> floor {floor}, "
                     f"target {target} ({was}){'' if write else ' [not written]'}")
        rows.append(dict(row, floor=floor, target=target, written=write, policy=False))
    if out_json and rows:
        record = record_header("calibrate", f"grade.py calibrate --runs {runs}{'' if write else ' --dry-run'}",
                               device_facts(last), started)
        record["runs"] = runs
        record["rows"] = rows
        write_record(record, out_json)
        lines.append(f"recorded: {out_json}")
    return lines
