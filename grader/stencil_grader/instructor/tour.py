"""The optimisation tour (`make tour`, `grade.py tour`): every kernel the labs declare for it,
built and timed with its lab's bench on the local GPU, printed as the seeds' optimisation table,
one table per part, and kept as a recorded run (instructor/records.py) with pictures.

The rows are the labs' own: reference/tour/<lab>/tour.json (beside the lab's tour kernels; the
student kit ships no reference/, so it has no tour) holds

    {"about": "...",                                  (optional)
     "parts": {"lab8": "2D, lab 8's designs"},        (optional: parts of its own, by id and title)
     "rows": [{"impl": "reference",                   "reference", "starter", or a folder beside
                                                      this file holding a kernel.cu
               "kernel": "lab 8 reference: {K} sweeps per pass",   the row's label; {NAME} is the
                                                      TUNE_NAME parameter the timed build had
               "part": "lab8",                        (optional) default: "2d" or "3d", the
                                                      dimensions of the lab's problem kind
               "sweeps_per_pass": "K"}]}              (optional, default 1) sweeps the kernel fuses
                                                      per pass over memory: an integer, or the name
                                                      of a TUNE_ parameter of the timed build

The parts come in the order 2d, 3d, then the labs' own in lab order; the rows of a part in lab
order, each lab's in its file's order.  What a build was compiled with is read back from the build
(tuning.built_parameters: the reference's defaults and this GPU's tuning file, as lab.mk passed
them), so lab 8's place on the roofline follows the K that was timed.

Columns: kernel, milliseconds per sweep (one launcher call's median over its sweeps,
so lab 4's and lab 8's multi-sweep calls compare fairly), effective GB/s (compulsory
bytes over the median time, 1 GB = 1e9 bytes), the fraction of the copy bandwidth
measured in the same bench run, the step speed-up (time per sweep of the row above over
this row's) and the cumulative speed-up (the part's first row over this row).  A row
whose kernel.cu is not in this copy of the kit is left out.  With a plot path it also draws
the path as bars and the roofline of the local GPU with every row on it (grading/plot.py;
matplotlib optional), each row at its kind's FLOP per cell (grader/kinds.json) times its sweeps
per pass, and under its roof, dashed, the ceilings of instructor/roofs.py.
"""

from __future__ import annotations

import datetime
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec
from ..base.files import display_path, read_json
from ..grading import bench, build, plot
from . import roofs, tuning
from .records import device_facts, median_or_none, now, record_header, row_id, write_record

#: The declaration of a lab's tour rows, in reference/tour/<lab>/.
TOUR_FILE = "tour.json"
#: The parts every tour has: a row's default, by the dimensions of its lab's problem kind.
DIMENSION_PARTS = {2: ("2d", "2D"), 3: ("3d", "3D")}
_PLACEHOLDER = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")


class TourError(RuntimeError):
    """A tour or calibration could not be measured (no GPU, a build or bench failure), or a lab's
    tour.json is malformed."""


@dataclass(frozen=True)
class TourSpec:
    """One row a lab declares (module docstring).  impl: "reference", "starter" or a folder of the
    kit (reference/tour/<lab>/<name>); sweeps_per_pass: an integer, or a TUNE_ parameter's name."""

    lab: str
    impl: str
    kernel: str
    part: str
    sweeps_per_pass: int | str = 1

    def label(self, params: dict[str, int]) -> str:
        """The row's label, each {NAME} replaced by the timed build's TUNE_NAME (TourError if it has none)."""
        return _PLACEHOLDER.sub(lambda m: str(self._param(m.group(1), params)), self.kernel)

    def fused(self, params: dict[str, int]) -> int:
        """Sweeps per pass over memory of the timed build."""
        if isinstance(self.sweeps_per_pass, int):
            return self.sweeps_per_pass
        return self._param(self.sweeps_per_pass, params)

    def _param(self, name: str, params: dict[str, int]) -> int:
        if name not in params:
            raise TourError(f"{self.lab} ({self.impl}): the tour row names {name}, which its build does not "
                            f"declare (TUNE_{name}; it has {', '.join(params) or 'none'})")
        return params[name]


@dataclass(frozen=True)
class Part:
    """One table of the tour: its id (a record's part id), the dimensions word of its title, its rows."""

    id: str
    dims: str
    rows: tuple[TourSpec, ...]


def tour_parts(kit_root: Path = KIT_ROOT) -> list[Part]:
    """The tour's parts, in order (module docstring), from every lab's reference/tour/<lab>/tour.json;
    labs without one have no row.  Raises TourError naming the file and the key that is wrong."""
    parts = {pid: (dims, []) for pid, dims in DIMENSION_PARTS.values()}
    for lab_dir in labspec.discover_labs(kit_root):
        path = Path(kit_root) / "reference" / "tour" / lab_dir.name / TOUR_FILE
        if path.is_file():
            _read_tour_file(path, lab_dir, parts, kit_root)
    return [Part(pid, dims, tuple(rows)) for pid, (dims, rows) in parts.items() if rows]


def _read_tour_file(path: Path, lab_dir: Path, parts: dict, kit_root: Path) -> None:
    """Add one lab's declared parts and rows to `parts` (id -> (dims, rows))."""
    shown = display_path(path)
    data = read_json(path, TourError)
    if not isinstance(data, dict) or set(data) - {"about", "parts", "rows"} or not isinstance(data.get("rows"), list):
        raise TourError(f"{shown}: expected an object with \"rows\" (a list) and optionally \"parts\" and \"about\"")
    own = data.get("parts", {})
    if not isinstance(own, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in own.items()):
        raise TourError(f"{shown}: \"parts\" must be an object of id: title")
    for pid, dims in own.items():
        parts.setdefault(pid, (dims, []))
    default = DIMENSION_PARTS[3 if labspec.load(lab_dir / "lab.json").kind.dims == 3 else 2][0]
    for n, row in enumerate(data["rows"]):
        where = f"{shown}: rows[{n}]"
        if not isinstance(row, dict) or set(row) - {"impl", "kernel", "part", "sweeps_per_pass"} \
                or not isinstance(row.get("impl"), str) or not isinstance(row.get("kernel"), str):
            raise TourError(f"{where} must be {{\"impl\": ..., \"kernel\": ..., \"part\": ..., "
                            f"\"sweeps_per_pass\": ...}} with impl and kernel strings, got {row!r}")
        impl = row["impl"]
        if impl not in ("reference", "starter"):
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", impl):
                raise TourError(f"{where}.impl {impl!r}: reference, starter, or a folder beside {TOUR_FILE}")
            impl = path.parent.relative_to(Path(kit_root)).joinpath(impl).as_posix()
        part = row.get("part", default)
        if part not in parts:
            raise TourError(f"{where}.part {part!r} is not a part (parts: {', '.join(parts)})")
        fused = row.get("sweeps_per_pass", 1)
        if isinstance(fused, bool) or not (isinstance(fused, int) and fused >= 1
                                           or isinstance(fused, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", fused)):
            raise TourError(f"{where}.sweeps_per_pass must be an integer >= 1 or a TUNE_ parameter's name, "
                            f"got {fused!r}")
        parts[part][1].append(TourSpec(lab_dir.name, impl, row["kernel"], part, fused))


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
    part_id: str = ""               # the part's id (Part.id: "2d", "3d", or one a lab declares)
    steps: int = 1                  # sweeps per launcher call
    ms_median: float | None = None  # one call's median time
    repetitions: int | None = None
    sweeps_per_pass: int = 1

    @property
    def id(self) -> str:
        return row_id(self.lab, self.impl)


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


def measure(lab: str, impl: str, seed: int | None = None) -> tuple[dict, dict[str, int]]:
    """Build LAB with IMPL and time it once; returns the bench JSON (see grader/README.md) and the
    TUNE_ parameters the build was compiled with (built_parameters).

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
    return run.data, built_parameters(lab, impl)


def built_parameters(lab: str, impl: str) -> dict[str, int]:
    """The TUNE_ parameters the tour's build of a row was compiled with (tuning.built_parameters:
    its source's defaults, replaced by the KERNEL_DEFINES recorded in its flags.stamp: for a
    reference, this GPU's tuning file).  Raises TourError when the row was not built."""
    try:
        return tuning.built_parameters(_build_dir(lab, impl), build.impl_source(lab, _impl_arg(impl)))
    except (tuning.TuneError, OSError) as err:
        raise TourError(f"{lab} ({impl}): {err}") from None


def tour_rows(results: list[tuple], part: str = "", part_id: str = "") -> list[TourRow]:
    """Turn (lab, impl, label, bench JSON[, sweeps per pass]) measurements into table rows with
    speed-ups over the row above (step) and the first of these rows (cumulative), all in `part`;
    sweeps per pass: how many sweeps the kernel fuses into one pass over memory (1 when left out)."""
    rows: list[TourRow] = []
    for lab, impl, label, data, *fused in results:
        steps = max(1, int(data.get("steps", 1)))
        per_sweep = data["ms_median"] / steps
        step = rows[-1].ms_per_sweep / per_sweep if rows else None
        cumulative = rows[0].ms_per_sweep / per_sweep if rows else 1.0
        rows.append(TourRow(lab, impl, label, per_sweep, data["gbps"], data["copy_gbps"], data["ratio"],
                            step, cumulative, part, part_id, steps, data["ms_median"],
                            data.get("repetitions"), fused[0] if fused else 1))
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
    """Each row at its arithmetic intensity (its lab's kind: FLOP per cell, grader/kinds.json, times
    the sweeps fused per pass, over the compulsory bytes per cell) and its useful GFLOP/s."""
    points = []
    for r in rows:
        work = labspec.load(KIT_ROOT / "labs" / r.lab / "lab.json").kind.launchers[0]
        points.append(plot.point_from_gbps(r.kernel, r.gbps, work, r.sweeps_per_pass, ratio=r.ratio))
    return points


def draw(rows: list[TourRow], device: str, sm_count: int | None, path: Path,
         clock_mhz: float | None = None, roofline_path: Path | None = None, title: str | None = None,
         params_of=None) -> list[str]:
    """The path as bars (path) and the roofline of this GPU with every row on it (roofline_path,
    default path's stem + "-roofline.png"); returns one line per picture saying what was written or
    why not.  clock_mhz: the maximum SM clock (default: nvidia-smi's, plot.max_sm_clock_mhz);
    title: both pictures' (default: the device's name); params_of(lab, impl): the TUNE_ parameters
    each row was built with, for the ceilings (roofs.roofline_ceilings; default: read from this
    tour's builds, built_parameters)."""
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
    ceilings, notes = roofs.roofline_ceilings(rows, sm_count, clock, params_of or built_parameters)
    plot.roofline(roofline_points(rows), device, copy, peak, roof, ceilings,
                  title=f"Roofline: {title}" if title else None)
    return said + [f"roofline: {roof} (peak fp32 {peak / 1e3:.1f} TFLOP/s estimated from {sm_count} SMs "
                   f"at {clock:.0f} MHz; copy {copy:.0f} GB/s)"] \
        + [f"  ceiling: {c.label}, {c.gflops / 1e3:.1f} TFLOP/s ({c.how})" for c in ceilings] + notes


def record_tour(rows: list[TourRow], parts: list[dict], device: dict, started: datetime.datetime) -> dict:
    """The recorded run of a tour (RECORD_FORMAT): every row with its id and figures."""
    record = record_header("tour", "grade.py tour --json (make tour)", device, started)
    record["copy_gbps"] = median_or_none(r.copy_gbps for r in rows)
    record["parts"] = parts
    record["rows"] = [{"id": r.id, "part": r.part_id, "lab": r.lab, "impl": r.impl, "kernel": r.kernel,
                       "steps": r.steps, "sweeps_per_pass": r.sweeps_per_pass, "repetitions": r.repetitions,
                       "ms_median": r.ms_median, "ms_per_sweep": r.ms_per_sweep, "gbps": r.gbps,
                       "copy_gbps": r.copy_gbps, "ratio": r.ratio, "step_speedup": r.step_speedup,
                       "cumulative_speedup": r.cumulative_speedup} for r in rows]
    return record


def run_tour(out_json: Path | None = None, plot_path: Path | None = None, markdown: bool = False) -> str:
    """Measure every row the labs declare (tour_parts) that this copy of the kit has (available());
    returns the rendered table, writes the recorded run to out_json (record_tour) and the pictures
    next to plot_path.  Raises TourError."""
    started = now()
    last: dict = {}
    rows: list[TourRow] = []
    parts: list[dict] = []
    for part in tour_parts():
        results = []
        for row in part.rows:
            if not available(row.lab, row.impl):
                continue
            print(f"timing {row.lab} ({row.impl}) ...", flush=True)
            data, params = measure(row.lab, row.impl)
            last = data
            results.append((row.lab, row.impl, row.label(params), data, row.fused(params)))
        if results:
            first = results[0][3]
            title = _part_name(part.dims, first)
            parts.append({"id": part.id, "title": title,
                          "grid": [first.get("nx"), first.get("ny"), first.get("nz", 1)],
                          "scaled_down": bool(first.get("scaled_down"))})
            rows += tour_rows(results, title, part.id)
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
