"""The optimisation tour (`make tour`) and target calibration (`make calibrate`).

tour: builds each 2D reference (and lab 3's modulo baseline, its starter; lab 8
last), times
it with the lab's bench on the local GPU, and prints the seeds' optimisation
table: kernel, milliseconds per sweep, effective GB/s (1 GB = 1e9 bytes),
fraction of the copy bandwidth measured in the same run, step speed-up over
the row above and cumulative speed-up over the first row.  Speed-ups compare
time per sweep, so lab 4 (several sweeps per call) compares fairly.  A 3D part
follows (TOUR_ROWS_3D: the textbook's 3D kernels, kept as known submissions,
and the references of labs 5 and 6), on its own grid, with speed-ups over its
own first row (the naive 3D kernel); a row whose kernel.cu is not in this
copy of the kit is left out.  With a plot path it also draws the path as bars and
the roofline of the local GPU with every row on it (plot.py; matplotlib optional).

calibrate: times every lab's reference several times on the local GPU and
writes a targets entry for this GPU into each lab.json (score.calibrated_target
is the rule); other GPUs' entries are kept.
"""

from __future__ import annotations

import datetime
import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec
from ..grading import bench, build, plot, score

#: (lab, impl, what the row shows), in the order of the seeds' table.
TOUR_ROWS = (
    ("01-naive-5pt", "reference", "lab 1: one thread per cell"),
    ("02-shared-tiling", "reference", "lab 2: shared-memory tile, 8 rows per thread"),
    ("03-boundary-neat", "starter", "lab 3 baseline: periodic, wrap by %"),
    ("03-boundary-neat", "reference", "lab 3: periodic, no division"),
    ("04-max-smem", "reference", "lab 4: float4 rows, sweeps kept on the GPU"),
    ("08-temporal-blocking", "reference", "lab 8: temporal blocking, 8 sweeps per pass"),
)

#: Sweeps a row's kernel fuses into one pass over DRAM, where more than one
#: (its place on the roofline: plot.intensity).
SWEEPS_PER_PASS = {("08-temporal-blocking", "reference"): 8}

#: The 3D part: (lab, impl, label); impl "reference", "starter" or a folder
#: relative to the kit (a known submission).  Speed-ups are over its first row.
TOUR_ROWS_3D = (
    ("05-z-coarsening", "tests/submissions/05-z-coarsening/naive_3d", "naive 3D: one thread per cell"),
    ("05-z-coarsening", "tests/submissions/05-z-coarsening/book_shared_tile_t8",
     "book: 3D shared tile, T = 8"),
    ("05-z-coarsening", "tests/submissions/05-z-coarsening/book_z_coarsening_t32",
     "book: z-coarsening, T = 32"),
    ("05-z-coarsening", "reference", "lab 5: z-march, float4, 2 rows, next plane ahead"),
    ("06-register-tiling", "tests/submissions/06-register-tiling/book_register_tiling_t32",
     "book: register tiling, T = 32"),
    ("06-register-tiling", "reference", "lab 6: register tiling"),
)


class TourError(RuntimeError):
    """A tour or calibration could not be measured: no GPU, a build or bench failure."""


@dataclass
class TourRow:
    lab: str
    impl: str
    kernel: str
    ms_per_sweep: float
    gbps: float
    copy_gbps: float
    ratio: float
    step_speedup: float | None
    cumulative_speedup: float
    part: str = ""                  # the table part ("" when the table has one part)


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


def tour_rows(results: list[tuple[str, str, str, dict]], part: str = "") -> list[TourRow]:
    """Turn (lab, impl, label, bench JSON) measurements into table rows with speed-ups
    over the row above (step) and the first of these rows (cumulative), all in `part`."""
    rows: list[TourRow] = []
    for lab, impl, label, data in results:
        per_sweep = data["ms_median"] / max(1, int(data.get("steps", 1)))
        step = rows[-1].ms_per_sweep / per_sweep if rows else None
        cumulative = rows[0].ms_per_sweep / per_sweep if rows else 1.0
        rows.append(TourRow(lab, impl, label, per_sweep, data["gbps"], data["copy_gbps"],
                            data["ratio"], step, cumulative, part))
    return rows


def _part_name(dims: str, data: dict) -> str:
    grid = " x ".join(str(data[k]) for k in (("nx", "ny") if dims == "2D" else ("nx", "ny", "nz")))
    return f"{dims}, {grid} grid" + (" (scaled down)" if data.get("scaled_down") else "")


def render(rows: list[TourRow], device: str, markdown: bool = False) -> str:
    """The table as plain text (or Markdown for the handouts).  Rows of several parts
    (TourRow.part) come out as one table per part, each under its part's name."""
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
        flop = plot.FLOP_PER_CELL_3D if r.part.startswith("3D") else plot.FLOP_PER_CELL_2D
        points.append(plot.point_from_gbps(r.kernel, r.gbps, flop, SWEEPS_PER_PASS.get((r.lab, r.impl), 1)))
    return points


def draw(rows: list[TourRow], device: str, sm_count: int | None, path: Path) -> list[str]:
    """The path as bars (path) and the roofline of this GPU with every row on it (path's stem +
    "-roofline.png"); returns one line per picture saying what was written or why not."""
    path = Path(path)
    if not plot.path_bars(rows, device, path):
        return ["(no plots: matplotlib is not installed)"]
    said = [f"path: {path}"]
    clock = plot.max_sm_clock_mhz()
    if not sm_count or not clock:
        return said + ["(no roofline: the SM count or the SM clock of this GPU is unknown)"]
    peak = plot.peak_fp32_gflops(sm_count, clock)
    copy = statistics.median(r.copy_gbps for r in rows)
    roof = path.with_name(path.stem + "-roofline.png")
    plot.roofline(roofline_points(rows), device, copy, peak, roof)
    return said + [f"roofline: {roof} (peak fp32 {peak / 1e3:.1f} TFLOP/s estimated from {sm_count} SMs "
                   f"at {clock:.0f} MHz; copy {copy:.0f} GB/s)"]


def run_tour(out_json: Path | None = None, plot_path: Path | None = None, markdown: bool = False) -> str:
    """Measure every TOUR_ROWS entry, then the TOUR_ROWS_3D entries this copy of the kit
    has (available()); returns the rendered table.  Raises TourError."""
    device, sm_count = "unknown GPU", None
    rows: list[TourRow] = []
    for dims, table_rows in (("2D", TOUR_ROWS), ("3D", TOUR_ROWS_3D)):
        results = []
        for lab, impl, label in table_rows:
            if not available(lab, impl):
                continue
            print(f"timing {lab} ({impl}) ...", flush=True)
            data = measure(lab, impl)
            device, sm_count = data["device"], data.get("sm_count")
            results.append((lab, impl, label, data))
        if results:
            rows += tour_rows(results, _part_name(dims, results[0][3]))
    if not rows:
        raise TourError("nothing to time: this copy of the kit has none of the tour's kernels "
                        "(a student kit ships no reference/)")
    table = render(rows, device, markdown)
    if out_json:
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        Path(out_json).write_text(json.dumps({"device": device, "date": stamp,
                                              "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
    if plot_path:
        for line in draw(rows, device, sm_count, plot_path):
            print(line)
    return table


def calibrate(runs: int = 3, labs: list[str] | None = None, write: bool = True) -> list[str]:
    """Time each lab's reference `runs` times and write this GPU's targets into lab.json.

    Returns one line per lab saying what changed.  Raises TourError (nothing is
    written for a lab that could not be measured).
    """
    lines = []
    for lab_dir in labspec.discover_labs():
        if labs and lab_dir.name not in labs:
            continue
        ratios, device = [], None
        for _ in range(runs):
            data = measure(lab_dir.name, "reference")
            ratios.append(data["ratio"])
            device = data["device"]
        ratio = statistics.median(ratios)
        floor, target = score.calibrated_target(ratio)
        path = lab_dir / "lab.json"
        raw = json.loads(path.read_text())
        old = raw["targets"].get(device)
        date = datetime.date.today().isoformat()
        raw["targets"][device] = {"floor": floor, "target": target,
                                  "calibrated": f"{date}: reference at {ratio:.3f} of copy bandwidth "
                                                f"(median of {runs} runs)"}
        labspec.parse(raw, path)                      # never write a file the grader would reject
        if write:
            path.write_text(json.dumps(raw, indent=2) + "\n")
        was = f"was floor {old['floor']}, target {old['target']}" if old else "new entry"
        lines.append(f"{lab_dir.name}: {device}: reference {ratio:.3f} of copy -> floor {floor}, "
                     f"target {target} ({was}){'' if write else ' [not written]'}")
    return lines
