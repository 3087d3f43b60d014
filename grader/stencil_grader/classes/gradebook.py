"""The gradebooks of a class: what goes to each course site, rebuilt from every report in OUT.

    write_all(out, table, lab_facts, missing_as_zero, leaderboard=None) -> notes for the summary

writes, from the reports merge.py read (table: {student: {lab: report}}) and, for the sites,
CLASS/roster.csv (the identifiers `grade.py import` kept: importers/roster.py):

    OUT/gradescope/<lab>/<student>/results.json   one Gradescope assignment per lab
                                                  (grading/gradescope.py: the documented format)
    OUT/gradebook/...                             each course site's files, written by its
                                                  module (importers/canvas.py: canvas.csv;
                                                  moodle.py: moodle-<lab>.csv; gradescope.py:
                                                  gradescope-<lab>.csv), for its students

Only what was asked is counted: the labs OUT holds reports of (the labs graded: plan.py), and
each student's row of the roster; a member of a group gets the grading of the group's folder
(roster.csv's "<lab> group") in every file.  What is no grade is never a 0: a lab
"not_measured", "kit_error", "pending" or "grader_error" is a blank cell (Canvas: no change;
Moodle: skipped) and no Gradescope file (one written before, from a grade, stays); a "missing"
lab is blank and has no file unless missing_as_zero asks for 0, which it never is for a near
miss (something submitted under another name: outdir.is_near_miss) nor for a bonus lab
(lab.json "bonus": true; extra credit on every site: Canvas gets 0 points possible for it).

A name cell that a spreadsheet would take for a formula (=, +, -, @) is written after a "'"
(outdir.sheet_cell): the names come from the students.
"""

from __future__ import annotations

from pathlib import Path

from ..grading import gradescope, score
from . import outdir
from .importers import common, sites
from .importers.roster import Roster, RosterError, is_group
from .submissions import ROSTER, shown

FOLDER = "gradebook"


def cell(report: dict | None, missing_as_zero: bool, bonus: bool = False) -> str:
    """A gradebook cell: the points of a grade ("%.2f"), "0" for a missing required lab with
    missing_as_zero (not a near miss), else "" (what is no grade is never 0)."""
    if report is None:
        return ""
    if outdir.is_grade(report):
        return f"{float(report.get('points') or 0.0):.2f}"
    if report.get("verdict") == outdir.MISSING and missing_as_zero and not bonus and not outdir.is_near_miss(report):
        return "0"
    return ""


def facts_of(table: dict[str, dict[str, dict]], lab_facts: dict[str, dict] | None) -> dict[str, dict]:
    """lab_facts (plan.lab_facts), or, without them, what the reports say of each lab."""
    if lab_facts:
        return lab_facts
    found: dict[str, dict] = {}
    for labs in table.values():
        for lab, r in labs.items():
            found.setdefault(lab, {"title": r.get("title", lab), "points": float(r.get("max_points") or 0),
                                   "bonus": bool(r.get("bonus"))})
    return found


def write_gradescope(out: Path, lab: str, student: str, report: dict, missing_as_zero: bool, bonus: bool,
                     leaderboard: list[dict] | None = None) -> Path | None:
    """OUT/gradescope/<lab>/<student>/results.json of one report (module docstring's rules);
    the file written, or None (left as it was, or removed: a lab "missing" and not counted)."""
    target = outdir.gradescope_path(out, lab, student)
    if report.get("verdict") in score.NOT_GRADED:
        return None
    if report.get("verdict") == outdir.MISSING and (bonus or not missing_as_zero or outdir.is_near_miss(report)):
        target.unlink(missing_ok=True)
        return None
    return outdir.write_json(target, gradescope.results(dict(report, bonus=bonus), leaderboard))


def roster_of(out: Path) -> tuple[Roster | None, str]:
    """CLASS/roster.csv of the class OUT belongs to (class.json names it), or (None, why not)."""
    manifest = outdir.read_json(out / outdir.MANIFEST) or {}
    if not manifest.get("submissions"):
        return None, ""
    path = Path(manifest["submissions"]) / ROSTER
    if not path.is_file():
        return None, (f"no {ROSTER} in {manifest['submissions']} (grade.py import writes it): no Canvas or Moodle "
                      "gradebook file written")
    try:
        return Roster.load(path), ""
    except RosterError as err:
        return None, f"{err}: no Canvas or Moodle gradebook file written"


def write_all(out: Path, table: dict[str, dict[str, dict]], lab_facts: dict[str, dict] | None = None,
              missing_as_zero: bool = False, leaderboard: dict | None = None) -> list[str]:
    """Every gradebook file of the module docstring; returns the lines the class summary adds.

    lab_facts: {lab: {"title", "points", "bonus"}} of every lab in order (plan.lab_facts;
    None: read from the reports).  leaderboard: {(student, lab): [{"name", "value", "order"}]}
    for the Gradescope files (Gradescope's leaderboard entries), written only when given."""
    out = Path(out)
    facts = facts_of(table, lab_facts)
    for student, labs in table.items():
        for lab, report in labs.items():
            write_gradescope(out, lab, student, report, missing_as_zero, bool(facts.get(lab, {}).get("bonus")),
                             (leaderboard or {}).get((student, lab)) if leaderboard is not None else None)
    roster, why = roster_of(out)
    if roster is None:
        return [why] if why else []
    labs = [lab for lab in facts if any(lab in found for found in table.values())]
    facts = {lab: facts[lab] for lab in labs}

    def graded_in(folder: str, row: dict, lab: str) -> str:
        return row.get(f"{lab} group") or folder

    def report(folder: str, row: dict, lab: str) -> dict | None:
        return table.get(graded_in(folder, row, lab), {}).get(lab)

    notes, by_site, accounted = [], {}, set()
    for folder, row in sorted(roster.rows.items()):
        if is_group(row):
            accounted.add(folder)
            continue
        homes = {graded_in(folder, row, lab) for lab in labs}
        if row.get("site_id") and homes & set(table):
            by_site.setdefault(row.get("site"), []).append((folder, row))
            accounted |= homes
    unknown = sorted(set(table) - accounted - set(roster.rows))
    if unknown:
        notes.append(f"{len(unknown)} student folder(s) have no row in {ROSTER}, so no course-site gradebook line: "
                     + ", ".join(map(shown, unknown)))
    written = []
    for site in sites.SITES:
        if not by_site.get(site):
            continue
        book = common.Book(labs, facts, by_site[site],
                           lambda f, r, lab: cell(report(f, r, lab), missing_as_zero, facts[lab].get("bonus")),
                           report, lambda name, text: outdir.write_atomic(out / FOLDER / name, text),
                           outdir.sheet_cell, shown)
        paths, more = sites.module(site).gradebook(out, book)
        written += paths
        notes += more
    if written:
        notes.append(f"course-site gradebooks: {out / FOLDER}/ ({', '.join(p.name for p in written)})")
    return notes
