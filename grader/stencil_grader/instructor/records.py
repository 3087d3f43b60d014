"""Recorded runs, handouts/data/SLUG/KIND.json (SLUG names a GPU; which command writes which file:
handouts/data/README.md), that the handouts' measured figures are written from (figures.py).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT, __version__
from ..base import gpus, labspec, process, toolkit
from ..base.files import display_path as shown, read_json
from ..student.profile import analyse, load_rules

#: Every record holds: record (its kind, RECORD_KINDS, the file's name); format (RECORD_FORMAT; a reader refuses
#: another); provisional (true while the figures are not a run of the tool named in source; notes: always);
#: source (a command line, or where the figures were transcribed from); date (YYYY-MM-DD, UTC); started_at
#: (ISO 8601); kit {version, commit, modified: uncommitted changes}; device {name, compute_capability, sm_count
#: (the bench's), sm_clock_max_mhz, driver (nvidia-smi's), cuda (nvcc's release)}; copy_gbps (the median of
#: the rows' copy bandwidths); rows, each with a unique id (row_id).  Per kind:
#:   tour       parts [{id, title, grid, scaled_down}]; rows: part, lab, impl, kernel, steps, sweeps_per_pass,
#:              repetitions, ms_median (one call), ms_per_sweep, gbps, copy_gbps, ratio, step_speedup (over
#:              the row above in its part; null for the first), cumulative_speedup (over the part's first row)
#:   check      impl; rows: lab, impl, verdict, points, max_points, cases_passed, cases_total, ratio, gbps,
#:              copy_gbps, ms_median, steps, seconds, target {table, floor, target}, launchers {name:
#:              {ms_median, gbps, ratio}} (lab 7 has two), generated_at
#:   archs      check records of builds for other architectures, put together (commands.py); cuda12 too
#:   calibrate  runs; rows: lab, ratios (one per run), median, floor, target, written, policy
#:   profile    ncu_version; rows: lab, impl, kernel, ratio, gbps, copy_gbps, figures, findings (record_profile)
#:   class      students, jobs, cpus, grader_peak_rss_mib; rows "NN/build", "NN/gpu": lab, stage, n,
#:              wall_s_median, wall_s_max, cpu_s_median, peak_rss_mib_max (classes/resources.py); class-scaling
#:   smem-roof  rows "4B", "16B": bytes, bytes_per_clock_per_sm, lowest_sm, blocks_per_sm, clock_mhz, ms (roofs.py)
#:   ebisu      ratio_bench_grid, ratio_best, ebisu_check (its --check run), ebisu_check_rms; rows
#:              "08/reference", "ebisu/bench_grid", "ebisu/experiment": nx, ny, steps, ms, tcells_per_s (ebisu.py)
#: A field that was not measured is null.  Times are ms (seconds where a name ends in _s), bandwidths GB/s
#: (1 GB = 1e9 B), memory MiB, ratios fractions of the copy bandwidth of the same bench run.
RECORD_FORMAT = 1
RECORD_KINDS = ("tour", "check", "calibrate", "archs", "cuda12", "profile", "notes", "class", "class-scaling",
                "smem-roof", "ebisu")
#: Where the recorded runs live: one folder per GPU (its slug), one file per record kind.
DATA_DIR = KIT_ROOT / "handouts" / "data"
#: The longest a `make check` of every lab may take for its reports to count as one run.
MAX_CHECK_SPAN = datetime.timedelta(hours=6)
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class RecordError(RuntimeError):
    """A record cannot be made (a make check's reports that are not one run) or read (a file that is
    not a valid record), or a marker cannot quote it; the message says where and why."""


def row_id(lab: str, impl: str) -> str:
    """A row's name in the records, what the markers address: "05/reference", "05/naive_3d"."""
    return f"{lab[:2]}/{Path(impl).name}"


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def median_or_none(values) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(values) if values else None


# ------------------------------------------------------------------ writing

def cuda_release() -> str | None:
    """The CUDA release of the toolkit the builds use ("13.0"; base/toolkit.py), or None."""
    nvcc = toolkit.find_nvcc()
    return toolkit.release(nvcc, toolkit.cuda_home(nvcc=nvcc)) if nvcc else None


#: Names the kit's commit where the checkout's git metadata cannot (a copy of the tree without it, or
#: with a stale one): the record then says that commit, and nothing of uncommitted changes.
COMMIT_ENV = "STENCIL_KIT_COMMIT"


def kit_facts(kit_root: Path = KIT_ROOT) -> dict:
    """{version, commit, modified}: the grader's version, the kit's git commit and whether the checkout
    had uncommitted changes (both None outside a git checkout); COMMIT_ENV, when set, is the commit."""
    facts = {"version": __version__, "commit": None, "modified": None}
    if given := os.environ.get(COMMIT_ENV, "").strip():
        facts["commit"] = given
        return facts
    commit = process.output(["git", "-C", str(kit_root), "rev-parse", "HEAD"])
    if commit:
        facts["commit"] = commit.strip()
        status = process.output(["git", "-C", str(kit_root), "status", "--porcelain", "--untracked-files=no"])
        facts["modified"] = None if status is None else bool(status.strip())
    return facts


def device_facts(bench_data: dict) -> dict:
    """The record's device object from a bench's {device, cc, sm_count}, nvidia-smi and nvcc."""
    name = bench_data.get("device")
    smi = gpus.smi_facts(name)
    return {"name": name, "compute_capability": bench_data.get("cc"), "sm_count": bench_data.get("sm_count"),
            "sm_clock_max_mhz": smi["sm_clock_max_mhz"], "driver": smi["driver"], "cuda": cuda_release()}


def record_header(kind: str, source: str, device: dict, started: datetime.datetime | None = None) -> dict:
    """The fields every record starts with (RECORD_FORMAT), started now unless `started` says when; rows and
    kind-specific fields follow."""
    started = started or now()
    return {"record": kind, "format": RECORD_FORMAT, "provisional": False, "source": source,
            "date": started.date().isoformat(), "started_at": started.isoformat(timespec="seconds"),
            "kit": kit_facts(), "device": device, "copy_gbps": None}


def check_row(report: dict) -> dict:
    """One lab's row of a check record from its report.json (grading/report.py's to_dict)."""
    perf = report.get("performance") or {}
    bench = perf.get("bench") or {}
    corr, target, seconds = report.get("correctness") or {}, perf.get("target"), report.get("seconds") or {}
    launchers = {b.get("name"): {k: b.get(k) for k in ("ms_median", "gbps", "ratio")}
                 for b in bench.get("launchers") or []}
    return {"id": row_id(report["lab"], report.get("impl", "")), "lab": report["lab"], "impl": report.get("impl", ""),
            **{k: report.get(k) for k in ("verdict", "points", "max_points")},
            "cases_passed": corr.get("passed"), "cases_total": corr.get("total"), "ratio": perf.get("ratio"),
            **{k: bench.get(k) for k in ("gbps", "copy_gbps", "ms_median", "steps")},
            "seconds": round(sum(v for v in seconds.values() if isinstance(v, (int, float))), 2) or None,
            "target": {k: target.get(k) for k in ("table", "floor", "target")} if target else None,
            "launchers": launchers or None, "generated_at": report.get("generated_at")}


def _stamp(report: dict) -> datetime.datetime | None:
    """When a report was written (its generated_at, ISO 8601), or None when it does not say."""
    try:
        stamp = datetime.datetime.fromisoformat(report.get("generated_at") or "")
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.timezone.utc)


def record_check(reports: list[dict]) -> dict:
    """The recorded run of a `make check` from its labs' report.json objects, in lab order; RecordError
    for none, several GPUs, one without a GPU, or reports more than MAX_CHECK_SPAN apart."""
    if not reports:
        raise RecordError("no report to record: run `make check` (grade.py all) first")
    gpus = [(r.get("gpu") or {}).get("device") or {} for r in reports]
    unmeasured = [r["lab"] for r, gpu in zip(reports, gpus) if not gpu]
    if unmeasured:
        raise RecordError(f"no GPU measured {', '.join(unmeasured)}: a record needs a graded run on a GPU")
    names = {gpu.get("name") or gpu.get("device") for gpu in gpus}   # the check's or the bench's key
    if len(names) != 1 or None in names:
        raise RecordError(f"the reports come from different GPUs ({', '.join(sorted(map(str, names)))}): "
                          "run make check again on one GPU")
    device = device_facts({"device": names.pop(), "cc": gpus[0].get("cc"), "sm_count": gpus[0].get("sm_count")})
    stamps = sorted(filter(None, map(_stamp, reports)))
    if stamps and stamps[-1] - stamps[0] > MAX_CHECK_SPAN:
        raise RecordError(f"the reports were written between {stamps[0]:%Y-%m-%d %H:%M} and "
                          f"{stamps[-1]:%Y-%m-%d %H:%M}, not by one make check: run make check again")
    record = record_header("check", "grade.py all (make check), collected by grade.py record-check", device,
                           stamps[0] if stamps else None)
    rows = [check_row(r) for r in reports]
    return record | {"impl": reports[0].get("impl"), "rows": rows,
                     "copy_gbps": median_or_none(row["copy_gbps"] for row in rows)}


def collect_reports(impl: str = "reference", kit_root: Path = KIT_ROOT) -> list[dict]:
    """The report.json that `make check` (grade.py all) left in build/<lab>/<impl>, in lab order."""
    from ..grading.pipeline import default_build_dir     # the grading's own rule for its folder

    paths = [default_build_dir(d.name, impl, kit_root) / "report.json" for d in labspec.discover_labs(kit_root)]
    try:
        return [read_json(path, RecordError) for path in paths if path.is_file()]
    except RecordError as err:
        raise RecordError(f"{err}: run make check again") from None


def record_profile(paths: list[Path]) -> dict:
    """The record of `grade.py record-profile` (kind "profile"): the profile-inputs.json files `make profile`
    wrote (one GPU, one day), analysed again with the kit's rules (student/profile/), a row per run with its
    first kernel's figures.  Raises RecordError for a file it cannot read, or runs of several GPUs or days."""
    runs = [read_json(Path(path), RecordError) for path in paths]
    if not runs:
        raise RecordError("no recorded profile named")
    devices = {r.get("device") for r in runs}
    stamps = sorted(datetime.datetime.fromisoformat(r["recorded_at"]) for r in runs)
    if len(devices) != 1 or None in devices:
        raise RecordError(f"the profiles come from different GPUs ({', '.join(sorted(map(str, devices)))})")
    if stamps[0].date() != stamps[-1].date():
        raise RecordError(f"the profiles were recorded on different days ({stamps[0]:%Y-%m-%d} to "
                          f"{stamps[-1]:%Y-%m-%d})")
    record = record_header("profile", "grade.py record-profile: make profile's analysis (grader/profile_rules"
                           ".json) of the inputs it recorded (profile-inputs.json)", {"name": devices.pop()}, stamps[0])
    record.update(ncu_version=runs[0].get("ncu_version"), rows=[])
    rules = load_rules()
    for inputs in runs:
        result = analyse(inputs, rules)
        kernel, bench = (result.get("kernels") or [{}])[0], inputs.get("bench") or {}
        record["rows"].append({
            "id": row_id(inputs["lab"], inputs["impl"]), "lab": inputs["lab"],
            "impl": Path(inputs["impl"]).name, "kernel": kernel.get("label"), "ratio": bench.get("ratio"),
            "gbps": bench.get("gbps"), "copy_gbps": bench.get("copy_gbps"), "figures": kernel.get("figures") or {},
            "findings": [f.get("message") for f in result.get("findings") or []]})
    record["copy_gbps"] = median_or_none(row["copy_gbps"] for row in record["rows"])
    return record


# ------------------------------------------------------------------ reading

@dataclass
class Record:
    """One recorded run: handouts/data/SLUG/NAME.json, its rows by id."""

    path: Path
    slug: str
    name: str
    data: dict = field(repr=False)
    rows: dict[str, dict] = field(repr=False)

    @property
    def provisional(self) -> bool:
        return bool(self.data.get("provisional"))

    @property
    def shown(self) -> str:
        return shown(self.path)


@dataclass
class Recordings:
    """Every record under a data folder, by (slug, name)."""

    root: Path
    records: dict[tuple[str, str], Record] = field(default_factory=dict)

    def get(self, slug: str, name: str) -> Record:
        if (slug, name) not in self.records:
            have = ", ".join(f"{s}/{n}" for s, n in sorted(self.records)) or "none"
            raise RecordError(f"no recording {slug}/{name} ({shown(self.root / slug / (name + '.json'))} "
                              f"does not exist; recordings: {have})")
        return self.records[(slug, name)]

    def devices(self, slug: str) -> set[str]:
        return {r.data["device"]["name"] for (s, _), r in self.records.items() if s == slug}

    def device(self, slug: str) -> str:
        """The GPU name the records of folder `slug` share."""
        names = self.devices(slug)
        if not names:
            raise RecordError(f"no recording under {shown(self.root / slug)} names the GPU of {slug!r}")
        return names.pop()


def validate_record(data, path: Path) -> list[str]:
    """The problems of one record (RECORD_FORMAT), each naming the file and the key; [] when good."""
    where, stem = shown(path), Path(path).stem
    if not isinstance(data, dict):
        return [f"{where}: the top level must be an object"]
    problems = []

    def need(key, test, allowed):
        if key not in data:
            problems.append(f"{where}: {key} is missing ({allowed})")
        elif not test(data[key]):
            problems.append(f"{where}: {key} must be {allowed}, got {json.dumps(data[key])}")

    need("record", lambda v: v == stem, f'"{stem}" (the file\'s name)')
    need("format", lambda v: v == RECORD_FORMAT, f"{RECORD_FORMAT} (the format this grader reads)")
    need("provisional", lambda v: isinstance(v, bool) and (v or data.get("record") != "notes"),
         "true or false (true for development notes, which no kit command wrote)")
    need("source", lambda v: isinstance(v, str) and v.strip(), "a non-empty string saying how it was made")
    need("date", lambda v: isinstance(v, str) and _DATE.match(v) or v is None and data.get("provisional") is True,
         "a day, YYYY-MM-DD (null only in a provisional placeholder)")
    need("device", lambda v: isinstance(v, dict) and isinstance(v.get("name"), str) and v["name"].strip(),
         "an object whose name is the GPU's name")
    need("rows", lambda v: isinstance(v, list), "a list of row objects")
    ids = [row.get("id") if isinstance(row, dict) else None for row in data.get("rows") or []]
    problems += [f"{where}: rows[{i}] must be an object with a string id" if not isinstance(x, str) else
                 f"{where}: rows[{i}]: the id {x} appears twice" for i, x in enumerate(ids)
                 if not isinstance(x, str) or x in ids[:i]]
    if data.get("record") == "tour":
        parts = data.get("parts")
        if not isinstance(parts, list) or not all(isinstance(p, dict) and "id" in p for p in parts):
            return problems + [f"{where}: parts must be a list of objects with an id"]
        known = {p["id"] for p in parts}
        problems += [f"{where}: row {row.get('id')}: part {json.dumps(row.get('part'))} is not one of the parts "
                     f"({', '.join(sorted(known)) or 'none'})"
                     for row in data.get("rows") or [] if isinstance(row, dict) and row.get("part") not in known]
    return problems


def load_recordings(root: Path = DATA_DIR) -> Recordings:
    """Read and validate every root/SLUG/KIND.json.  Raises RecordError listing every problem,
    including two records of one folder that name different GPUs."""
    recs, problems = Recordings(Path(root)), []
    for path in sorted(recs.root.glob("*/*.json")):
        slug, name = path.parent.name, path.stem
        if not _SLUG.match(slug):
            problems.append(f"{shown(path)}: the folder name {slug!r} is not a slug (lower-case, digits, -)")
        elif name not in RECORD_KINDS:
            problems.append(f"{shown(path)}: not a record kind ({', '.join(RECORD_KINDS)})")
        else:
            try:
                data = read_json(path, RecordError)
            except RecordError as err:
                problems.append(str(err))
                continue
            found = validate_record(data, path)
            problems += found
            if not found:
                recs.records[(slug, name)] = Record(path, slug, name, data, {r["id"]: r for r in data["rows"]})
    for slug in sorted({s for s, _ in recs.records}):
        if len(recs.devices(slug)) > 1:
            problems.append(f"{shown(recs.root / slug)}: its records name different GPUs "
                            f"({', '.join(sorted(recs.devices(slug)))})")
    if problems:
        raise RecordError("\n".join(problems))
    return recs
