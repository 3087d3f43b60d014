"""What a class run keeps in OUT (grader/README.md, section 9, "Resume, and a grade never lost"): each report's "class"
stamp, the rule that makes it final, and save, which never loses a grade.  The stamp:

    {"source_sha256", "kit_version", "lab_sha256",            what was graded
     "backend": "local" | "slurm" | ..., "run": "local" | "run-3", "job": "1234_5" | null,
     "host", "graded_at"}                                    who graded it, where and when"""

import socket
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..base import labspec
from ..base.files import sha256_of, write_atomic, write_json
from ..grading import progress
from ..grading.score import MISSING, is_grade
from . import outdir


def stamp(source: Path | None, spec: labspec.LabSpec, backend: str, run: str, job: str | None = None,
          **extra) -> dict:
    """The "class" stamp of a report (module docstring)."""
    return {"source_sha256": sha256_of(source), "kit_version": __version__,
            "lab_sha256": sha256_of(Path(spec.lab_dir) / "lab.json"), "backend": backend, "run": run, "job": job,
            "host": socket.gethostname(), "graded_at": outdir.now(), **extra}


def is_final(report: dict | None, source: Path | None, spec: labspec.LabSpec) -> bool:
    """True when `report` is a final grade of this very source, kit version and lab.json."""
    if not is_grade(report) or not report.get("final", True):
        return False
    mark = report.get("class") or {}
    return (mark.get("source_sha256") == sha256_of(source) and mark.get("kit_version") == __version__
            and mark.get("lab_sha256") == sha256_of(Path(spec.lab_dir) / "lab.json"))


@dataclass
class Saved:
    """What save() did: `report` is this grading's; `kept` the grade OUT keeps instead (report went to the attempt)."""
    student: str
    lab: str
    report: dict
    kept: dict | None = None


def save(out: Path, student: str, lab: str, report: dict, log: str | None = None, asked: bool = False) -> Saved:
    """Write OUT/students/<student>/<lab>.json (and .log), unless it holds a grade this report must not replace (by
    no grade, nor by "missing" unless asked): then <lab>.attempt.json.  Either way, appended to the lab's history."""
    report["student"] = student
    progress.append(outdir.history_path(out, student, lab), report)
    target, attempt = outdir.report_path(out, student, lab), outdir.attempt_path(out, student, lab)
    old = outdir.read_json(target) if target.exists() else None
    if is_grade(old) and not is_grade(report) and (report.get("verdict") != MISSING or not asked):
        write_json(attempt, report)
        if log is not None:
            write_atomic(attempt.with_suffix(".log"), log)
        return Saved(student, lab, report, old)
    if log is not None:
        write_atomic(target.with_suffix(".log"), log)
    write_json(target, report)
    for stale in (attempt, attempt.with_suffix(".log")):
        stale.unlink(missing_ok=True)
    return Saved(student, lab, report)
