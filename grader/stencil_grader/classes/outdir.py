"""The output directory of a class grading, and the record that makes a grading resumable.

    OUT/class.json                      which class this folder belongs to (MANIFEST)
    OUT/<student>/<lab>.json            the lab's report, with a "class" stamp (below)
    OUT/<student>/<lab>.log             what the grading printed
    OUT/class.csv, gradings.csv, summary.txt, gradescope/<student>/results.json   (classgrade.py)
    OUT/slurm/                          the batch back end's runs (batch.py)

Every file is written under a temporary name and renamed into place, so a grading
killed at any moment (a time limit, a preempted or failed node) leaves the old file
or the new one, never half of one (and the hidden temporary file such a kill leaves is
removed when the class files are next written: sweep_temporaries).

A report's "class" stamp says what was graded and by whom:

    {"source_sha256": ..., "kit_version": ..., "lab_sha256": ...,   what was graded
     "backend": "local" | "slurm", "run": "local" | "run-3",        who graded it
     "job": "1234_5" | null, "host": "node12", "graded_at": ...}

A grading is final (not graded again by a resumed run) when its report says
"final": true, its verdict is a grade (not "not_measured", "kit_error", "pending",
"grader_error"), and the stamp's source, kit version and lab.json digests are
those of now: a changed kernel.cu, a new kit or a recalibrated lab.json is graded
again.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import socket
from pathlib import Path

from .. import __version__
from ..base import labspec
from ..grading import score
from .submissions import ClassError

MANIFEST = "class.json"
#: What a class grading of an earlier kit version (without MANIFEST) left in its OUT.
EARLIER_SIGNS = ("class.csv", "gradescope")
#: Verdicts of class grading that are not grades (besides score.NOT_GRADED): the grading
#: process failed, or Slurm ended its task.  Graded again by the next run.
GRADER_ERROR = "grader_error"
MISSING = "missing"
NOT_A_GRADE = tuple(score.NOT_GRADED) + (GRADER_ERROR,)


def digest(path: Path | None) -> str:
    """sha256 (hex) of a file's bytes; "" when there is no file or it cannot be read."""
    if path is None:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def now() -> str:
    """The time now, UTC, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write data (text, as UTF-8, or bytes) to path through a temporary file in the same folder
    and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    os.replace(tmp, path)
    return path


_TEMPORARY = re.compile(r"^\..+\.(\d+)\.tmp$")


def sweep_temporaries(out: Path) -> list[Path]:
    """Remove the temporary files (write_atomic's `.<name>.<pid>.tmp`) that writers killed between
    writing and renaming left in OUT, except those of a process of this host still running;
    returns what was removed."""
    removed = []
    for path in Path(out).rglob(".*.tmp"):
        match = _TEMPORARY.match(path.name)
        if not match or not path.is_file():
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue                      # its writer still runs here
        except (ProcessLookupError, ValueError):
            pass
        except PermissionError:
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def write_json(path: Path, data: dict) -> Path:
    """Write data as indented JSON to path, by rename (write_atomic)."""
    return write_atomic(path, json.dumps(data, indent=2) + "\n")


def read_json(path: Path) -> dict | None:
    """The JSON object in path, or None when it is missing or not an object (half-written files
    cannot occur: every write renames)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def check_out(out: Path) -> None:
    """ClassError when --out cannot be an output folder (an existing file)."""
    if out.exists() and not out.is_dir():
        raise ClassError(f"--out {out} is a file; give a folder (new, or one this command wrote before)")


def claim(out: Path, submissions: Path, write: bool = True) -> None:
    """Make sure OUT belongs to the class of `submissions`, and record that in OUT/class.json.

    Raises ClassError, touching nothing: OUT is a file; OUT holds another class's results
    (its class.json names other submissions); OUT is a non-empty folder that no class
    grading wrote (no class.json, no class.csv, no gradescope/).  A folder with class.csv
    or gradescope/ but no class.json (an earlier version of the kit) is taken over.
    write=False checks only (--dry-run).
    """
    check_out(out)
    manifest = out / MANIFEST
    data = read_json(manifest) if manifest.exists() else None
    if manifest.exists() and data is None:
        raise ClassError(f"{manifest} is not a class grading's record (not JSON); choose another --out")
    if data is not None:
        theirs = data.get("submissions")
        if theirs and Path(theirs) != submissions:
            raise ClassError(f"--out {out} holds the results of another class (graded from {theirs}, not "
                             f"{submissions}); choose another --out, or grade that class there")
        return
    if out.is_dir() and any(out.iterdir()) and not any((out / n).exists() for n in EARLIER_SIGNS):
        raise ClassError(f"--out {out} is a folder that holds other files and no class grading "
                         f"({MANIFEST}); choose a new or empty folder")
    if write:
        out.mkdir(parents=True, exist_ok=True)
        write_json(manifest, {"what": "stencil lab kit class grading", "submissions": str(submissions),
                              "created": now(), "kit_version": __version__})


def report_path(out: Path, student: str, lab: str) -> Path:
    """OUT/<student>/<lab>.json."""
    return out / student / f"{lab}.json"


def stamp(source: Path | None, spec: labspec.LabSpec, backend: str, run: str, job: str | None = None,
          **extra) -> dict:
    """The "class" stamp of a report (module docstring)."""
    data = {"source_sha256": digest(source), "kit_version": __version__,
            "lab_sha256": digest(Path(spec.lab_dir) / "lab.json"), "backend": backend, "run": run, "job": job,
            "host": socket.gethostname(), "graded_at": now()}
    data.update(extra)
    return data


def is_final(report: dict | None, source: Path | None, spec: labspec.LabSpec) -> bool:
    """True when `report` is a final grade of this very source, kit version and lab.json."""
    if not report or not report.get("final", True) or report.get("verdict") in NOT_A_GRADE:
        return False
    mark = report.get("class") or {}
    return (mark.get("source_sha256") == digest(source) and mark.get("kit_version") == __version__
            and mark.get("lab_sha256") == digest(Path(spec.lab_dir) / "lab.json"))


def placeholder(spec: labspec.LabSpec, student: str, verdict: str, message: str, final: bool = True) -> dict:
    """A report for a lab that no grading reported on: "missing", or "grader_error"."""
    return {"lab": spec.lab, "title": spec.title, "student": student, "verdict": verdict,
            "points": 0.0, "max_points": spec.points.total, "full_points": False, "final": final,
            "messages": [message], "seconds": {}, "gpu": None}


def save(out: Path, student: str, lab: str, report: dict, log: str | None = None) -> Path:
    """Write OUT/<student>/<lab>.json (and .log when given), each by rename."""
    report["student"] = student
    if log is not None:
        write_atomic(out / student / f"{lab}.log", log)
    return write_json(report_path(out, student, lab), report)
