"""Instructor mode: grade a directory of submissions, one folder per student.

    SUBMISSIONS/<student>/<lab>/kernel.cu      (mirrors starter/)

Each (student, lab) is graded by its own `grade.py lab` process, with a clean
environment, its own temporary build directory and a time limit, so a crash,
hang or compile error costs that lab only.  Builds run in parallel (--jobs);
the GPU stages take a lock file, so only one grading uses the GPU at a time.

Output, under OUT:
    <student>/<lab>.json                  the lab's JSON report (see report.to_dict)
    <student>/<lab>.log                   what the grading printed
    class.csv                             student, one column of points per lab, total
    gradescope/<student>/results.json     Gradescope's file for that student

Two verdicts exist only here (0 points each): "missing" (no kernel.cu for that
lab) and "grader_error" (the grading process died or ran past its limit; its
.log says what it printed).

Nothing measured is no grade.  A lab whose verdict is "not_measured" (no GPU)
or "kit_error" (the machine lacks the Check library, ...) gets that word in
class.csv instead of points, its student's total stays empty, no Gradescope
file is written for that student, and `grade.py class` says so loudly and
exits 1: zeros that only mean "no GPU here" must never be uploaded as grades.

Regrading (e.g. --student NAME) replaces only the files of what is regraded;
rows and files of other students are kept as they are.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import KIT_ROOT
from ..base import labspec, process, sandbox
from ..grading import bench, build, checkrun, report, score

GRADE_PY = KIT_ROOT / "grader" / "grade.py"
#: Environment variables a grading process keeps; everything else is dropped.
ENV_KEEP = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH",
            "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
            sandbox.SANDBOX_USER_ENV) + sandbox.CUDA_ENV_KEEP
_SLACK_S = 120.0


class ClassError(ValueError):
    """A usage problem: no such student, no such lab, no submissions directory."""


@dataclass
class Grading:
    student: str
    lab: str
    verdict: str
    points: float
    max_points: float
    seconds: float = 0.0

    @property
    def graded(self) -> bool:
        """False when nothing was measured (score.NOT_GRADED): its 0 points are no grade."""
        return self.verdict not in score.NOT_GRADED


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ENV_KEEP}
    env["NO_COLOR"] = "1"
    env.setdefault("PATH", os.defpath)
    return env


def time_limit_s(spec: labspec.LabSpec, jobs: int) -> float:
    """Seconds one grading process may take: its build, then its GPU stages after waiting
    for at most jobs - 1 others' GPU stages (every stage has its own limit inside)."""
    gpu_stages = (bench.PROBE_TIMEOUT_S + checkrun.LIST_TIMEOUT_S + spec.check.suite_timeout_s
                  + spec.bench.timeout_s)
    return build.DEFAULT_TIMEOUT_S + gpu_stages * max(1, jobs) + _SLACK_S


def students_in(submissions: Path, only: str | None = None, skip: Path | None = None) -> list[str]:
    """Student folder names (hidden folders and `skip`, the output folder, left out),
    or [only] after checking it is one of them."""
    if not submissions.is_dir():
        raise ClassError(f"{submissions}: no such directory")
    names = sorted(p.name for p in submissions.iterdir()
                   if p.is_dir() and not p.name.startswith(".") and p.resolve() != skip)
    if only is not None:
        if only not in names:
            raise ClassError(f"no submissions for student {only!r} in {submissions}")
        return [only]
    return names


def select_labs(names: list[str] | None, kit_root: Path = KIT_ROOT) -> list[labspec.LabSpec]:
    """The lab specs to grade: all labs of the kit, or the named ones (ClassError on an unknown name)."""
    specs = {d.name: labspec.load(d / "lab.json") for d in labspec.discover_labs(kit_root)}
    if not names:
        return list(specs.values())
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ClassError(f"unknown lab(s) {', '.join(unknown)}; labs: {', '.join(specs)}")
    return [specs[n] for n in names]


def _placeholder(spec: labspec.LabSpec, student: str, verdict: str, message: str) -> dict:
    return {"lab": spec.lab, "title": spec.title, "student": student, "verdict": verdict,
            "points": 0.0, "max_points": spec.points.total, "full_points": False,
            "messages": [message]}


def grade_one(spec: labspec.LabSpec, student: str, submissions: Path, out: Path, jobs: int,
              lock: Path) -> Grading:
    """Grade one student's lab in its own process; always leaves OUT/<student>/<lab>.json."""
    start = time.monotonic()
    student_out = out / student
    student_out.mkdir(parents=True, exist_ok=True)
    source = submissions / student / spec.lab / "kernel.cu"
    if not source.is_file():
        result = _placeholder(spec, student, "missing", f"no submission: {source} not found")
    else:
        with tempfile.TemporaryDirectory(prefix=f"grade-{spec.lab}-") as tmp:
            # The grading's own TMPDIR, so that the sandboxes of its runs go when it goes (even
            # when it is killed); 0711 lets the sandbox user reach its own directory in it.
            os.chmod(tmp, 0o711)
            json_path = Path(tmp) / "report.json"
            command = [sys.executable, GRADE_PY, "lab", spec.lab_dir, "--impl", submissions / student,
                       "--build-dir", Path(tmp) / "build", "--json", json_path, "--gpu-locks", lock]
            run = process.run(command, time_limit_s(spec, jobs), env=dict(clean_env(), TMPDIR=tmp), cwd=tmp)
            (student_out / f"{spec.lab}.log").write_text(run.stdout + run.stderr)
            result = None
            if json_path.is_file():
                try:
                    result = json.loads(json_path.read_text())
                except json.JSONDecodeError:
                    result = None
            if result is None or run.timed_out or run.returncode not in (0, 1):
                why = f"the grading process {run.describe()}; see {spec.lab}.log"
                result = _placeholder(spec, student, "grader_error", why)
    result["student"] = student
    report.write_json(result, student_out / f"{spec.lab}.json")
    return Grading(student, spec.lab, result["verdict"], result["points"], result["max_points"],
                   time.monotonic() - start)


def _points(cell: str) -> float:
    """A CSV cell's points (0 for an empty or hand-edited cell)."""
    try:
        return float(cell)
    except ValueError:
        return 0.0


def update_csv(path: Path, gradings: list[Grading], lab_order: list[str]) -> None:
    """Merge gradings into class.csv: only the cells graded now change; other rows stay."""
    rows: dict[str, dict[str, str]] = {}
    labs: list[str] = []
    if path.is_file():
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            labs = [c for c in (reader.fieldnames or []) if c not in ("student", "total")]
            for row in reader:
                rows[row["student"]] = {k: v for k, v in row.items() if k in labs}
    for lab in lab_order:
        if lab not in labs:
            labs.append(lab)
    labs.sort()
    for g in gradings:
        rows.setdefault(g.student, {})[g.lab] = f"{g.points:.2f}" if g.graded else g.verdict
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["student"] + labs + ["total"])
        for student in sorted(rows):
            cells = [rows[student].get(lab, "") for lab in labs]
            ungraded = any(c in score.NOT_GRADED for c in cells)
            writer.writerow([student] + cells + ["" if ungraded else f"{sum(_points(c) for c in cells):.2f}"])
    os.replace(tmp, path)


def write_gradescope(out: Path, student: str, lab_order: list[str]) -> Path | None:
    """OUT/gradescope/<student>/results.json from every lab report of that student in OUT;
    None (and no file: a stale one is removed) when a lab of that student was not measured."""
    reports = []
    for lab in lab_order:
        path = out / student / f"{lab}.json"
        if path.is_file():
            reports.append(json.loads(path.read_text()))
    target = out / "gradescope" / student / "results.json"
    if any(r.get("verdict") in score.NOT_GRADED for r in reports):
        target.unlink(missing_ok=True)
        return None
    return report.write_json(report.gradescope_results(reports), target)


def grade_class(submissions: str | Path, out: str | Path, labs: list[str] | None = None,
                student: str | None = None, jobs: int | None = None,
                progress: Callable[[str], None] = print, kit_root: Path = KIT_ROOT) -> list[Grading]:
    """Grade every (student, lab); returns the gradings of this run.

    Raises ClassError (usage) or labspec.LabSpecError (a broken lab.json) before grading anything.
    """
    submissions, out = Path(submissions).resolve(), Path(out).resolve()
    specs = select_labs(labs, kit_root)
    students = students_in(submissions, student, skip=out)
    jobs = jobs or os.cpu_count() or 1
    out.mkdir(parents=True, exist_ok=True)
    lock = Path(tempfile.mkdtemp(prefix="stencil-gpu-locks-"))    # shared by this run's gradings
    tasks = [(spec, s) for s in students for spec in specs]
    progress(f"grading {len(students)} student(s) x {len(specs)} lab(s), {jobs} at a time")

    def task(item):
        spec, name = item
        g = grade_one(spec, name, submissions, out, jobs, lock)
        progress(f"{g.student:<20} {g.lab:<24} {g.verdict:<14} {g.points:6.2f}/{g.max_points:g}"
                 f"  ({g.seconds:.0f} s)")
        return g

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            gradings = list(pool.map(task, tasks))
    finally:
        shutil.rmtree(lock, ignore_errors=True)
    lab_order = [s.lab for s in select_labs(None, kit_root)]
    update_csv(out / "class.csv", gradings, [s.lab for s in specs])
    for name in students:
        write_gradescope(out, name, lab_order)
    return gradings
