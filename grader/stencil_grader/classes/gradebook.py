"""The gradebooks of a class: what goes to each course site, rebuilt from every report in OUT.

    write_all(out, table, lab_facts, missing_as_zero, leaderboard=None) -> notes for the summary

writes, from the reports merge.py read (table: {student: {lab: report}}) and, for the sites,
CLASS/roster.csv (the identifiers `grade.py import` kept: importers/roster.py):

    OUT/gradescope/<lab>/<student>/results.json   one Gradescope assignment per lab
                                                  (grading/gradescope.py: the documented format)
    OUT/gradebook/canvas.csv                      Canvas's Gradebook import, its students
    OUT/gradebook/moodle-<lab>.csv                Moodle's grading worksheet of each lab's
                                                  assignment, its students
    OUT/gradebook/gradescope-<lab>.csv            each Gradescope student's folder and
                                                  identifiers beside their score (the lookup
                                                  an autograder serving the files needs)

What is no grade is never a 0: a lab "not_measured", "kit_error", "pending" or
"grader_error" is a blank cell (Canvas: no change; Moodle: skipped) and no Gradescope file
(one written before, from a grade, stays); a "missing" lab is blank and has no file unless
missing_as_zero asks for 0.  A bonus lab (lab.json "bonus": true) is extra credit on every
site: Canvas gets 0 points possible for it (what Canvas counts on top of the total), and a
bonus lab never submitted stays blank even with missing_as_zero.

The formats, from each site's own code and documentation:

  Canvas, Gradebook > Import: a header "Student", "ID", "SIS User ID", "SIS Login ID",
  "Section", then one column per assignment (an existing assignment of that exact title is
  updated, any other title creates one), a "Points Possible" row, then a row per student,
  matched by "ID", Canvas's user id: the id in the "Download Submissions" file names that
  the importer kept.  Blank cells change nothing.  Source: canvas-lms
  app/models/gradebook_importer.rb (row_has_student_headers?, update_column_count,
  process_pp, process_student, no_score?), and the Instructor Guide, "How do I import
  grades in the Gradebook?", https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807.
  Anonymous submissions (ids "anon_...") cannot be matched and are left out, with a note.
  Extra credit as a 0-point assignment: e.g. https://vlcross.ucdavis.edu/blog/giving-extra-credit-canvas.

  Moodle, an assignment's "Upload grading worksheet" (feedback type "Offline grading
  worksheet"): columns found by their English headings "Identifier" ("Participant <id>":
  the participant id of the "Download all submissions" folders the importer kept), "Grade"
  and "Last modified (grade)"; a blank grade is skipped.  Source: moodle
  mod/assign/feedback/offline/importgradeslib.php (init, next) and locallib.php
  (process_import_grades), strings in mod/assign/lang/en/assign.php ('hiddenuser',
  'recordid', 'lastmodifiedgrade'); the feedback type: https://docs.moodle.org/en/Assignment_settings
  ("Feedback types").

A name cell that a spreadsheet would take for a formula (=, +, -, @) is written after a "'"
(outdir.sheet_cell): the names come from the students.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..grading import gradescope
from . import outdir
from .importers.roster import Roster, RosterError
from .submissions import ROSTER, shown

FOLDER = "gradebook"
CANVAS_HEAD = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_HEAD = ("Identifier", "Full name", "Grade", "Maximum Grade", "Last modified (grade)")
#: Moodle's prefix of a participant's identifier (mod/assign/lang/en/assign.php 'hiddenuser').
MOODLE_PARTICIPANT = "Participant "
GRADESCOPE_HEAD = ("folder", "site_id", "email", "name", "score", "results")


def cell(report: dict | None, missing_as_zero: bool, bonus: bool = False) -> str:
    """A gradebook cell: the points of a grade ("%.2f"), "0" for a missing required lab with
    missing_as_zero, else "" (what is no grade is never 0)."""
    if report is None:
        return ""
    if outdir.is_grade(report):
        return f"{float(report.get('points') or 0.0):.2f}"
    if report.get("verdict") == outdir.MISSING and missing_as_zero and not bonus:
        return "0"
    return ""


def _csv(rows: list[list]) -> str:
    text = io.StringIO()
    csv.writer(text).writerows(rows)         # RFC 4180: CRLF, and a name holding CR or LF quoted
    return text.getvalue()


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
    if report.get("verdict") in outdir.NOT_A_GRADE:
        return None
    if report.get("verdict") == outdir.MISSING and (bonus or not missing_as_zero):
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


def write_canvas(out: Path, rows: list[tuple[str, dict]], table, facts, missing_as_zero) -> tuple[Path, list[str]]:
    """OUT/gradebook/canvas.csv for the roster rows of Canvas students (module docstring)."""
    labs = list(facts)
    lines = [list(CANVAS_HEAD) + labs,
             ["Points Possible", "", "", "", ""] + [f"{0 if facts[l].get('bonus') else facts[l]['points']:g}"
                                                     for l in labs]]
    left_out = []
    for folder, row in rows:
        if row.get("site_id", "").startswith("anon_"):
            left_out.append(folder)
            continue
        found = table.get(folder, {})
        lines.append([outdir.sheet_cell(row.get("name", "")), row["site_id"], "", "", ""]
                     + [cell(found.get(l), missing_as_zero, facts[l].get("bonus")) for l in labs])
    notes = [f"canvas.csv leaves out {len(left_out)} anonymous submission(s) ({', '.join(map(shown, left_out))}): "
             "Canvas matches a row by its user id, which an anonymous export does not give"] if left_out else []
    return outdir.write_atomic(out / FOLDER / "canvas.csv", _csv(lines)), notes


def write_moodle(out: Path, lab: str, rows: list[tuple[str, dict]], table, facts, missing_as_zero) -> Path:
    """OUT/gradebook/moodle-<lab>.csv: the grading worksheet of the lab's Moodle assignment."""
    lines = [list(MOODLE_HEAD)]
    for folder, row in rows:
        report = table.get(folder, {}).get(lab)
        graded_at = ((report or {}).get("class") or {}).get("graded_at", "")
        lines.append([MOODLE_PARTICIPANT + row["site_id"], outdir.sheet_cell(row.get("name", "")),
                      cell(report, missing_as_zero, facts[lab].get("bonus")), f"{facts[lab]['points']:g}", graded_at])
    return outdir.write_atomic(out / FOLDER / f"moodle-{lab}.csv", _csv(lines))


def write_gradescope_index(out: Path, lab: str, rows: list[tuple[str, dict]], table, missing_as_zero, bonus) -> Path:
    """OUT/gradebook/gradescope-<lab>.csv: each Gradescope student's folder, SID (or e-mail),
    e-mail and name beside the score and the results.json path (relative to OUT)."""
    lines = [list(GRADESCOPE_HEAD)]
    for folder, row in rows:
        report = table.get(folder, {}).get(lab)
        path = outdir.gradescope_path(out, lab, folder)
        lines.append([outdir.sheet_cell(folder), outdir.sheet_cell(row["site_id"]),
                      outdir.sheet_cell(row.get("email", "")),
                      outdir.sheet_cell(row.get("name", "")), cell(report, missing_as_zero, bonus),
                      path.relative_to(out).as_posix() if path.is_file() else ""])
    return outdir.write_atomic(out / FOLDER / f"gradescope-{lab}.csv", _csv(lines))


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
    notes, by_site = [], {}
    for folder, row in sorted(roster.rows.items()):
        if folder in table and row.get("site_id"):
            by_site.setdefault(row.get("site"), []).append((folder, row))
    unknown = sorted(set(table) - set(roster.rows))
    if unknown:
        notes.append(f"{len(unknown)} student folder(s) have no row in {ROSTER}, so no course-site gradebook line: "
                     + ", ".join(map(shown, unknown)))
    written = []
    facts = {lab: f for lab, f in facts.items() if any(lab in labs for labs in table.values())}
    if by_site.get("canvas"):
        path, more = write_canvas(out, by_site["canvas"], table, facts, missing_as_zero)
        written.append(path)
        notes += more
    for lab in facts:
        if by_site.get("moodle"):
            written.append(write_moodle(out, lab, by_site["moodle"], table, facts, missing_as_zero))
        if by_site.get("gradescope"):
            written.append(write_gradescope_index(out, lab, by_site["gradescope"], table, missing_as_zero,
                                                  bool(facts[lab].get("bonus"))))
    if written:
        notes.append(f"course-site gradebooks: {out / FOLDER}/ ({', '.join(p.name for p in written)})")
    return notes
