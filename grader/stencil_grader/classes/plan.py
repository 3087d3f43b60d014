"""The plan of a class grading, whoever runs it: which (student, lab) this run grades and which it keeps
(grader/README.md, section 9, "Resume, and a grade never lost")."""

from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec
from ..grading import build, score
from . import grades, outdir, resume, submissions
from .importers.roster import ROSTER, Roster, RosterError, imported_labs
from .submissions import ClassError, shown


@dataclass
class Task:
    """One (student, lab) of a class: its lab spec, and its kernel.cu (None: missing, and why)."""
    student: str
    spec: labspec.LabSpec
    source: Path | None
    why_missing: str = ""

    @property
    def lab(self) -> str:
        return self.spec.lab

    @property
    def key(self) -> str:
        """student/lab, as printed (submissions.shown)."""
        return f"{shown(self.student)}/{self.spec.lab}"


@dataclass
class ClassPlan:
    """What a class grading is asked to do.  tasks: this run's gradings (source None: "missing", nothing runs); kept:
    the reports that stand; lab_order: every lab of the kit; lab_facts: {lab: {"title", "points", "bonus"}}; asked:
    --regrade or --student (resume.save's rule); roster: CLASS/roster.csv or None; notes: what was skipped or kept."""
    submissions: Path
    out: Path
    specs: list[labspec.LabSpec]
    students: list[str]
    tasks: list[Task]
    lab_order: list[str]
    missing_as_zero: bool = False
    notes: list[str] = field(default_factory=list)
    kept: list[Task] = field(default_factory=list)
    asked: bool = False
    lab_facts: dict[str, dict] = field(default_factory=dict)
    roster: Roster | None = None


def select_labs(names: list[str] | None, root: Path | None = None,
                among: list[labspec.LabSpec] | None = None) -> list[labspec.LabSpec]:
    """The lab specs to grade: all labs of the kit (root, else KIT_ROOT, which tests point at a fake kit; or of
    `among`, specs already loaded), or the named ones (ClassError on an unknown name)."""
    specs = ({s.path.parent.name: s for s in among} if among is not None else
             {d.name: labspec.load(d / "lab.json") for d in labspec.discover_labs(root or KIT_ROOT)})
    if not names:
        return list(specs.values())
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ClassError(f"unknown lab(s) {', '.join(unknown)}; labs: {', '.join(specs)}")
    return [specs[n] for n in names]


def make_plan(submissions_dir: str | Path, out: str | Path, labs: list[str] | None = None,
              student: str | None = None, kit: Path | None = None, missing_as_zero: bool = False,
              regrade: bool = False) -> ClassPlan:
    """Check the input and make the plan; before anything is written, ClassError (a bad --out, a kit path make cannot
    take, no students or no kernel.cu at all, an unknown lab or student) or labspec.LabSpecError."""
    subs, out = Path(submissions_dir).resolve(), Path(out).resolve()
    outdir.check_out(out, subs)
    kit = Path(kit or KIT_ROOT).resolve()
    if why := build.make_path_problem(kit):
        raise ClassError(f"the kit lies in {str(kit)!r}, a path that {why}, which make cannot take: move the kit "
                         "(or a copy of it) to a path without it")
    every = select_labs(None, kit)
    try:
        roster = Roster.load(subs / ROSTER) if (subs / ROSTER).is_file() else None     # grade.py import's
    except RosterError as err:
        raise ClassError(shown(str(err))) from None
    asked_labs = labs or imported_labs(roster.columns, [s.lab for s in every]) if roster else labs
    specs = select_labs(asked_labs, among=every)
    found = submissions.read_students(subs, student)
    outdir.claim(out, subs, write=False)
    tasks, notes, in_groups = [], list(found.notes), []
    if not labs and roster and asked_labs:
        notes.append(f"labs: {', '.join(asked_labs)}, the ones {ROSTER} says were imported (--labs to choose)")
    for name in found.students:
        row = roster.rows.get(name, {}) if roster else {}
        for spec in specs:
            if row.get(f"{spec.lab} group"):
                in_groups.append(f"{shown(name)}/{spec.lab} -> {shown(row[f'{spec.lab} group'])}")
                continue
            source, why = submissions.find_source(subs, name, spec.lab)
            files = row.get(f"{spec.lab} files") or ""
            submitted = files.isdigit() and int(files) > 0 and not row.get(f"{spec.lab} file")   # none taken
            if source is None and (submissions.near_miss(why) or submitted):
                why = grades.NEAR_MISS + (row.get(f"{spec.lab} note") or why)
            tasks.append(Task(name, spec, source, why))
    if in_groups:
        notes.append(f"{len(in_groups)} lab(s) of students in a group are graded in the group's folder "
                     f"({ROSTER}): " + ", ".join(in_groups))
    if not any(t.source for t in tasks):
        who = f"student {shown(student)!r}" if student else f"{len(found.students)} student folder(s)"
        raise ClassError(f"nothing to grade: no {submissions.SOURCE} of {', '.join(s.lab for s in specs)} "
                         f"in {who} of {subs} (expected {subs}/<student>/<lab>/{submissions.SOURCE})")
    asked = regrade or student is not None
    todo, kept = [], []
    for task in tasks:
        report = outdir.read_json(outdir.report_path(out, task.student, task.lab))
        if asked or not (resume.is_final(report, task.source, task.spec) if task.source is not None
                         else score.is_grade(report)):
            todo.append(task)
            continue
        kept.append(task)
        if task.source is None:
            notes.append(f"{task.key}: {submissions.SOURCE} is no longer in the submissions; its grade "
                         f"({report['verdict']}) stays (--regrade or --student records it as missing)")
    return ClassPlan(subs, out, specs, found.students, todo, [s.lab for s in every], missing_as_zero, notes, kept,
                     asked, lab_facts(every), roster)


def lab_facts(specs: list[labspec.LabSpec]) -> dict[str, dict]:
    """{lab: {"title", "points", "bonus"}} of these specs, in their order (ClassPlan.lab_facts)."""
    return {s.lab: {"title": s.title, "points": s.points.total, "bonus": s.bonus} for s in specs}
