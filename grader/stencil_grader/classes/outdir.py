"""The output directory of a class grading: its layout, the reports in it, and the rules that
keep a grade (resume, never lost): grader/README.md, section 9, "The output folder" and "Resume,
and a grade never lost"; each path has its function here (report_path, attempt_path, ...).

Every file is written under a temporary name and renamed into place (write_atomic), so a grading
killed at any moment leaves the old file or the new one, never half of one.

A report's "class" stamp says what was graded and by whom:

    {"source_sha256": ..., "kit_version": ..., "lab_sha256": ...,   what was graded
     "backend": "local" | "slurm" | ..., "run": "local" | "run-3",  who graded it (the engine)
     "job": "1234_5" | null, "host": "node12", "graded_at": ...}

A report is a grade when its verdict is one (is_grade): not "missing", "not_measured",
"kit_error", "pending" or "grader_error", whose 0 points mean nothing.  A grading is final (not
graded again by a resumed run) when its report is a grade, says "final": true, and the stamp's
source, kit version and lab.json digests are those of now (is_final).  A grade is never replaced
by what is not one, and by "missing" only when asked (save).  A "missing" report whose message
starts with NEAR_MISS is a near miss: never counted as 0 (is_near_miss).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..base import labspec
from ..grading import progress, score
from .submissions import ClassError

MANIFEST = "class.json"
#: The layout this module writes (MANIFEST records it; claim moves an earlier one).
LAYOUT = 3
STUDENTS = "students"
GRADESCOPE = "gradescope"
#: Where claim moves the Gradescope files of layout 2 (one file per student, every lab in it).
GRADESCOPE_EARLIER = ".earlier"
#: A batch back end's runs (batch.py); EARLIER_RUNS: their folder in layout 2, still read.
RUNS = "batch"
EARLIER_RUNS = "slurm"
#: grade.py similarity's files (similarity.py).
SIMILARITY = "similarity"
#: What a class grading of an earlier kit version (without MANIFEST) left in its OUT.
EARLIER_SIGNS = ("class.csv", GRADESCOPE)
#: The verdict of a grading whose process failed, or whose task the batch engine ended (one of
#: score.NOT_GRADED: graded again by the next run).
GRADER_ERROR = "grader_error"
MISSING = "missing"
ATTEMPT = ".attempt"
HISTORY = ".history.jsonl"


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
    """Write data (bytes, or text as UTF-8: a name's bytes that are not UTF-8 as they were) to path
    through a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape"))
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
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


# ------------------------------------------------------------------------------- the folder

def check_out(out: Path, submissions: Path | None = None) -> None:
    """ClassError when --out cannot be this class's output folder: an existing file, or a
    folder inside the submissions (a later run would take it for a student)."""
    if out.exists() and not out.is_dir():
        raise ClassError(f"--out {out} is a file; give a folder (new, or one this command wrote before)")
    if submissions is not None and (out == submissions or submissions in out.parents):
        raise ClassError(f"--out {out} lies inside the submissions folder {submissions}, where a later run would "
                         "take it for a student; choose an --out outside it")


def claim(out: Path, submissions: Path, write: bool = True) -> None:
    """Make sure OUT belongs to the class of `submissions`, and record that in OUT/class.json.

    Raises ClassError, touching nothing: OUT is a file; OUT holds another class's results
    (its class.json names other submissions); OUT is a non-empty folder that no class
    grading wrote (no class.json, no class.csv, no gradescope/).  A folder with class.csv
    or gradescope/ but no class.json (an earlier version of the kit) is taken over, and an
    earlier layout's student folders are moved into students/ (write=True).
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
    elif out.is_dir() and any(out.iterdir()) and not any((out / n).exists() for n in EARLIER_SIGNS):
        raise ClassError(f"--out {out} is a folder that holds other files and no class grading "
                         f"({MANIFEST}); choose a new or empty folder")
    if not write or (data or {}).get("layout") == LAYOUT:
        return
    out.mkdir(parents=True, exist_ok=True)
    _move_earlier_layout(out)
    _move_earlier_gradescope(out)
    write_json(manifest, dict(data or {"what": "stencil lab kit class grading", "submissions": str(submissions),
                                       "created": now()}, kit_version=__version__, layout=LAYOUT))


def _move_earlier_layout(out: Path) -> None:
    """Move the student folders of the earlier layout (OUT/<student>/<lab>.json) into students/."""
    earlier = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")
               and p.name not in (GRADESCOPE, RUNS, EARLIER_RUNS, SIMILARITY) and any(p.glob("*.json"))]
    if not earlier:
        return
    moving = out / f".{STUDENTS}.moving"
    moving.mkdir(exist_ok=True)
    for folder in earlier:             # a student once named "students" is moved like the others
        os.replace(folder, moving / folder.name)
    os.replace(moving, out / STUDENTS)


def _move_earlier_gradescope(out: Path) -> None:
    """Move layout 2's OUT/gradescope/<student>/results.json (every lab in one file) into
    OUT/gradescope/.earlier/<student>/, kept as they were; the files of now are per lab."""
    folder = out / GRADESCOPE
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if not entry.name.startswith(".") and (entry / "results.json").is_file():
            (folder / GRADESCOPE_EARLIER).mkdir(exist_ok=True)
            os.replace(entry, folder / GRADESCOPE_EARLIER / entry.name)


def students_dir(out: Path) -> Path:
    """OUT/students: a folder per student, and nothing else."""
    return Path(out) / STUDENTS


def student_dir(out: Path, student: str) -> Path:
    """OUT/students/<student>; ValueError for a name that is no single folder name."""
    if student in ("", ".", "..") or "/" in student or "\0" in student:
        raise ValueError(f"{student!r} is not a student folder's name")
    return students_dir(out) / student


def report_path(out: Path, student: str, lab: str) -> Path:
    """OUT/students/<student>/<lab>.json."""
    return student_dir(out, student) / f"{lab}.json"


def attempt_path(out: Path, student: str, lab: str) -> Path:
    """OUT/students/<student>/<lab>.attempt.json: a grading that measured nothing, kept beside
    the grade it did not replace (save)."""
    return student_dir(out, student) / f"{lab}{ATTEMPT}.json"


def history_path(out: Path, student: str, lab: str) -> Path:
    """OUT/students/<student>/<lab>.history.jsonl: every grading of that lab (progress.py)."""
    return student_dir(out, student) / f"{lab}{HISTORY}"


def gradescope_path(out: Path, lab: str, student: str) -> Path:
    """OUT/gradescope/<lab>/<student>/results.json: one Gradescope assignment per lab."""
    return Path(out) / GRADESCOPE / lab / student_dir(out, student).name / "results.json"


def read_reports(out: Path, labs: list[str]) -> dict[str, dict[str, dict]]:
    """{student: {lab: report}} of every OUT/students/<student>/<lab>.json of these labs, students
    sorted, labs in the order given.  A report that cannot be read is a grader_error saying so
    (never a gap)."""
    found: dict[str, dict[str, dict]] = {}
    folder = students_dir(out)
    if not folder.is_dir():
        return found
    for student in sorted(p.name for p in folder.iterdir() if p.is_dir()):
        for lab in labs:
            path = folder / student / f"{lab}.json"
            if not path.exists():
                continue
            data = read_json(path)
            if data is None or "verdict" not in data:
                data = {"lab": lab, "student": student, "verdict": GRADER_ERROR, "points": 0.0,
                        "max_points": None, "final": False, "messages": [f"{path.name} could not be read"]}
            found.setdefault(student, {})[lab] = data
    return found


# ------------------------------------------------------------------------------- what a report means

def is_grade(report: dict | None) -> bool:
    """True when report's verdict is a grade (module docstring): its points count."""
    return bool(report) and report.get("verdict") not in score.NOT_GRADED + (MISSING,)


#: How a "missing" report's message starts when something was submitted under another name (a
#: near miss: Kernel.cu, kernel (1).cu, a .zip, ...): never counted as 0 (plan.py writes it).
NEAR_MISS = "near miss: "


def is_near_miss(report: dict | None) -> bool:
    """True for a "missing" report of a near miss (NEAR_MISS): submitted, under another name."""
    return bool(report) and report.get("verdict") == MISSING and reason(report).startswith(NEAR_MISS)


def reason(report: dict) -> str:
    """Why a report got its verdict, in one line: its first message, else the verdict's stage's."""
    lines = [m for m in report.get("messages") or [] if isinstance(m, str) and m.strip()]
    for stage in ("correctness", "performance"):
        section = report.get(stage)
        if isinstance(section, dict) and section.get("verdict") not in (None, "pass", "not_run") \
                and section.get("message"):
            lines.append(section["message"])
    return lines[0].strip().splitlines()[0] if lines else ""


#: A cell starting with one of these is a formula to Excel, LibreOffice and Google Sheets
#: (OWASP, "CSV Injection": https://owasp.org/www-community/attacks/CSV_Injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def sheet_cell(text: str) -> str:
    """A text a student controls (a name, a message) as a CSV cell no spreadsheet evaluates:
    after a "'" when it starts like a formula (FORMULA_START), else as written.  Every CSV file
    of OUT writes names through this, so `=HYPERLINK(...)` as a folder name stays text."""
    return "'" + text if text[:1] in FORMULA_START else text


def total(reports: list[dict]) -> float | None:
    """The class total of one student's reports: their points ("missing" adds 0), or None when
    one of them is no grade (then there is no total to upload)."""
    if any(r.get("verdict") in score.NOT_GRADED for r in reports):
        return None
    return round(sum(float(r.get("points") or 0.0) for r in reports if is_grade(r)), 2)


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
    if not is_grade(report) or not report.get("final", True):
        return False
    mark = report.get("class") or {}
    return (mark.get("source_sha256") == digest(source) and mark.get("kit_version") == __version__
            and mark.get("lab_sha256") == digest(Path(spec.lab_dir) / "lab.json"))


def placeholder(spec: labspec.LabSpec, student: str, verdict: str, message: str) -> dict:
    """A report for a lab that no grading reported on ("missing", "grader_error"), or that was
    refused before any ran (a kernel.cu over its size: "compile_error"); final when a grade."""
    return {"lab": spec.lab, "title": spec.title, "bonus": spec.bonus, "student": student, "verdict": verdict,
            "points": 0.0, "max_points": spec.points.total, "full_points": False,
            "final": verdict not in score.NOT_GRADED + (MISSING,), "messages": [message], "seconds": {}, "gpu": None}


@dataclass
class Saved:
    """What save() did with one grading: `report` is what this grading got; `kept` the grade
    OUT keeps instead (this grading then went to the attempt files), or None."""

    student: str
    lab: str
    report: dict
    kept: dict | None = None

    @property
    def shown(self) -> dict:
        """The report that stands in OUT now."""
        return self.kept or self.report


def save(out: Path, student: str, lab: str, report: dict, log: str | None = None, asked: bool = False) -> Saved:
    """Write OUT/students/<student>/<lab>.json (and .log), each by rename, unless a grade stands
    there that this report must not replace: a grade is never replaced by what is not one
    (not_measured, grader_error, ...), nor by "missing" unless asked (--regrade, --student).
    Such a report goes to <lab>.attempt.json (and .attempt.log) instead, beside the grade.
    Either way the grading is appended to <lab>.history.jsonl (progress.append)."""
    report["student"] = student
    progress.append(history_path(out, student, lab), report)
    target = report_path(out, student, lab)
    old = read_json(target) if target.exists() else None
    new_is_grade = is_grade(report)
    if is_grade(old) and not new_is_grade and (report.get("verdict") != MISSING or not asked):
        write_json(attempt_path(out, student, lab), report)
        if log is not None:
            write_atomic(attempt_path(out, student, lab).with_suffix(".log"), log)
        return Saved(student, lab, report, old)
    if log is not None:
        write_atomic(target.with_suffix(".log"), log)
    write_json(target, report)
    for stale in (attempt_path(out, student, lab), attempt_path(out, student, lab).with_suffix(".log")):
        stale.unlink(missing_ok=True)
    return Saved(student, lab, report)


def run_folders(out: Path) -> list[Path]:
    """Every batch run folder of OUT (OUT/batch/run-N, and layout 2's OUT/slurm/run-N)."""
    return [p for name in (RUNS, EARLIER_RUNS) for p in sorted(Path(out, name).glob("run-*"))]


def unmerged_runs(out: Path) -> list[tuple[Path, dict]]:
    """(run folder, its run.json) of every batch run of OUT (run_folders) whose jobs were
    submitted and whose merge has not run: the run still owns OUT's class files."""
    found = []
    for path in run_folders(out):
        data = read_json(path / "run.json")
        if data and data.get("jobs") and not data.get("merged"):
            found.append((path, data))
    return found
