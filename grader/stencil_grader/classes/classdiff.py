"""How a class moved between two gradings, per (student, lab) (grader/README.md, section 9): "improved" or
"regressed" when both are grades and the points moved by more than POINTS_EPSILON, "changed" when the verdict
changed or a grade came or went (0 of "not_measured" to a grade is "changed"), "new", "gone", else "same"."""

from dataclasses import dataclass
from pathlib import Path

from ..grading import progress
from ..grading.html import escape as _e
from ..grading.score import is_grade
from . import outdir
from .submissions import ClassError, shown

#: Points that count as a move (reports round points to 0.01).
POINTS_EPSILON = 0.005
KINDS = ("improved", "regressed", "changed", "new", "gone", "same")

Entries = dict[str, dict[str, dict]]


@dataclass
class Change:
    """One (student, lab) between two gradings: the entries before and after (None: not there)."""
    student: str
    lab: str
    before: dict | None
    after: dict | None
    kind: str


def kind_of(before: dict | None, after: dict | None) -> str:
    """The kind of change between two entries (module docstring)."""
    if before is None or after is None:
        return "new" if before is None else "gone"
    if is_grade(before) and is_grade(after):
        moved = float(after.get("points") or 0.0) - float(before.get("points") or 0.0)
        if moved > POINTS_EPSILON:
            return "improved"
        if moved < -POINTS_EPSILON:
            return "regressed"
    if before.get("verdict") != after.get("verdict") or is_grade(before) != is_grade(after):
        return "changed"
    return "same"


def compare(before: Entries, after: Entries) -> list[Change]:
    """Every (student, lab) of either side, students sorted, labs in the order first seen."""
    labs = list(dict.fromkeys(lab for side in (before, after) for found in side.values() for lab in found))
    return [Change(student, lab, b, a, kind_of(b, a)) for student in sorted(set(before) | set(after)) for lab in labs
            for b, a in [(before.get(student, {}).get(lab), after.get(student, {}).get(lab))]
            if b is not None or a is not None]


def describe(entry: dict | None) -> str:
    """An entry in a few words: verdict, points (of a grade), ratio (when timed)."""
    if entry is None:
        return "none"
    words = str(entry.get("verdict"))
    if is_grade(entry):
        words += f" {float(entry.get('points') or 0.0):.2f}"
    if isinstance(entry.get("ratio"), (int, float)):
        words += f" (ratio {entry['ratio']:.3f})"
    return words


def counts(changes: list[Change]) -> str:
    return ", ".join(f"{kind} {sum(c.kind == kind for c in changes)}" for kind in KINDS)


def lines(changes: list[Change]) -> list[str]:
    """The counts of each kind, then `student/lab: before -> after (kind)` of each change but "same" (shown names)."""
    out = [counts(changes)]
    out += [f"  {shown(c.student)}/{c.lab}: {describe(c.before)} -> {describe(c.after)} ({c.kind})"
            for c in changes if c.kind != "same"]
    return out


def section(changes: list[Change], ident: str, title: str, note: str) -> str:
    """An HTML section (id `ident`): the counts, then a table of every change but "same"."""
    moved = [c for c in changes if c.kind != "same"]
    rows = "".join(f'<tr class="{c.kind}"><td>{_e(c.student)}</td><td>{_e(c.lab)}</td><td>{_e(describe(c.before))}'
                   f"</td><td>{_e(describe(c.after))}</td><td>{_e(c.kind)}</td></tr>" for c in moved)
    return (f'<section id="{_e(ident)}"><h2>{_e(title)}</h2><p class="muted">{_e(note)}</p><p>{_e(counts(changes))}'
            "</p>" + (f'<table id="{_e(ident)}-table"><tr><th>student</th><th>lab</th><th>before</th><th>after</th>'
                      f"<th>change</th></tr>{rows}</table>" if rows else "<p>Nothing moved.</p>") + "</section>")


def _entries(out: Path, labs: list[str]) -> Entries:
    return {s: {lab: progress.entry(r) for lab, r in found.items()}
            for s, found in outdir.read_reports(out, labs).items()}


def labs_in(out: Path, lab_order: list[str]) -> list[str]:
    """The labs OUT holds reports of: lab_order's first, in its order, then others (another kit's), sorted."""
    found = {p.name[:-len(".json")] for p in outdir.students_dir(out).glob("*/*.json")
             if not p.name.endswith(outdir.ATTEMPT + ".json")}
    return [lab for lab in lab_order if lab in found] + sorted(found - set(lab_order))


def diff_outs(out_a: Path, out_b: Path, lab_order: list[str]) -> list[Change]:
    """The changes from OUT_A's reports to OUT_B's (labs_in of either); ClassError: a folder no grading wrote."""
    for out in (out_a, out_b):
        if not (Path(out) / outdir.MANIFEST).is_file() and not outdir.students_dir(out).is_dir():
            raise ClassError(f"{out} is no class grading's output folder (no {outdir.MANIFEST}, no "
                             f"{outdir.STUDENTS}/): give two folders that grade.py class --out wrote")
    labs = labs_in(Path(out_a), lab_order)
    labs += [lab for lab in labs_in(Path(out_b), lab_order) if lab not in labs]
    return compare(_entries(Path(out_a), labs), _entries(Path(out_b), labs))


def class_section(histories: dict[str, dict[str, list[dict]]], labs: list[str]) -> str:
    """class.html's section on each (student, lab) graded more than once: its last grading against the one before;
    histories: {student: {lab: progress.read entries}} (the class table's)."""
    before: Entries = {}
    after: Entries = {}
    for student in sorted(histories):
        for lab in labs:
            history = histories[student].get(lab) or []
            if len(history) >= 2:
                before.setdefault(student, {})[lab] = history[-2]
                after.setdefault(student, {})[lab] = history[-1]
    if not after:
        return ""
    return section(compare(before, after), "moved", "Since each lab's previous grading",
                   "Each lab graded more than once here: its latest grading against the one before it "
                   "(OUT/students/<student>/<lab>.history.jsonl). grade.py class-diff OUTA OUTB compares two "
                   "whole output folders.")
