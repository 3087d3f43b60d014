"""Recorded runs: the self-describing JSON that the handouts' and README's measured figures come
from (handouts/data/<gpu>/*.json, rendered by instructor/figures.py).  `grade.py tour --json` writes a
tour's (instructor/tour.py), `calibrate --json` a calibration's (instructor/calibrate.py), and `record-check`
turns the reports a `make check` left behind into one (record_check).  RECORD_FORMAT says what
every record holds; record_header writes the fields they share, with what this run ran on (the
GPU as the bench reported it, the driver and SM clock from nvidia-smi, nvcc's CUDA release, the
kit's version and git commit).
"""

from __future__ import annotations

import datetime
import json
import shutil
import statistics
import subprocess
from pathlib import Path

from .. import KIT_ROOT, __version__
from ..base import labspec, toolkit

#: The format of every recorded run (tour, check, calibrate, profile), read by instructor/figures.py:
#:   record            "tour", "check", "calibrate", "profile" or "class"
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
#:                     (instructor/profilerecord.py: make profile's analysis of recorded profile inputs)
#:   class             students, jobs, cpus, grader_peak_rss_mib; rows ("NN/build", "NN/gpu"): lab, stage,
#:                     n, wall_s_median, wall_s_max, cpu_s_median (seconds), peak_rss_mib_max (MiB): what
#:                     each lab's stages used in a class graded by grade.py class (classes/resources.py;
#:                     tests/submissions/bench_class.py --record, what make bench-class SLUG=... runs)
#: A field that was not measured is null.  Times are milliseconds, bandwidths GB/s (1 GB = 1e9 B),
#: ratios fractions of the copy bandwidth of the same bench run.
RECORD_FORMAT = 1


def row_id(lab: str, impl: str) -> str:
    """A row's name in the records: the lab's number and the implementation's folder name,
    "05/reference", "05/naive_3d" (what the handouts' markers address)."""
    return f"{lab[:2]}/{Path(impl).name}"


class RecordError(RuntimeError):
    """The reports of a `make check` cannot be one record: none, unreadable, from several GPUs, without
    a GPU, or written too far apart."""


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


def median_or_none(values) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(values) if values else None


def write_record(record: dict, path: Path) -> Path:
    """Write a record as indented JSON (creating its folder); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


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

    Raises RecordError when there is no report, when the reports name different GPUs, when one was
    graded without a GPU (nothing to record), or when they were written more than MAX_CHECK_SPAN
    apart (left over from different runs)."""
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
    device = {"name": names.pop(), "compute_capability": gpus[0].get("cc"), "sm_count": gpus[0].get("sm_count")}
    smi = nvidia_smi_facts(device["name"])
    device.update(sm_clock_max_mhz=smi["sm_clock_max_mhz"], driver=smi["driver"], cuda=cuda_release())
    stamps = sorted(_stamp(r) for r in reports if _stamp(r))
    if stamps and stamps[-1] - stamps[0] > MAX_CHECK_SPAN:
        raise RecordError(f"the reports were written between {stamps[0]:%Y-%m-%d %H:%M} and {stamps[-1]:%Y-%m-%d %H:%M}, "
                        "not by one make check: run make check again")
    if started is None:
        started = stamps[0] if stamps else now()
    record = record_header("check", "grade.py all (make check), collected by grade.py record-check",
                           device, started)
    record["impl"] = reports[0].get("impl")
    record["rows"] = [check_row(r) for r in reports]
    record["copy_gbps"] = median_or_none(row["copy_gbps"] for row in record["rows"])
    return record


def collect_reports(impl: str = "reference", kit_root: Path = KIT_ROOT) -> list[dict]:
    """The report.json that `make check` (grade.py all) left in build/<lab>/<impl> for every lab
    that has one, in lab order."""
    from ..grading.pipeline import default_build_dir     # the grading's own rule for its folder

    reports = []
    for lab_dir in labspec.discover_labs(kit_root):
        path = default_build_dir(lab_dir.name, impl, kit_root) / "report.json"
        if path.is_file():
            try:
                reports.append(json.loads(path.read_text()))
            except json.JSONDecodeError as err:
                raise RecordError(f"{path} is not JSON ({err.msg}): run make check again") from None
    return reports
