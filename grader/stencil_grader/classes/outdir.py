"""The output folder of a class grading (grader/README.md, section 9, "The output folder"): its paths, its files (each
written by rename: a killed grading leaves the old file or the new), and whose class it is (class.json)."""

import datetime
import json
import os
import re
from pathlib import Path

from ..base.files import write_json
from .. import __version__
from ..grading import score
from .submissions import ClassError

MANIFEST = "class.json"
#: The layout this module writes (MANIFEST records it; claim moves an earlier one).
LAYOUT = 3
STUDENTS = "students"
GRADESCOPE = "gradescope"
#: Where claim moves the Gradescope files of layout 2 (one file per student, every lab in it).
GRADESCOPE_EARLIER = ".earlier"
#: The course sites' gradebook files.
GRADEBOOK = "gradebook"
#: A batch back end's runs (batch.py); EARLIER_RUNS: their folder in layout 2, still read.
RUNS = "batch"
EARLIER_RUNS = "slurm"
#: grade.py similarity's files (similarity.py).
SIMILARITY = "similarity"
#: What a class grading of an earlier kit version (without MANIFEST) left in its OUT.
EARLIER_SIGNS = ("class.csv", GRADESCOPE)
ATTEMPT = ".attempt"
HISTORY = ".history.jsonl"


def now() -> str:
    """The time now, UTC, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


_TEMPORARY = re.compile(r"^\..+\.(\d+)\.tmp$")


def sweep_temporaries(out: Path) -> None:
    """Remove files.write_atomic's temporary files left in OUT by killed writers (not a live process's of this host)."""
    for path in Path(out).rglob(".*.tmp"):
        if not (match := _TEMPORARY.match(path.name)) or not path.is_file():
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue                      # its writer still runs here
        except (ProcessLookupError, ValueError):
            path.unlink(missing_ok=True)
        except PermissionError:
            pass


def read_json(path: Path) -> dict | None:
    """The JSON object in path, or None when it is missing or not an object."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def check_out(out: Path, submissions: Path | None = None) -> None:
    """ClassError when --out is an existing file, or a folder inside the submissions."""
    if out.exists() and not out.is_dir():
        raise ClassError(f"--out {out} is a file; give a folder (new, or one this command wrote before)")
    if submissions is not None and (out == submissions or submissions in out.parents):
        raise ClassError(f"--out {out} lies inside the submissions folder {submissions}, where a later run would "
                         "take it for a student; choose an --out outside it")


def claim(out: Path, submissions: Path, write: bool = True) -> None:
    """Make sure OUT belongs to the class of `submissions` and record it in OUT/class.json (write=False: check only).
    ClassError, touching nothing: OUT is a file, another class's, or a non-empty folder no class grading wrote; an
    earlier kit's OUT (EARLIER_SIGNS) is taken over, its layout moved to this one."""
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
    """Move layout 2's OUT/gradescope/<student>/ (every lab in one file) into OUT/gradescope/.earlier/."""
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
    """OUT/students/<student>/<lab>.attempt.json: a grading that measured nothing, beside the grade it kept."""
    return student_dir(out, student) / f"{lab}{ATTEMPT}.json"


def history_path(out: Path, student: str, lab: str) -> Path:
    """OUT/students/<student>/<lab>.history.jsonl: every grading of that lab (progress.py)."""
    return student_dir(out, student) / f"{lab}{HISTORY}"


def gradescope_path(out: Path, lab: str, student: str) -> Path:
    """OUT/gradescope/<lab>/<student>/results.json: one Gradescope assignment per lab."""
    return Path(out) / GRADESCOPE / lab / student_dir(out, student).name / "results.json"


def read_reports(out: Path, labs: list[str]) -> dict[str, dict[str, dict]]:
    """{student: {lab: report}} of OUT's reports of these labs, students sorted; one that cannot be read is a
    grader_error saying so, never a gap."""
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
            if data is None or "verdict" not in data:       # no gap: a grader_error (score.NOT_GRADED)
                data = {"lab": lab, "student": student, "verdict": score.GRADER_ERROR, "points": 0.0,
                        "max_points": None, "final": False, "messages": [f"{path.name} could not be read"]}
            found.setdefault(student, {})[lab] = data
    return found


def run_folders(out: Path) -> list[Path]:
    """Every batch run folder of OUT (OUT/batch/run-N, and layout 2's OUT/slurm/run-N)."""
    return [p for name in (RUNS, EARLIER_RUNS) for p in sorted(Path(out, name).glob("run-*"))]


def unmerged_runs(out: Path) -> list[tuple[Path, dict]]:
    """(run folder, run.json) of each batch run of OUT submitted and not merged: it still owns the class files."""
    runs = [(path, read_json(path / "run.json")) for path in run_folders(out)]
    return [(path, data) for path, data in runs if data and data.get("jobs") and not data.get("merged")]
