"""The class pages (grader/README.md, section 9, "The class files"): OUT/class.html and each student's pages
(report.student_view, with its history), through the Jinja2 templates (pages.py), all from the class table.  Only
grades count in the statistics (score.is_grade)."""

import math
import statistics
from collections import Counter
from pathlib import Path

from ..grading import html as lab_html, score
from ..grading.report import student_view
from . import classdiff, leaderboard, outdir, pages
from .classtable import ClassTable
from .submissions import ROSTER

#: Points are binned in tenths of a lab's maximum.
BINS = 10
#: Verdicts that want a look from the instructor, whatever the figures say.
LOOK_AT = ("grader_error", "crash", "timeout", "forbidden")
#: Flagged pairs listed in a student's similarity cell (similarity/<lab>/pairs.txt has them all).
SIMILAR_SHOWN = 5
#: Characters of a reason shown in a cell (the whole one is its tooltip and on the lab's page).
CELL_REASON = 120

Table = dict[str, dict[str, dict]]


def _ratio(report: dict) -> float | None:
    perf = report.get("performance")
    ratio = perf.get("ratio") if isinstance(perf, dict) else None
    return ratio if isinstance(ratio, (int, float)) and score.is_grade(report) else None


def outliers(reports: Table, lab: str) -> list[tuple[str, str]]:
    """(student, why), sorted: a ratio outside Tukey's fences (Q1 - 1.5 IQR, Q3 + 1.5 IQR; 4 ratios up), LOOK_AT."""
    ratios = {s: _ratio(r[lab]) for s, r in reports.items() if lab in r and _ratio(r[lab]) is not None}
    found: dict[str, list[str]] = {}
    if len(ratios) >= 4:
        q1, _, q3 = statistics.quantiles(ratios.values(), n=4, method="inclusive")
        lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
        for s, x in ratios.items():
            if x < lo or x > hi:
                found.setdefault(s, []).append(f"ratio {x:.3f} outside the class's fences [{lo:.3f}, {hi:.3f}]")
    for s, r in reports.items():
        if lab in r and r[lab].get("verdict") in LOOK_AT:
            found.setdefault(s, []).append(f"verdict {r[lab]['verdict']}")
    return [(s, "; ".join(w)) for s, w in sorted(found.items())]


def histogram(values: list[float], lo: float, hi: float) -> dict:
    """class.html's histogram macro's bars: values in BINS equal bins of [lo, hi] (the last closed), each bar's x
    and height in the 320 x 150 chart, with the values' median, min and max."""
    counts = [0] * BINS
    for v in values:
        if math.isfinite(v):
            i = int((min(max(v, lo), hi) - lo) / (hi - lo) * BINS) if hi > lo else 0
            counts[min(i, BINS - 1)] += 1
    width, peak = 280 / BINS, max(counts) or 1
    return {"lo": lo, "hi": hi, "width": width, "n": len(values), "median": statistics.median(values),
            "lo_value": min(values), "hi_value": max(values),
            "bars": [{"x": 30 + i * width, "height": 106 * n / peak, "count": n} for i, n in enumerate(counts)]}


def _lab_section(lab: str, reports: Table) -> dict:
    rows = [r[lab] for r in reports.values() if lab in r]
    graded = [r for r in rows if score.is_grade(r)]
    top = max((r["max_points"] for r in rows if isinstance(r.get("max_points"), (int, float))), default=100.0)
    points = [float(r.get("points") or 0.0) for r in graded]
    ratios = [x for x in map(_ratio, graded) if x is not None]
    return {"lab": lab, "ident": lab.replace(".", "_"), "rows": len(rows), "graded": len(graded), "top": top,
            "without": sorted({str(r.get("verdict")) for r in rows if not score.is_grade(r)}),
            "verdicts": sorted(Counter(str(r.get("verdict")) for r in rows).items()),
            "outliers": outliers(reports, lab),
            "points": histogram(points, 0.0, float(top)) if points else None,
            "ratios": histogram(ratios, 0.0, max(1.1, max(ratios))) if ratios else None}


def write_class_html(t: ClassTable) -> Path:
    """Write OUT/class.html and every student's pages of the class table (its labs that OUT holds a report of); returns
    class.html's path.  OSError, or ClassError without Jinja2."""
    out, reports, lab_order = t.out, t.reports, t.labs
    pages.environment()                   # without Jinja2, no page at all
    for student, labs in reports.items():
        folder = outdir.student_dir(out, student)
        for lab, report in labs.items():
            # the page a student may be handed: no path of the instructor's (report.student_view)
            lab_html.write_lab_html(student_view(report), folder / f"{lab}.html", history=t.histories[student][lab])
        pages.write(folder / "index.html", "student.html", title=f"{student}: lab reports", student=student,
                    labs=[(lab, labs[lab]) for lab in lab_order if lab in labs])
    every = [r for labs in reports.values() for r in labs.values()]
    return pages.write(
        out / "class.html", "class.html", title="Class report", labs=lab_order, reports=reports, count=len(every),
        graded=sum(map(score.is_grade, every)), ungraded=[r for r in every if r.get("verdict") in score.NOT_GRADED],
        similar=t.similar, SIMILAR_SHOWN=SIMILAR_SHOWN, CELL_REASON=CELL_REASON,
        classdiff=lab_html.Markup(classdiff.class_section(t.histories, lab_order)),
        boards=leaderboard.boards(reports, t.pseudonyms, lab_order), board_notes=t.board_notes,
        opted_in=len([s for s in t.pseudonyms if s in reports]), board_column=leaderboard.COLUMN, roster=ROSTER,
        lab_sections=[_lab_section(lab, reports) for lab in lab_order])
