"""Instructor mode: grade a directory of submissions, one folder per student.

    SUBMISSIONS/<student>/<lab>/kernel.cu      (mirrors starter/)

Each (student, lab) is graded by its own `grade.py lab` process (worker.py), with a
clean environment, its own temporary folder and a time limit, so a crash, hang or
compile error costs that lab only.  Who runs those processes, and where, is a back
end's business (backend.py): this host's CPUs and GPUs (LocalBackend, `grade.py
class`), or a Slurm cluster (slurm.py, `grade.py slurm`).  This module owns what
every back end shares: the plan (which gradings, from submissions.py's roster) and
the class files written from the reports.

Output, under OUT (outdir.py says how files are written and stamped):
    <student>/<lab>.json                  the lab's JSON report (see report.to_dict), stamped
    <student>/<lab>.log                   what the grading printed
    class.csv                             student, one column per lab, total
    gradings.csv                          one row per (student, lab): verdict, points, the GPU
                                          (index, UUID, name) and host that graded it, stage seconds
    summary.txt                           what the last grading did, what failed and why
    gradescope/<student>/results.json     Gradescope's file for that student
    class.html                            (when classhtml.py is there) the class as a web page

Verdicts that exist only here: "missing" (no kernel.cu for that lab; the message
names a near miss such as Kernel.cu) and "grader_error" (the grading process died or
ran past its limit, or Slurm ended its task; its .log or the Slurm log says what
happened).

Nothing measured is no grade.  A lab whose verdict is "not_measured" (no GPU),
"kit_error" (the machine lacks the Check library, ...), "pending" or "grader_error"
gets that word in class.csv instead of points, its student's total stays empty, no
Gradescope file is written for that student, and the command says so loudly and
exits 1: zeros that only mean "no GPU here" or "the node died" must never be
uploaded as grades.  A "missing" lab shows "missing" in class.csv and adds nothing
to the total; Gradescope files leave it out, unless --missing-as-zero counts it as
0 there (a student who submitted nothing then gets a file with score 0).

Regrading (e.g. --student NAME) replaces only the files of what is regraded;
rows and files of other students are kept as they are.
"""

from __future__ import annotations

import csv
import io
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import KIT_ROOT
from ..base import labspec
from ..grading import report as reports
from . import outdir, submissions
from .outdir import GRADER_ERROR, MISSING, NOT_A_GRADE
from .submissions import ClassError
from .worker import Task, clean_env, time_limit_s  # noqa: F401  (re-exported: the class's one entry)

__all__ = ["ClassError", "ClassPlan", "ClassResult", "Grading", "plan_class", "grade_class", "finish",
           "select_labs", "update_csv", "write_gradescope", "clean_env", "time_limit_s"]


def _kit_root() -> Path:
    return KIT_ROOT


@dataclass
class Grading:
    """One (student, lab) as the class files see it.  gpu: the GPU that ran its GPU stages
    ({"index", "uuid", "name", "host"}), when one did; where: which process or Slurm task
    graded it, for messages."""

    student: str
    lab: str
    verdict: str
    points: float
    max_points: float
    seconds: float = 0.0
    gpu: dict | None = None
    message: str = ""

    @property
    def graded(self) -> bool:
        """False when the verdict is no grade (outdir.NOT_A_GRADE): its 0 points mean nothing."""
        return self.verdict not in NOT_A_GRADE

    @property
    def missing(self) -> bool:
        return self.verdict == MISSING

    @classmethod
    def from_report(cls, student: str, data: dict) -> "Grading":
        messages = data.get("messages") or [""]
        return cls(student, data["lab"], data["verdict"], float(data.get("points", 0.0)),
                   float(data.get("max_points", 0.0)), float((data.get("seconds") or {}).get("total", 0.0)),
                   gpu_of(data), messages[0] if messages else "")


def gpu_of(data: dict) -> dict | None:
    """The GPU a report's GPU stages ran on: {"index", "uuid", "name", "host"} (index and uuid
    from the pool that handed it out, when one did), or None when no GPU ran them."""
    section = data.get("gpu") or {}
    assigned = section.get("assigned") or {}
    device = section.get("device") or {}
    name = assigned.get("name") or device.get("name") or device.get("device")
    if not name and not assigned:
        return None
    return {"index": assigned.get("index"), "uuid": assigned.get("uuid", ""), "name": name or "",
            "host": (data.get("class") or {}).get("host", "")}


@dataclass
class ClassPlan:
    """What a class grading is asked to do, whoever runs it.

    tasks: every selected (student, lab), students sorted, labs in the kit's order; a task
        whose kernel.cu is missing has source None.
    lab_order: every lab of the kit, in order (the Gradescope files cover them all).
    notes: what was skipped in the submissions directory, and why.
    """

    submissions: Path
    out: Path
    specs: list[labspec.LabSpec]
    students: list[str]
    tasks: list[Task]
    lab_order: list[str]
    missing_as_zero: bool = False
    notes: list[str] = field(default_factory=list)


def select_labs(names: list[str] | None, kit_root: Path | None = None) -> list[labspec.LabSpec]:
    """The lab specs to grade: all labs of the kit, or the named ones (ClassError on an unknown name)."""
    root = kit_root or _kit_root()
    specs = {d.name: labspec.load(d / "lab.json") for d in labspec.discover_labs(root)}
    if not names:
        return list(specs.values())
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ClassError(f"unknown lab(s) {', '.join(unknown)}; labs: {', '.join(specs)}")
    return [specs[n] for n in names]


def plan_class(submissions_dir: str | Path, out: str | Path, labs: list[str] | None = None,
               student: str | None = None, kit_root: Path | None = None, missing_as_zero: bool = False,
               claim: bool = True) -> ClassPlan:
    """Check the input and make the plan; ClassError (usage) or labspec.LabSpecError (a broken
    lab.json) before anything is written.

    Refused: --out is a file or holds another class's results; the submissions are not a
    folder, hold no student folder, or no kernel.cu of the selected labs at all; an
    unknown lab or student.  claim=True records the class in OUT/class.json (outdir.claim).
    """
    subs, out = Path(submissions_dir).resolve(), Path(out).resolve()
    outdir.check_out(out)
    specs = select_labs(labs, kit_root)
    roster = submissions.read_roster(subs, student, skip=out)
    outdir.claim(out, subs, write=False)
    tasks = []
    for name in roster.students:
        for spec in specs:
            source, why = submissions.find_source(subs, name, spec.lab)
            tasks.append(Task(name, spec, source, why))
    if not any(t.source for t in tasks):
        who = f"student {student}" if student else f"{len(roster.students)} student folder(s)"
        raise ClassError(f"nothing to grade: no {submissions.SOURCE} of {', '.join(s.lab for s in specs)} "
                         f"in {who} of {subs} (expected {subs}/<student>/<lab>/{submissions.SOURCE})")
    if claim:
        outdir.claim(out, subs)
    lab_order = [s.lab for s in select_labs(None, kit_root)]
    return ClassPlan(subs, out, specs, roster.students, tasks, lab_order, missing_as_zero, list(roster.notes))


# ------------------------------------------------------------------------------- class files

def _points(cell: str) -> float:
    """A CSV cell's points (0 for "missing", an empty or a hand-edited cell)."""
    try:
        return float(cell)
    except ValueError:
        return 0.0


def update_csv(path: Path, gradings: list[Grading], lab_order: list[str]) -> None:
    """Merge gradings into class.csv: only the cells graded now change; other rows stay.

    A cell holds the points of a grade, or the verdict ("missing", "not_measured",
    "grader_error", ...) of anything else.  total: the sum of the points ("missing" adds 0),
    empty when a cell is no grade (outdir.NOT_A_GRADE)."""
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
        rows.setdefault(g.student, {})[g.lab] = f"{g.points:.2f}" if g.graded and not g.missing else g.verdict
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["student"] + labs + ["total"])
    for student in sorted(rows):
        cells = [rows[student].get(lab, "") for lab in labs]
        ungraded = any(c in NOT_A_GRADE for c in cells)
        writer.writerow([student] + cells + ["" if ungraded else f"{sum(_points(c) for c in cells):.2f}"])
    outdir.write_atomic(path, text.getvalue())


GRADINGS_COLUMNS = ("student", "lab", "verdict", "points", "max_points", "gpu_index", "gpu_uuid", "gpu_name",
                    "host", "backend", "run", "job", "graded_at", "build_s", "static_s", "gpu_wait_s", "cases_s",
                    "bench_s", "total_s", "message")


def all_reports(out: Path) -> list[tuple[str, dict]]:
    """(student, report) of every OUT/<student>/<lab>.json, sorted by student and lab."""
    found = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir() and not submissions.stray(p.name)
                         and p.name not in ("gradescope", "slurm")):
        for path in sorted(folder.glob("*.json")):
            data = outdir.read_json(path)
            if data and "lab" in data and "verdict" in data:
                found.append((folder.name, data))
    return found


def _first_line(data: dict, width: int = 200) -> str:
    """The first line of a report's first message, cut to `width` characters ("" when none)."""
    messages = data.get("messages") or []
    lines = str(messages[0]).splitlines() if messages else []
    return lines[0][:width] if lines else ""


def write_gradings_csv(out: Path) -> Path:
    """OUT/gradings.csv, one row per report in OUT (GRADINGS_COLUMNS): which GPU (nvidia-smi
    index on its host, UUID, name) and host graded it, by which back end, and the seconds of
    each stage (report["seconds"]: build, static, gpu_wait, cases, bench, total)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(GRADINGS_COLUMNS)
    for student, data in all_reports(out):
        gpu = gpu_of(data) or {}
        mark = data.get("class") or {}
        secs = data.get("seconds") or {}
        writer.writerow([student, data["lab"], data["verdict"], f"{float(data.get('points', 0)):.2f}",
                         f"{float(data.get('max_points', 0)):g}",
                         "" if gpu.get("index") is None else gpu["index"], gpu.get("uuid", ""),
                         gpu.get("name", ""), mark.get("host", ""), mark.get("backend", ""), mark.get("run", ""),
                         mark.get("job") or "", mark.get("graded_at", "")]
                        + ["" if secs.get(k) is None else f"{secs[k]:.2f}"
                           for k in ("build", "static", "gpu_wait", "cases", "bench", "total")]
                        + [_first_line(data)])
    return outdir.write_atomic(out / "gradings.csv", text.getvalue())


def write_gradescope(out: Path, student: str, lab_order: list[str], missing_as_zero: bool = False) -> Path | None:
    """OUT/gradescope/<student>/results.json from every lab report of that student in OUT.

    None, and no file (a stale one is removed): a lab of that student is no grade
    (outdir.NOT_A_GRADE), or nothing is left to report.  A "missing" lab is left out,
    or counted as 0 with missing_as_zero."""
    found = []
    for lab in lab_order:
        data = outdir.read_json(out / student / f"{lab}.json")
        if data is not None:
            found.append(data)
    target = out / "gradescope" / student / "results.json"
    kept = [r for r in found if r.get("verdict") != MISSING or missing_as_zero]
    if not kept or any(r.get("verdict") in NOT_A_GRADE for r in found):
        target.unlink(missing_ok=True)
        return None
    return reports.write_json(reports.gradescope_results(kept), target)


def write_class_html(out: Path, lab_order: list[str]) -> Path | None:
    """OUT/class.html from classhtml.py, when that module is part of this kit (it is optional)."""
    try:
        from .classhtml import write_class_html as write_html
    except ModuleNotFoundError as err:
        if err.name and err.name.endswith("classhtml"):
            return None
        raise
    return write_html(out, lab_order)


# ------------------------------------------------------------------------------- summary

@dataclass
class ClassResult:
    """What one class grading did: its gradings (in the plan's order), the summary lines
    (also in OUT/summary.txt), the lines that must be shouted (stderr), and grade.py's exit
    status: 0 when every grading of this run produced a grade, else 1."""

    gradings: list[Grading]
    summary: list[str]
    alarm: list[str]
    exit_status: int


def mixed_models(out: Path) -> dict[str, int]:
    """GPU name -> graded labs, over every report in OUT, when more than one model graded."""
    names = Counter((gpu_of(d) or {}).get("name") for _, d in all_reports(out) if d.get("verdict") not in NOT_A_GRADE)
    names.pop(None, None)
    names.pop("", None)
    return dict(names) if len(names) > 1 else {}


#: The most gradings a summary lists by name under one heading (gradings.csv lists them all).
LISTED = 20


def _listed(gradings: list[Grading], verdict: bool = False) -> list[str]:
    lines = [f"  {g.student}/{g.lab}: " + (f"{g.verdict}: " if verdict else "") + g.message
             for g in gradings[:LISTED]]
    if len(gradings) > LISTED:
        lines.append(f"  ... and {len(gradings) - LISTED} more (gradings.csv lists them all)")
    return lines


def summarize(out: Path, gradings: list[Grading], notes: list[str], missing_as_zero: bool) -> ClassResult:
    """The class summary of this run's gradings (module docstring: what is no grade)."""
    lines = [f"{len(gradings)} grading(s): " + ", ".join(f"{n} {v}" for v, n in
                                                          sorted(Counter(g.verdict for g in gradings).items()))]
    lines.append(f"class table: {out / 'class.csv'}; per grading (GPU, host, seconds): {out / 'gradings.csv'}")
    lines += notes
    missing = [g for g in gradings if g.missing]
    if missing:
        counted = ("counted as 0 in the Gradescope files (--missing-as-zero)" if missing_as_zero else
                   "left out of the Gradescope files (--missing-as-zero counts them as 0)")
        lines.append(f"{len(missing)} lab(s) never submitted, shown as 'missing' in class.csv and {counted}:")
        lines += _listed(missing)
    errors = [g for g in gradings if g.verdict == GRADER_ERROR]
    if errors:
        lines.append(f"{len(errors)} grading(s) failed to produce a report (verdict {GRADER_ERROR}; grade again "
                     "to complete them):")
        lines += _listed(errors)
    alarm = []
    ungraded = [g for g in gradings if not g.graded and g.verdict != GRADER_ERROR]
    if ungraded:
        verdicts = ", ".join(sorted({g.verdict for g in ungraded}))
        alarm += [f"NOTHING WAS MEASURED for {len(ungraded)} of {len(gradings)} grading(s) ({verdicts}): "
                  "no GPU, or a broken machine.",
                  "Their 0 points are NOT grades: class.csv shows the verdict instead of points, and no "
                  "Gradescope file was written for those students.",
                  "Grade again on a machine with a GPU (the reports say what was missing)."]
        lines += _listed(ungraded, verdict=True)
    models = mixed_models(out)
    if models:
        alarm.append("WARNING: this class was graded on GPUs of different models: "
                     + ", ".join(f"{name} ({n} lab(s))" for name, n in sorted(models.items()))
                     + ". Scores compare within one model (copy bandwidth is measured in each run, but "
                       "targets are per model): grade the class on one model, or check gradings.csv.")
    status = 1 if errors or ungraded else 0
    outdir.write_atomic(out / "summary.txt", "\n".join(lines + alarm) + "\n")
    return ClassResult(gradings, lines, alarm, status)


def finish(plan: ClassPlan, gradings: list[Grading], notes: list[str] | None = None) -> ClassResult:
    """Write the class files from this run's gradings and every report in OUT: class.csv,
    gradings.csv, the Gradescope files of the plan's students, class.html, summary.txt."""
    out = plan.out
    outdir.sweep_temporaries(out)
    update_csv(out / "class.csv", gradings, [s.lab for s in plan.specs])
    write_gradings_csv(out)
    for name in plan.students:
        write_gradescope(out, name, plan.lab_order, plan.missing_as_zero)
    all_notes = list(plan.notes) + list(notes or [])
    try:
        page = write_class_html(out, plan.lab_order)
        if page:
            all_notes.append(f"class page: {page}")
    except Exception as err:          # the page is a convenience: never lose the grading over it
        all_notes.append(f"could not write the class page (classhtml.py): {type(err).__name__}: {err}")
    return summarize(out, gradings, all_notes, plan.missing_as_zero)


def grade_class(submissions_dir: str | Path, out: str | Path, labs: list[str] | None = None,
                student: str | None = None, jobs: int | None = None,
                progress: Callable[[str], None] = print, kit_root: Path | None = None,
                gpus: str | None = None, missing_as_zero: bool = False, gpu_set=None) -> ClassResult:
    """Grade every (student, lab) on this host (backend.LocalBackend) and write the class files.

    gpus: "all" (default: every GPU nvidia-smi lists) or indices "0,2"; each is probed first
        and a GPU that fails is left out with a message.  gpu_set: a ready gpupool.GpuSet
        (tests give fake GPUs and probes).
    progress: called with one line per grading, in the plan's order (students, then labs).
    Raises ClassError (usage) or labspec.LabSpecError (a broken lab.json) before grading anything.
    """
    from .backend import LocalBackend
    plan = plan_class(submissions_dir, out, labs, student, kit_root, missing_as_zero, claim=False)
    backend = LocalBackend(jobs or os.cpu_count() or 1, gpus=gpus, gpu_set=gpu_set, say=progress)
    backend.check()
    outdir.claim(plan.out, plan.submissions)
    gradings = backend.run(plan, progress)
    return finish(plan, gradings, backend.notes)
