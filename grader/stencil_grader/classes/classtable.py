"""The class table: every report in OUT with its history, the class roster, the labs' facts and the similarity
column, each read once; every class file (classfiles.py, classhtml.py) is a function of it.  A cell shows the points
of a grade, else the verdict (class.csv) or a blank (gradebooks: "missing" is 0 only with missing_as_zero, never for
a near miss nor a bonus lab)."""

from dataclasses import dataclass
from pathlib import Path

from ..grading import progress, score
from . import grades, leaderboard, outdir, similarity
from .importers.roster import Roster, RosterError
from .submissions import ROSTER

Reports = dict[str, dict[str, dict]]
#: What class.csv shows for a near miss (grades.is_near_miss) instead of "missing".
NEAR_MISS_CELL = "near miss"


@dataclass
class ClassTable:
    """reports: {student: {lab: report}} (outdir.read_reports); histories: the same keys, each lab's progress.read
    entries; facts: {lab: {"title", "points", "bonus"}}; roster (None: roster_note says why); pseudonyms,
    board_notes: leaderboard.pseudonyms of the roster; leaderboard: {(student, lab): Gradescope entries}, None when
    nobody opted in; gradescope: the (lab, student) whose Gradescope file OUT held when read; similar:
    similarity.column of the labs."""
    out: Path
    lab_order: list[str]
    reports: Reports
    histories: dict[str, dict[str, list[dict]]]
    facts: dict[str, dict]
    roster: Roster | None
    roster_note: str
    missing_as_zero: bool
    pseudonyms: dict[str, str]
    board_notes: list[str]
    leaderboard: dict | None
    gradescope: set[tuple[str, str]]
    similar: dict[str, list[dict]]

    @property
    def labs(self) -> list[str]:
        """The labs of lab_order that OUT holds a report of, in that order."""
        return [lab for lab in self.lab_order if any(lab in labs for labs in self.reports.values())]

    def bonus(self, lab: str) -> bool:
        return bool(self.facts.get(lab, {}).get("bonus"))


def class_roster(out: Path) -> tuple[Roster | None, str]:
    """CLASS/roster.csv of the class OUT belongs to (class.json names it), or (None, why not)."""
    manifest = outdir.read_json(Path(out) / outdir.MANIFEST) or {}
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


def load(out: Path, lab_order: list[str], lab_facts: dict[str, dict] | None = None, missing_as_zero: bool = False,
         roster: Roster | None = None) -> ClassTable:
    """The table of OUT; lab_facts: plan.lab_facts (the gradebooks need them); roster: the plan's (None: read here)."""
    out = Path(out)
    reports = outdir.read_reports(out, lab_order)
    roster, note = (roster, "") if roster is not None else class_roster(out)
    names, board_notes = leaderboard.pseudonyms(roster)
    entries = leaderboard.gradescope_entries(reports, names) if names else None
    before = {(lab, s) for lab in lab_order for s in reports if outdir.gradescope_path(out, lab, s).is_file()}
    histories = {s: {lab: progress.read(outdir.history_path(out, s, lab)) for lab in found}
                 for s, found in reports.items()}
    t = ClassTable(out, list(lab_order), reports, histories, lab_facts or {}, roster, note,
                   missing_as_zero, names, board_notes, entries, before, {})
    t.similar = similarity.column(out, t.labs)
    return t


def class_cell(report: dict | None) -> str:
    """A class.csv cell: the points of a grade, else the verdict (NEAR_MISS_CELL for a near miss); "" for no report."""
    if report is None:
        return ""
    if grades.is_near_miss(report):
        return NEAR_MISS_CELL
    return f"{float(report.get('points') or 0.0):.2f}" if score.is_grade(report) else str(report.get("verdict"))


def book_cell(report: dict | None, missing_as_zero: bool, bonus: bool = False) -> str:
    """A gradebook cell: the points of a grade, "0" for a missing required lab with missing_as_zero, else ""."""
    if report is not None and score.is_grade(report):
        return f"{float(report.get('points') or 0.0):.2f}"
    return "0" if (report or {}).get("verdict") == score.MISSING and missing_as_zero and not bonus \
        and not grades.is_near_miss(report) else ""


def gpu_of(data: dict) -> dict | None:
    """The GPU of a report's GPU stages: {"index", "uuid", "name", "host"} (the pool's), or None when none ran them."""
    assigned, name = (data.get("gpu") or {}).get("assigned") or {}, progress.gpu_name(data)
    if not name and not assigned:
        return None
    return {"index": assigned.get("index"), "uuid": assigned.get("uuid", ""), "name": name,
            "host": (data.get("class") or {}).get("host", "")}
