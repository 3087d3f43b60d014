"""The class page of instructor mode: OUT/class.html, and a page per student and lab.

    write_class_html(out, lab_order) -> Path

reads every OUT/<student>/<lab>.json that classgrade.py wrote (report.to_dict()'s dict, or the
placeholder of a "missing" or "grader_error" lab) and writes

    OUT/class.html                 per lab: verdict counts, the distribution of points and of the
                                   bandwidth ratio, the outliers; then every student's row, each cell
                                   a link to that student's page of that lab
    OUT/<student>/<lab>.html       the lab's report page (grading/html.py), from its JSON
    OUT/<student>/index.html       the student's labs, linked

Self-contained pages (inline CSS and SVG, no script, no network); student folder names, verdicts and
every text of a report are escaped.  Outliers: a measured ratio outside Tukey's fences of its lab
(below Q1 - 1.5 IQR or above Q3 + 1.5 IQR, quartiles of the class's measured ratios, at least 4 of
them), and every grader_error, crash, timeout and forbidden verdict (a ratio above the plausible
limit never reaches the page: the grader rejects it).  Ratios: effective bandwidth / copy bandwidth.
"""

from __future__ import annotations

import html
import json
import math
import os
import statistics
from pathlib import Path
from urllib.parse import quote

from ..grading import html as lab_html

#: Points are binned in tenths of a lab's maximum.
BINS = 10
#: Verdicts that want a look from the instructor, whatever the figures say.
LOOK_AT = ("grader_error", "crash", "timeout", "forbidden")


def _e(value) -> str:
    return "\u2014" if value is None else html.escape(str(value), quote=True)


def _href(*parts: str) -> str:
    return "/".join(quote(p, safe="") for p in parts)


def load_reports(out: Path, lab_order: list[str]) -> dict[str, dict[str, dict]]:
    """{student: {lab: report}} for every OUT/<student>/<lab>.json of the labs in lab_order (a
    file that is not JSON is reported as a grader_error placeholder, never dropped)."""
    reports: dict[str, dict[str, dict]] = {}
    for folder in sorted(p for p in Path(out).iterdir() if p.is_dir() and not p.name.startswith(".")):
        for lab in lab_order:
            path = folder / f"{lab}.json"
            if not path.is_file():
                continue
            try:
                data = json.loads(path.read_text())
                if not isinstance(data, dict):
                    raise ValueError("not an object")
            except (OSError, ValueError) as err:
                data = {"lab": lab, "verdict": "grader_error", "points": 0.0, "max_points": None,
                        "messages": [f"{path.name} could not be read: {err}"]}
            reports.setdefault(folder.name, {})[lab] = data
    return reports


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(Q1, median, Q3) by statistics.quantiles' 'inclusive' method (values sorted or not)."""
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def outliers(reports: dict[str, dict[str, dict]], lab: str) -> list[tuple[str, str]]:
    """(student, why) for the lab's outliers (module docstring), sorted by student."""
    ratios = {s: r[lab]["performance"]["ratio"] for s, r in reports.items()
              if lab in r and isinstance(r[lab].get("performance"), dict)
              and isinstance(r[lab]["performance"].get("ratio"), (int, float))}
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


def _lab_section(lab: str, reports: dict[str, dict[str, dict]]) -> str:
    rows = [r[lab] for r in reports.values() if lab in r]
    verdicts: dict[str, int] = {}
    for r in rows:
        verdicts[str(r.get("verdict"))] = verdicts.get(str(r.get("verdict")), 0) + 1
    maxima = [r.get("max_points") for r in rows if isinstance(r.get("max_points"), (int, float))]
    top = max(maxima) if maxima else 100.0
    points = [float(r.get("points") or 0.0) for r in rows]
    ratios = [r["performance"]["ratio"] for r in rows if isinstance(r.get("performance"), dict)
              and isinstance(r["performance"].get("ratio"), (int, float))]
    stats = ""
    if ratios:
        stats = (f"ratio: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f} "
                 f"({len(ratios)} measured)")
    out_rows = outliers(reports, lab)
    ident = lab.replace(".", "_")
    return (f'<section id="lab-{_e(ident)}" class="lab"><h2>{_e(lab)}</h2>'
            f"<p>{len(rows)} graded; points: median {statistics.median(points) if points else 0:.1f} of {top:g}. {stats}</p>"
            '<table class="verdicts"><tr>' + "".join(f"<th>{_e(v)}</th>" for v in sorted(verdicts))
            + "</tr><tr>" + "".join(f"<td>{verdicts[v]}</td>" for v in sorted(verdicts)) + "</tr></table>"
            '<div class="grid">'
            + histogram_svg(points, 0.0, float(top), "points", f"points-{ident}")
            + (histogram_svg(ratios, 0.0, max(1.1, max(ratios)), "ratio to copy bandwidth", f"ratios-{ident}")
               if ratios else "<p>no bandwidth measured</p>")
            + "</div><h3>Outliers</h3>"
            + ("<ul>" + "".join(f'<li><a href="{_href(s, lab + ".html")}">{_e(s)}</a>: {_e(why)}</li>'
                                for s, why in out_rows) + "</ul>" if out_rows else "<p>none</p>")
            + "</section>")


def _student_table(reports: dict[str, dict[str, dict]], lab_order: list[str]) -> str:
    head = "<tr><th>student</th>" + "".join(f"<th>{_e(lab)}</th>" for lab in lab_order) + "<th>total</th></tr>"
    rows = []
    for student in sorted(reports):
        cells, total = [], 0.0
        for lab in lab_order:
            r = reports[student].get(lab)
            if r is None:
                cells.append("<td>\u2014</td>")
                continue
            total += float(r.get("points") or 0.0)
            cls = "good" if r.get("verdict") == "pass" else "warn" if r.get("verdict") in ("slow", "not_measured") else "bad"
            cells.append(f'<td><a class="{cls}-text" href="{_href(student, lab + ".html")}">'
                         f'{float(r.get("points") or 0.0):.2f}</a> <span class="muted">{_e(r.get("verdict"))}</span></td>')
        rows.append(f'<tr><td><a href="{_href(student, "index.html")}">{_e(student)}</a></td>{"".join(cells)}'
                    f"<td>{total:.2f}</td></tr>")
    return '<section id="students"><h2>Students</h2><table id="student-table">' + head + "".join(rows) + "</table></section>"


_CSS = lab_html.CSS + ".good-text{color:#1f8a4c}.warn-text{color:#b7791f}.bad-text{color:#c53030}.verdicts{width:auto}"


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>{body}</main></body></html>\n")


def _write(path: Path, text: str) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_class_html(out: Path, lab_order: list[str]) -> Path:
    """Write OUT/class.html and every student's pages (module docstring); returns class.html's path.

    lab_order: the labs, in the order of the columns (every lab of the kit, as classgrade.py
    orders them).  Reports of other labs in OUT are left out.  Raises OSError when OUT cannot be
    read or written.
    """
    out = Path(out)
    reports = load_reports(out, lab_order)
    for student, labs in reports.items():
        for lab, report in labs.items():
            lab_html.write_lab_html(report, out / student / f"{lab}.html")
        links = "".join(f'<li><a href="{_href(lab + ".html")}">{_e(lab)}</a>: {_e(labs[lab].get("verdict"))}, '
                        f'{float(labs[lab].get("points") or 0.0):.2f} points</li>' for lab in lab_order if lab in labs)
        _write(out / student / "index.html",
               _page(f"{student}: lab reports", f'<header id="summary"><h1>{_e(student)}</h1><ul>{links}</ul>'
                     f'<p><a href="../class.html">the class</a></p></header>'))
    graded = sum(len(v) for v in reports.values())
    body = (f'<header id="overview"><h1>Class report</h1><p>{len(reports)} students, {len(lab_order)} labs, '
            f"{graded} gradings. Each cell links to that student's report page of that lab.</p></header>"
            + "".join(_lab_section(lab, reports) for lab in lab_order if any(lab in r for r in reports.values()))
            + _student_table(reports, lab_order))
    return _write(out / "class.html", _page("Class report", body))
