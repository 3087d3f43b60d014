"""The class leaderboard of each lab (grader/README.md, section 9, "Around the grades"), made from OUT's reports keyed
by folder: a pseudonym (CLASS/roster.csv's COLUMN) is data, escaped wherever shown; the folder is never on a board."""

from collections import Counter
from dataclasses import dataclass

from ..grading import progress, score
from .importers import roster as roster_csv

#: The roster's column that holds a student's pseudonym (empty: not on the boards).
COLUMN = "leaderboard"
#: Characters of a pseudonym kept.
PSEUDONYM_CHARS = 40

Table = dict[str, dict[str, dict]]


@dataclass
class Row:
    """One entry of a board (rank 1 = highest ratio; equal ratios share one); student: never shown."""
    rank: int
    pseudonym: str
    ratio: float
    gbps: float | None
    verdict: str
    student: str


@dataclass
class Board:
    """The board of one lab on one GPU model ("" when the reports name none)."""
    lab: str
    gpu: str
    rows: list[Row]


def clean(pseudonym: str) -> str:
    """A pseudonym as the boards show it (module docstring); "" when nothing is left."""
    return roster_csv.clean(pseudonym)[:PSEUDONYM_CHARS].strip()


def pseudonyms(roster: roster_csv.Roster | None) -> tuple[dict[str, str], list[str]]:
    """({student folder: pseudonym}, notes on a pseudonym chosen twice) from the class roster's COLUMN."""
    names = {folder: clean(row.get(COLUMN) or "") for folder, row in (roster.rows if roster else {}).items()}
    names = {folder: name for folder, name in names.items() if name}
    return names, [f"leaderboard: the pseudonym {name!r} is chosen by {n} students (all shown)"
                   for name, n in sorted(Counter(names.values()).items()) if n > 1]


def eligible(report: dict) -> bool:
    """May a report be on a board: "pass" or "slow", final, a measured ratio, no failed static or launch check."""
    if report.get("verdict") not in score.CORRECT or not report.get("final") or not score.is_grade(report):
        return False
    ratio = progress.entry(report)["ratio"]
    if ratio is None or ratio <= 0:
        return False
    checks = list(report.get("static") or []) + list(report.get("launches") or [])
    return not any(isinstance(c, dict) and c.get("status") == "fail" for c in checks)


def boards(table: Table, names: dict[str, str], lab_order: list[str] | None = None) -> dict[str, list[Board]]:
    """{lab: its boards, the GPU model with the most entries first, each ranked by ratio} of the students of
    `names` whose report is eligible; labs in lab_order (default: as found)."""
    found: dict[str, dict[str, list[tuple[float, str, dict]]]] = {}
    for student in [s for s in table if names.get(s)]:
        for lab, report in table[student].items():
            if eligible(report):
                ratio = float(report["performance"]["ratio"])
                found.setdefault(lab, {}).setdefault(progress.gpu_name(report), []).append((ratio, student, report))
    return {lab: [Board(lab, gpu, _ranked(entries, names)) for gpu, entries in
                  sorted(found[lab].items(), key=lambda kv: (-len(kv[1]), kv[0]))]
            for lab in lab_order or list(found) if lab in found}


def _ranked(entries: list[tuple[float, str, dict]], names: dict[str, str]) -> list[Row]:
    """The rows of (ratio, student, report) entries, highest ratio first (equal ratios to 0.001 share a rank)."""
    entries.sort(key=lambda e: (-e[0], names[e[1]]))
    rows: list[Row] = []
    for i, (ratio, student, report) in enumerate(entries):
        rank = i + 1 if i == 0 or round(ratio, 3) != round(entries[i - 1][0], 3) else rows[-1].rank
        rows.append(Row(rank, names[student], ratio, progress.entry(report)["gbps"], str(report["verdict"]), student))
    return rows


def gradescope_entries(table: Table, names: dict[str, str]) -> dict[tuple[str, str], list[dict]]:
    """The "leaderboard" array of results.json for each (student folder, lab) on a board: the ratio and GB/s
    (desc), the GPU model (Gradescope ranks one board across models).  The kit's pseudonym is not sent: Gradescope
    asks each student for its own.  Spec: https://gradescope-autograders.readthedocs.io/en/latest/leaderboards/"""
    entries: dict[tuple[str, str], list[dict]] = {}
    for lab, lab_boards in boards(table, names).items():
        for board in lab_boards:
            for row in board.rows:
                items = [{"name": "ratio to copy bandwidth", "value": round(row.ratio, 4), "order": "desc"}]
                if row.gbps is not None:
                    items.append({"name": "GB/s", "value": round(row.gbps, 1), "order": "desc"})
                items.append({"name": "GPU", "value": board.gpu or "unknown"})
                entries[(row.student, lab)] = items
    return entries
