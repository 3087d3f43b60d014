"""The class page of instructor mode: OUT/class.html, and a page per student and lab.

    write_class_html(out, lab_order, table=None) -> Path

from every OUT/students/<student>/<lab>.json (outdir.read_reports; merge.py passes the table it
read: report.to_dict()'s dict, or the placeholder of a "missing" or "grader_error" lab) writes

    OUT/class.html                       a banner when some lab was not measured; every student's
                                         row, each cell the lab's verdict and why, and its points
                                         when it is a grade, linked to that student's page of that
                                         lab; then per lab: verdict counts, the distribution of the
                                         graded labs' points and of the bandwidth ratio, the outliers
    OUT/students/<student>/<lab>.html    the lab's report page (grading/html.py), from its JSON as
                                         the student may see it (report.student_view: no path of
                                         the instructor's), with the lab's history
                                         (<lab>.history.jsonl)
    OUT/students/<student>/index.html    the student's labs, linked

Around the grades, each from a module of its own, none of which changes a grade: the students
table's similarity column (similarity.py, when `grade.py similarity` wrote OUT/similarity/), the
labs that moved since their previous grading (classdiff.py), the leaderboard of the students who
opted in (leaderboard.py).

Only grades count in the statistics (outdir.is_grade): a "missing" or "not_measured" lab is no
0 in a median or a histogram, and its cell shows its verdict, never points; a student's total
is blank when one of their labs is no grade, as in class.csv (outdir.total).

Self-contained pages (inline CSS and SVG, no script, no network); student folder names, verdicts and
every text of a report are escaped.  Outliers: a measured ratio outside Tukey's fences of its lab
(below Q1 - 1.5 IQR or above Q3 + 1.5 IQR, quartiles of the class's measured ratios, at least 4 of
them), and every grader_error, crash, timeout and forbidden verdict (a ratio above the plausible
limit never reaches the page: the grader rejects it).  Ratios: effective bandwidth / copy bandwidth.
"""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path
from urllib.parse import quote

from ..grading import html as lab_html, progress, score
from ..grading.html import escape as _e
from ..grading.report import student_view
from . import classdiff, leaderboard, outdir, similarity

#: Points are binned in tenths of a lab's maximum.
BINS = 10
#: Verdicts that want a look from the instructor, whatever the figures say.
LOOK_AT = ("grader_error", "crash", "timeout", "forbidden")
#: Flagged pairs listed in a student's similarity cell (similarity/<lab>/pairs.txt has them all).
SIMILAR_SHOWN = 5
#: Characters of a reason shown in a cell (the whole one is its tooltip and on the lab's page).
CELL_REASON = 120

Table = dict[str, dict[str, dict]]


def _href(*parts: str) -> str:
    return "/".join(quote(p.encode("utf-8", "surrogateescape"), safe="") for p in parts)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(Q1, median, Q3) by statistics.quantiles' 'inclusive' method (values sorted or not)."""
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def _ratio(report: dict) -> float | None:
    perf = report.get("performance")
    ratio = perf.get("ratio") if isinstance(perf, dict) else None
    return ratio if isinstance(ratio, (int, float)) and outdir.is_grade(report) else None


def outliers(reports: Table, lab: str) -> list[tuple[str, str]]:
    """(student, why) for the lab's outliers (module docstring), sorted by student."""
    ratios = {s: _ratio(r[lab]) for s, r in reports.items() if lab in r and _ratio(r[lab]) is not None}
    found: dict[str, list[str]] = {}
    if len(ratios) >= 4:
        q1, _, q3 = quartiles(list(ratios.values()))
        lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
        for s, x in ratios.items():
            if x < lo or x > hi:
                found.setdefault(s, []).append(f"ratio {x:.3f} outside the class's fences [{lo:.3f}, {hi:.3f}]")
    for s, r in reports.items():
        if lab in r and r[lab].get("verdict") in LOOK_AT:
            found.setdefault(s, []).append(f"verdict {r[lab]['verdict']}")
    return [(s, "; ".join(w)) for s, w in sorted(found.items())]


def histogram_svg(values: list[float], lo: float, hi: float, label: str, ident: str, bins: int = BINS) -> str:
    """Bars counting values in `bins` equal bins of [lo, hi] (the last bin closed) as inline SVG."""
    counts = [0] * bins
    for v in values:
        if not math.isfinite(v):
            continue
        i = int((min(max(v, lo), hi) - lo) / (hi - lo) * bins) if hi > lo else 0
        counts[min(i, bins - 1)] += 1
    w, h, left, bottom, top = 320, 150, 30, 34, 10
    bw = (w - left - 10) / bins
    peak = max(counts) or 1
    out = [f'<svg id="{_e(ident)}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
           f'role="img" aria-label="{_e(label)}">']
    for i, n in enumerate(counts):
        bh = (h - top - bottom) * n / peak
        x = left + i * bw
        out.append(f'<rect x="{x + 1:.1f}" y="{h - bottom - bh:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" fill="#2b6cb0"/>')
        if n:
            out.append(f'<text x="{x + bw / 2:.1f}" y="{h - bottom - bh - 2:.1f}" font-size="10" text-anchor="middle">{n}</text>')
    out.append(f'<line x1="{left}" y1="{h - bottom}" x2="{w - 10}" y2="{h - bottom}" stroke="#1d2330"/>'
               f'<text x="{left}" y="{h - bottom + 14}" font-size="10">{lo:g}</text>'
               f'<text x="{w - 10}" y="{h - bottom + 14}" font-size="10" text-anchor="end">{hi:g}</text>'
               f'<text x="{(left + w - 10) / 2:.0f}" y="{h - 4}" font-size="11" text-anchor="middle">{_e(label)}</text></svg>')
    return "".join(out)


def _lab_section(lab: str, reports: Table) -> str:
    rows = [r[lab] for r in reports.values() if lab in r]
    graded = [r for r in rows if outdir.is_grade(r)]
    verdicts: dict[str, int] = {}
    for r in rows:
        verdicts[str(r.get("verdict"))] = verdicts.get(str(r.get("verdict")), 0) + 1
    maxima = [r.get("max_points") for r in rows if isinstance(r.get("max_points"), (int, float))]
    top = max(maxima) if maxima else 100.0
    points = [float(r.get("points") or 0.0) for r in graded]
    ratios = [x for x in (_ratio(r) for r in graded) if x is not None]
    stats = ""
    if ratios:
        stats = (f"ratio: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f} "
                 f"({len(ratios)} measured)")
    median = f"points: median {statistics.median(points):.1f} of {top:g}." if points else "no points to show."
    without = sorted({str(r.get("verdict")) for r in rows if not outdir.is_grade(r)})
    out_rows = outliers(reports, lab)
    ident = lab.replace(".", "_")
    return (f'<section id="lab-{_e(ident)}" class="lab"><h2>{_e(lab)}</h2>'
            f'<p><span class="graded-count">{len(graded)} graded</span>'
            + (f" ({len(rows) - len(graded)} without a grade: {_e(', '.join(without))})" if without else "")
            + f"; {median} {stats}</p>"
            '<table class="verdicts"><tr>' + "".join(f"<th>{_e(v)}</th>" for v in sorted(verdicts))
            + "</tr><tr>" + "".join(f"<td>{verdicts[v]}</td>" for v in sorted(verdicts)) + "</tr></table>"
            '<div class="grid">'
            + (histogram_svg(points, 0.0, float(top), "points of the graded labs", f"points-{ident}") if points
               else "<p>no graded lab</p>")
            + (histogram_svg(ratios, 0.0, max(1.1, max(ratios)), "ratio to copy bandwidth", f"ratios-{ident}")
               if ratios else "<p>no bandwidth measured</p>")
            + "</div><h3>Outliers</h3>"
            + ("<ul>" + "".join(f'<li><a href="{_href(outdir.STUDENTS, s, lab + ".html")}">{_e(s)}</a>: {_e(why)}</li>'
                                for s, why in out_rows) + "</ul>" if out_rows else "<p>none</p>")
            + "</section>")


def _cell(student: str, lab: str, r: dict | None) -> str:
    if r is None:
        return "<td>\u2014</td>"
    verdict = str(r.get("verdict"))
    grade = outdir.is_grade(r)
    cls = "good" if verdict == "pass" else "warn" if verdict == "slow" or not grade else "bad"
    shown = f"{float(r.get('points') or 0.0):.2f}" if grade else verdict
    why = outdir.reason(r) if verdict != "pass" else ""
    cut = why if len(why) <= CELL_REASON else why[:CELL_REASON - 3] + "..."
    return (f'<td class="cell {"graded" if grade else "ungraded"}" data-verdict="{_e(verdict)}">'
            f'<a class="{cls}-text" href="{_href(outdir.STUDENTS, student, lab + ".html")}">{_e(shown)}</a>'
            + (f' <span class="muted">{_e(verdict)}</span>' if grade else "")
            + (f'<div class="reason" title="{_e(why)}">{_e(cut)}</div>' if cut else "") + "</td>")


def _similar_cell(pairs: list[dict]) -> str:
    """The similarity column's cell: the flagged pairs (lab, score, the other file; the first
    SIMILAR_SHOWN, then how many more), each linked to its side-by-side page; else the student's
    highest score, muted."""
    flagged = [p for p in pairs if p.get("flagged")]
    if not flagged:
        top = max((float(p["score"]) for p in pairs), default=None)
        return '<td class="similar">' + ("" if top is None else f'<span class="muted">at most {top:.2f}</span>') \
            + "</td>"
    return '<td class="similar flagged">' + "<br>".join(
        f'<a class="bad-text" href="{_href(similarity.FOLDER, p["lab"], str(p.get("page") or "pairs.txt"))}">{_e(p["lab"])} '
        f'{float(p["score"]):.2f}</a> with {_e(p.get("other"))}' + (f" ({_e(p.get('other_kind'))})"
                                                                   if p.get("other_kind") != "student" else "")
        for p in flagged[:SIMILAR_SHOWN]) \
        + (f"<br>... and {len(flagged) - SIMILAR_SHOWN} more (pairs.txt)" if len(flagged) > SIMILAR_SHOWN else "") \
        + "</td>"


def _student_table(reports: Table, lab_order: list[str], similar: dict[str, list[dict]] | None = None) -> str:
    head = "<tr><th>student</th>" + "".join(f"<th>{_e(lab)}</th>" for lab in lab_order) + "<th>total</th>" \
        + ("<th>similarity</th>" if similar else "") + "</tr>"
    rows = []
    for student in sorted(reports):
        total = outdir.total(list(reports[student].values()))
        rows.append(f'<tr><td><a href="{_href(outdir.STUDENTS, student, "index.html")}">{_e(student)}</a></td>'
                    + "".join(_cell(student, lab, reports[student].get(lab)) for lab in lab_order)
                    + f'<td class="total">{"" if total is None else f"{total:.2f}"}</td>'
                    + (_similar_cell(similar.get(student, [])) if similar else "") + "</tr>")
    return ('<section id="students"><h2>Students</h2><p class="muted">Each cell: the points of a graded lab '
            "and its verdict, or the verdict of a lab without a grade, with why; it links to that student's "
            'page of that lab. A total is blank when a lab of that student is no grade.'
            + (" Similarity (grade.py similarity; never a grade): each pair flagged, linked to its side-by-side "
               "page, else the student's highest score." if similar else "") + '</p>'
            '<table id="student-table">' + head + "".join(rows) + "</table></section>")


def _banner(reports: Table) -> str:
    rows = [r for found in reports.values() for r in found.values()]
    ungraded = [r for r in rows if r.get("verdict") in score.NOT_GRADED]
    if not ungraded:
        return ""
    verdicts = ", ".join(sorted({str(r.get("verdict")) for r in ungraded}))
    return (f'<section id="not-measured" class="banner"><h2>Nothing was measured for {len(ungraded)} of '
            f"{len(rows)} lab(s)</h2><p>{_e(verdicts)}: no GPU, a broken machine, or a grading that did not "
            "finish. These cells show the verdict, not points; those students' totals are blank and no "
            "Gradescope file was written for them. Grade again on a machine with a GPU.</p></section>")


_CSS = (lab_html.CSS + ".good-text{color:#1f8a4c}.warn-text{color:#b7791f}.bad-text{color:#c53030}.verdicts{width:auto}"
        ".reason{font-size:12px;color:#5f6b7a;max-width:22em}.banner{border-color:#c53030;background:#fff5f5}")


def _page(title: str, body: str) -> str:
    return lab_html.page(title, body, _CSS)


def _write(path: Path, text: str) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", errors="surrogateescape")
    os.replace(tmp, path)
    return path


def write_class_html(out: Path, lab_order: list[str], table: Table | None = None) -> Path:
    """Write OUT/class.html and every student's pages (module docstring); returns class.html's path.

    lab_order: the labs, in the order of the columns.  table: {student: {lab: report}} as
    outdir.read_reports gives it (None: read it here).  Reports of other labs are left out.
    Raises OSError when OUT cannot be read or written.
    """
    out = Path(out)
    reports = outdir.read_reports(out, lab_order) if table is None else table
    for student, labs in reports.items():
        folder = outdir.student_dir(out, student)
        for lab, report in labs.items():
            # the page a student may be handed: no path of the instructor's (report.student_view)
            lab_html.write_lab_html(student_view(report), folder / f"{lab}.html",
                                    history=progress.read(outdir.history_path(out, student, lab)))
        links = "".join(f'<li><a href="{_href(lab + ".html")}">{_e(lab)}</a>: {_e(r.get("verdict"))}'
                        + (f', {float(r.get("points") or 0.0):.2f} points' if outdir.is_grade(r) else "") + "</li>"
                        for lab in lab_order if (r := labs.get(lab)) is not None)
        _write(folder / "index.html",
               _page(f"{student}: lab reports", f'<header id="summary"><h1>{_e(student)}</h1><ul>{links}</ul>'
                     f'<p><a href="../../class.html">the class</a></p></header>'))
    count = sum(len(v) for v in reports.values())
    graded = sum(outdir.is_grade(r) for v in reports.values() for r in v.values())
    body = (f'<header id="overview"><h1>Class report</h1><p>{len(reports)} students, {len(lab_order)} labs, '
            f"{count} lab reports, {graded} of them graded.</p></header>"
            + _banner(reports) + _student_table(reports, lab_order, similarity.column(out, lab_order))
            + classdiff.class_section(out, lab_order) + leaderboard.class_section(out, reports, lab_order)
            + "".join(_lab_section(lab, reports) for lab in lab_order if any(lab in r for r in reports.values())))
    return _write(out / "class.html", _page("Class report", body))
