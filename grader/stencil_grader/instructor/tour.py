"""The references timed on this GPU: the optimisation tour (`make tour`) and the targets' calibration
(`make calibrate`); tour.json and what calibrate writes: grader/README.md, section 4.  Units: ms per
sweep, GB/s (1e9 bytes), fractions of the same run's copy bandwidth; speed-ups over the row above
(step) and the part's first row (cumulative).
"""

from __future__ import annotations

import datetime
import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec
from ..base.files import display_path, read_json, write_json
from ..grading import bench, build, score
from . import tune
from .records import device_facts, median_or_none, now, record_header, row_id

#: The declaration of a lab's tour rows, in reference/tour/<lab>/.
TOUR_FILE = "tour.json"
#: The parts every tour has: a row's default, by the dimensions of its lab's problem kind.
DIMENSION_PARTS = {2: ("2d", "2D"), 3: ("3d", "3D")}
_PLACEHOLDER = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")


class TourError(RuntimeError):
    """No GPU, a build or bench failure, or a malformed tour.json."""


@dataclass(frozen=True)
class TourSpec:
    """One row a lab declares.  impl: "reference", "starter" or a folder of the kit
    (reference/tour/<lab>/<name>); sweeps_per_pass: an integer, or a TUNE_ parameter's name."""

    lab: str
    impl: str
    kernel: str
    part: str
    sweeps_per_pass: int | str = 1

    def resolve(self, params: dict[str, int]) -> tuple[str, int]:
        """(the label, each {NAME} replaced, and the sweeps per pass) of a build with these TUNE_
        parameters; TourError for a name the build does not declare."""
        def value(name: str) -> int:
            if name not in params:
                raise TourError(f"{self.lab} ({self.impl}): the tour row names {name}, which its build does not "
                                f"declare (TUNE_{name}; it has {', '.join(params) or 'none'})")
            return params[name]
        fused = self.sweeps_per_pass
        return (_PLACEHOLDER.sub(lambda m: str(value(m.group(1))), self.kernel),
                fused if isinstance(fused, int) else value(fused))


@dataclass(frozen=True)
class Part:
    """One table of the tour: its id (a record's part id), the dimensions word of its title, its rows."""

    id: str
    dims: str
    rows: tuple[TourSpec, ...]


def tour_parts(kit_root: Path = KIT_ROOT) -> list[Part]:
    """The tour's parts: 2d, 3d, then the labs' own in lab order; each part's rows in lab order, each
    lab's in its file's order.  Raises TourError naming the file and the key that is wrong."""
    parts = {pid: (dims, []) for pid, dims in DIMENSION_PARTS.values()}
    for lab_dir in labspec.discover_labs(kit_root):
        path = Path(kit_root) / "reference" / "tour" / lab_dir.name / TOUR_FILE
        if not path.is_file():
            continue
        data = read_json(path, TourError)

        def need(ok, why: str) -> None:
            if not ok:
                raise TourError(f"{display_path(path)}: {why}")

        need(isinstance(data, dict) and not set(data) - {"about", "parts", "rows"}
             and isinstance(data.get("rows"), list),
             "expected an object with \"rows\" (a list) and optionally \"parts\" and \"about\"")
        own = data.get("parts", {})
        need(isinstance(own, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in own.items()),
             "\"parts\" must be an object of id: title")
        for pid, dims in own.items():
            parts.setdefault(pid, (dims, []))
        default = DIMENSION_PARTS[3 if labspec.load(lab_dir / "lab.json").kind.dims == 3 else 2][0]
        for n, row in enumerate(data["rows"]):
            need(isinstance(row, dict) and not set(row) - {"impl", "kernel", "part", "sweeps_per_pass"}
                 and isinstance(row.get("impl"), str) and isinstance(row.get("kernel"), str),
                 f"rows[{n}] must be {{\"impl\": ..., \"kernel\": ..., \"part\": ..., \"sweeps_per_pass\": ...}} "
                 f"with impl and kernel strings, got {row!r}")
            impl, part, fused = row["impl"], row.get("part", default), row.get("sweeps_per_pass", 1)
            if impl not in ("reference", "starter"):
                need(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", impl),
                     f"rows[{n}].impl {impl!r}: reference, starter, or a folder beside {TOUR_FILE}")
                impl = path.parent.relative_to(Path(kit_root)).joinpath(impl).as_posix()
            need(part in parts, f"rows[{n}].part {part!r} is not a part (parts: {', '.join(parts)})")
            need(type(fused) is int and fused >= 1
                 or isinstance(fused, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", fused),
                 f"rows[{n}].sweeps_per_pass must be an integer >= 1 or a TUNE_ parameter's name, got {fused!r}")
            parts[part][1].append(TourSpec(lab_dir.name, impl, row["kernel"], part, fused))
    return [Part(pid, dims, tuple(rows)) for pid, (dims, rows) in parts.items() if rows]


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


#: The fields of a TourRow a recorded tour holds (records.py RECORD_FORMAT), besides its id and part.
RECORDED = ("lab", "impl", "kernel", "steps", "sweeps_per_pass", "repetitions", "ms_median", "ms_per_sweep", "gbps",
            "copy_gbps", "ratio", "step_speedup", "cumulative_speedup")


def _impl_arg(impl: str) -> str:
    """IMPL for make: starter and reference as they are, a folder made absolute from the kit."""
    return impl if impl in ("starter", "reference") else str(KIT_ROOT / impl)


def _build_dir(lab: str, impl: str) -> Path:
    return KIT_ROOT / "build" / "tour" / lab / Path(impl).name


def available(lab: str, impl: str) -> bool:
    """Whether this copy of the kit has the lab and the row's kernel.cu (a student kit has no reference/)."""
    return (KIT_ROOT / "labs" / lab / "lab.json").is_file() and build.impl_source(lab, _impl_arg(impl)).is_file()


def measure(lab: str, impl: str, seed: int | None = None) -> tuple[dict, dict[str, int]]:
    """Build LAB with IMPL and time it once: the bench JSON (grader/README.md, section 3) and the
    TUNE_ parameters the build was compiled with (built_parameters).  Raises TourError when the
    build fails, there is no GPU, or the timed output is wrong."""
    spec = labspec.load(KIT_ROOT / "labs" / lab / "lab.json")
    built = build.build(spec.lab_dir, _impl_arg(impl), _build_dir(lab, impl))
    if not built.ok:
        raise TourError(f"{lab} ({impl}) does not build:\n{built.message}")
    run = bench.run_bench(_build_dir(lab, impl), spec.bench.timeout_s, seed)
    if run.status != "ok":
        raise TourError(f"{lab} ({impl}): {run.status}: {run.message}")
    if not run.data["output_ok"]:
        raise TourError(f"{lab} ({impl}): the timed output is wrong: {run.data['output_message']}")
    return run.data, built_parameters(lab, impl)


def built_parameters(lab: str, impl: str) -> dict[str, int]:
    """The TUNE_ parameters the tour's build of a row was compiled with (tune.built_parameters: for
    a reference, this GPU's tuning file as lab.mk passed it).  Raises TourError when it was not built."""
    try:
        return tune.built_parameters(_build_dir(lab, impl), build.impl_source(lab, _impl_arg(impl)))
    except (tune.TuneError, OSError) as err:
        raise TourError(f"{lab} ({impl}): {err}") from None


def tour_rows(results: list[tuple], part: str = "", part_id: str = "") -> list[TourRow]:
    """(lab, impl, label, bench JSON[, sweeps per pass, default 1]) measurements as the rows of one
    part, with their speed-ups over the row above (step) and the first of them (cumulative)."""
    rows: list[TourRow] = []
    for lab, impl, label, data, *fused in results:
        steps = max(1, int(data.get("steps", 1)))
        per_sweep = data["ms_median"] / steps
        rows.append(TourRow(lab, impl, label, per_sweep, data["gbps"], data["copy_gbps"], data["ratio"],
                            rows[-1].ms_per_sweep / per_sweep if rows else None,
                            rows[0].ms_per_sweep / per_sweep if rows else 1.0, part, part_id, steps,
                            data["ms_median"], data.get("repetitions"), fused[0] if fused else 1))
    return rows


def render(rows: list[TourRow], device: str, markdown: bool = False) -> str:
    """The table as plain text (or Markdown), one table per part under its title when there are several."""
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
            lines += ([""] if lines else []) + ([f"**{part}**", ""] if markdown else [f"{part}:"])
        if markdown:
            lines += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
            lines += ["| " + " | ".join(c) + " |" for c in cells]
        else:
            lines += [fmt(head)] + [fmt(c) for c in cells]
    copy = statistics.median(r.copy_gbps for r in rows) if rows else 0.0
    note = "; speed-ups are over the first row of each part" if len(parts) > 1 else ""
    return f"{device}, copy bandwidth {copy:.0f} GB/s (median over the runs){note}\n" + "\n".join(lines)


def record_tour(rows: list[TourRow], parts: list[dict], device: dict, started: datetime.datetime) -> dict:
    """The recorded run of a tour (RECORD_FORMAT): every row with its id and figures."""
    record = record_header("tour", "grade.py tour --json (make tour)", device, started)
    record["copy_gbps"] = median_or_none(r.copy_gbps for r in rows)
    record["parts"] = parts
    record["rows"] = [{"id": r.id, "part": r.part_id} | {k: getattr(r, k) for k in RECORDED} for r in rows]
    return record


def recorded_rows(record: dict) -> list[TourRow]:
    """The rows of a recorded tour (record_tour) as the tour timed them."""
    titles = {p["id"]: p.get("title", p["id"]) for p in record.get("parts") or []}
    return [TourRow(**{k: r[k] for k in RECORDED if k in r}, part=titles.get(r.get("part"), ""),
                    part_id=r.get("part", "")) for r in record["rows"]]


def run_tour(out_json: Path | None = None, markdown: bool = False) -> tuple[str, list[TourRow], dict]:
    """Measure every declared row this copy of the kit has (available()); writes the recorded run to
    out_json.  Returns (the rendered table, the rows, the record's device object: device_facts).  Raises
    TourError."""
    started = now()
    last: dict = {}
    rows: list[TourRow] = []
    parts: list[dict] = []
    for part in tour_parts():
        results = []
        for row in part.rows:
            if available(row.lab, row.impl):
                print(f"timing {row.lab} ({row.impl}) ...", flush=True)
                last, params = measure(row.lab, row.impl)
                label, fused = row.resolve(params)
                results.append((row.lab, row.impl, label, last, fused))
        if results:
            first = results[0][3]
            axes = ("nx", "ny", "nz") if part.dims.startswith("3D") else ("nx", "ny")
            grid = " x ".join(str(first[k]) for k in axes)
            title = f"{part.dims}, {grid} grid" + (" (scaled down)" if first.get("scaled_down") else "")
            parts.append({"id": part.id, "title": title, "grid": [first.get("nx"), first.get("ny"), first.get("nz", 1)],
                          "scaled_down": bool(first.get("scaled_down"))})
            rows += tour_rows(results, title, part.id)
    if not rows:
        raise TourError("nothing to time: this copy of the kit has none of the tour's kernels "
                        "(a student kit ships no reference/)")
    device = device_facts(last)
    table = render(rows, device["name"] or "unknown GPU", markdown)
    if out_json:
        write_json(out_json, record_tour(rows, parts, device, started))
    return table, rows, device


def calibrate(runs: int = 3, labs: list[str] | None = None, write: bool = True,
              out_json: Path | None = None) -> list[str]:
    """Time each lab's reference `runs` times and write this GPU's targets into its lab.json (a lab with a
    targets_policy: timed only); one line per lab says what changed; out_json: the recorded run too.
    Raises TourError (nothing is written for a lab that could not be measured)."""
    started = now()
    lines, rows, last = [], [], {}
    for lab_dir in labspec.discover_labs():
        if labs and lab_dir.name not in labs:
            continue
        ratios = []
        for _ in range(runs):
            last, _params = measure(lab_dir.name, "reference")
            ratios.append(last["ratio"])
        ratio, device = statistics.median(ratios), last["device"]
        path = lab_dir / "lab.json"
        policy = labspec.load(path).targets_policy
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
        raw["targets"][device] = {"floor": floor, "target": target,
                                  "calibrated": f"{datetime.date.today().isoformat()}: reference at {ratio:.3f} of "
                                                f"copy bandwidth (median of {runs} runs)",
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
        write_json(out_json, dict(record, runs=runs, rows=rows))
        lines.append(f"recorded: {out_json}")
    return lines
