"""A student's progress over their attempts at one lab: the history of every grading (JSON Lines:
entry, append, read) and its section on the report page (section, chart_svg).

Histories: BUILD_DIR/history.jsonl (a student's make check) and
OUT/students/<student>/<lab>.history.jsonl (a class grading).  Only ever appended to: one write()
of a whole line, O_APPEND, under a POSIX lock (fcntl.lockf, which NFS passes between nodes); a line
cut short by a killed writer is skipped when read.  Units: ratio = effective / copy bandwidth.
"""

from __future__ import annotations

import datetime
import fcntl
import html
import json
import math
import os
from pathlib import Path

from ..base.files import sha256_of
from . import score

#: The history of a build directory (a student's own make check).
BUILD_HISTORY = "history.jsonl"
#: What one line of a history holds (entry()).
HISTORY_KEYS = ("graded_at", "verdict", "points", "max_points", "ratio", "gbps", "copy_gbps", "gpu", "passed",
                "total", "source_sha256", "seed", "grader_version", "final")
#: Reports that are no grading of their own: nothing is appended for them.
NOT_AN_ATTEMPT = ("pending", "missing")
#: Verdicts whose points mean nothing (score.NOT_GRADED, and a class's "missing").
#: Attempts listed in the table at most (the newest; the chart shows them all).
TABLE_ROWS = 30
#: The longest line read back (a history line is about 400 bytes).
MAX_LINE = 1 << 16


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def gpu_name(report: dict) -> str:
    """The model of the GPU a report's GPU stages ran on ("" when none ran): the name the pool
    handed out, else the one the check or bench program found."""
    section = report.get("gpu") or {}
    assigned = section.get("assigned") or {}
    device = section.get("device") or {}
    return str(assigned.get("name") or device.get("name") or device.get("device") or "")


def _source_digest(report: dict) -> str:
    mark = (report.get("class") or {}).get("source_sha256")
    if mark:
        return str(mark)
    return sha256_of(report.get("source")) if report.get("source") else ""


def entry(report: dict) -> dict:
    """One line of a history, from a report (report.to_dict()'s dict, or a class placeholder):
    when it was graded, its verdict and points, the ratio and bandwidths (None when not timed),
    the GPU model, the cases passed, the sha256 of the graded kernel.cu, the seed, the grader's
    version, and whether the report is final."""
    perf = report.get("performance") or {}
    bench = perf.get("bench") or {}
    corr = report.get("correctness") or {}
    when = report.get("generated_at") or (report.get("class") or {}).get("graded_at") \
        or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {"graded_at": str(when), "verdict": str(report.get("verdict")),
            "points": _number(report.get("points")) or 0.0, "max_points": _number(report.get("max_points")),
            "ratio": _number(perf.get("ratio")), "gbps": _number(bench.get("gbps")),
            "copy_gbps": _number(bench.get("copy_gbps")), "gpu": gpu_name(report),
            "passed": corr.get("passed"), "total": corr.get("total"), "source_sha256": _source_digest(report),
            "seed": report.get("seed"), "grader_version": report.get("grader_version"),
            "final": bool(report.get("final", False))}


def append(path: str | Path, report: dict) -> dict | None:
    """Append the report's entry() to the history at path (created with its folder when missing),
    as the module docstring says; returns the entry, or None for a report that is no attempt
    (NOT_AN_ATTEMPT).  Raises OSError when the file cannot be written."""
    if report.get("verdict") in NOT_AN_ATTEMPT:
        return None
    line = entry(report)
    data = (json.dumps(line, sort_keys=True) + "\n").encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One descriptor for everything: closing any other descriptor of the file would release this
    # process's POSIX lock on it (fcntl(2), "Advisory record locking").
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data               # a line cut short by a killed writer stays a line of its own
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)                          # closing releases the lock
    return line


def read(path: str | Path) -> list[dict]:
    """The entries of the history at path, oldest first ([] when there is none); a line that is
    no JSON object (cut short by a killed writer) is skipped."""
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for raw in lines:
        if len(raw) > MAX_LINE:
            continue
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and "verdict" in data:
            found.append(data)
    return found


# ---------------------------------------------------------------- the report page's section

def _e(value) -> str:
    return "\u2014" if value is None else html.escape(str(value), quote=True)


def chart_svg(history: list[dict], floor: float | None = None, target: float | None = None) -> str:
    """The ratio of each attempt (x: attempt 1..n, y: ratio to copy bandwidth) as an inline SVG
    element: a line through the timed attempts, a cross on the axis for an attempt without a
    ratio, and the floor and target (fractions of copy bandwidth) dashed when given."""
    w, h, left, right, top, bottom = 680, 240, 56, 20, 16, 40
    n = len(history)
    ratios = [_number(e.get("ratio")) for e in history]
    hi = max([1.0] + [r * 1.1 for r in ratios if r is not None] + [x for x in (floor, target) if x is not None])
    sx = (lambda i: left + (w - left - right) / 2) if n == 1 else \
        (lambda i: left + i * (w - left - right) / (n - 1))
    sy = lambda v: h - bottom - v / hi * (h - top - bottom)          # noqa: E731
    out = [f'<svg id="progress-svg" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" '
           f'height="{h}" role="img" aria-label="ratio to copy bandwidth over {n} attempts">',
           f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" fill="#fbfcfd" '
           'stroke="#c8ced6"/>']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        if tick <= hi:
            out.append(f'<line x1="{left}" y1="{sy(tick):.1f}" x2="{w - right}" y2="{sy(tick):.1f}" stroke="#e3e7ec"/>'
                       f'<text x="{left - 6}" y="{sy(tick) + 4:.1f}" font-size="11" text-anchor="end">{tick:g}</text>')
    for name, frac, colour in (("floor", floor, "#b7791f"), ("target", target, "#1f8a4c")):
        if frac is not None:
            out.append(f'<line x1="{left}" y1="{sy(frac):.1f}" x2="{w - right}" y2="{sy(frac):.1f}" stroke="{colour}" '
                       f'stroke-dasharray="5,3"/><text x="{w - right - 4}" y="{sy(frac) - 4:.1f}" font-size="11" '
                       f'text-anchor="end" fill="{colour}">{name} {frac:g}</text>')
    timed = [(sx(i), sy(r)) for i, r in enumerate(ratios) if r is not None]
    if len(timed) > 1:
        out.append('<polyline points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in timed)
                   + '" fill="none" stroke="#2b6cb0" stroke-width="2"/>')
    for i, r in enumerate(ratios):
        x = sx(i)
        if r is None:
            y = h - bottom
            out.append(f'<path d="M{x - 4:.1f},{y - 4:.1f}L{x + 4:.1f},{y + 4:.1f}M{x - 4:.1f},{y + 4:.1f}'
                       f'L{x + 4:.1f},{y - 4:.1f}" stroke="#c53030" stroke-width="2"/>')
        else:
            out.append(f'<circle cx="{x:.1f}" cy="{sy(r):.1f}" r="4" fill="#2b6cb0"/>')
    step = max(1, math.ceil(n / 12))
    for i in range(0, n, step):
        out.append(f'<text x="{sx(i):.1f}" y="{h - bottom + 16}" font-size="11" text-anchor="middle">{i + 1}</text>')
    out.append(f'<text x="{(left + w - right) / 2:.0f}" y="{h - 6}" font-size="12" text-anchor="middle">attempt '
               '(a cross: no ratio measured)</text>'
               f'<text x="14" y="{(top + h - bottom) / 2:.0f}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 14 {(top + h - bottom) / 2:.0f})">ratio to copy</text></svg>')
    return "".join(out)


def _points(e: dict) -> str:
    if not score.is_grade(e):
        return "no grade"
    most = _number(e.get("max_points"))
    return f"{_number(e.get('points')) or 0.0:.2f}" + (f" / {most:g}" if most is not None else "")


def section(history: list[dict], report: dict | None = None) -> str:
    """report.html's "progress" section (id "progress"), or "" without any attempt: the chart
    (chart_svg, with the floor and target of `report`'s targets table) and the newest TABLE_ROWS
    attempts, newest first, each with its verdict, points, ratio, GPU and whether its kernel.cu
    changed since the attempt before."""
    if not history:
        return ""
    head = '<section id="progress"><h2>Your attempts</h2>'
    if len(history) == 1:
        return head + ("<p>This is the first attempt recorded here; each later grading adds a point to a chart "
                       "of the ratio over your attempts.</p></section>")
    target = ((report or {}).get("performance") or {}).get("target") or {}
    floor, goal = _number(target.get("floor")), _number(target.get("target"))
    models = sorted({str(e.get("gpu")) for e in history if e.get("gpu")})
    rows = []
    for i in range(len(history) - 1, max(-1, len(history) - 1 - TABLE_ROWS), -1):
        e = history[i]
        sha = e.get("source_sha256")
        changed = "" if not sha else "changed" if i == 0 or sha != history[i - 1].get("source_sha256") \
            else "same file"
        ratio = _number(e.get("ratio"))
        rows.append(f"<tr><td>{i + 1}</td><td>{_e(e.get('graded_at'))}</td><td>{_e(e.get('verdict'))}</td>"
                    f"<td>{_e(_points(e))}</td><td>{'' if ratio is None else f'{ratio:.3f}'}</td>"
                    f"<td>{_e(e.get('gpu') or '')}</td><td>{changed}</td></tr>")
    more = len(history) - TABLE_ROWS
    best = max((r for r in (_number(e.get("ratio")) for e in history) if r is not None), default=None)
    return (head + f"<p>{len(history)} gradings of this lab"
            + (f"; best ratio {best:.3f}" if best is not None else "; none timed yet") + ".</p>"
            + chart_svg(history, floor, goal)
            + ("<p class='muted'>These attempts ran on GPUs of different models (" + _e(", ".join(models))
               + "): ratios compare within one model.</p>" if len(models) > 1 else "")
            + "<table id=\"attempts\"><tr><th>#</th><th>graded</th><th>verdict</th><th>points</th><th>ratio</th>"
              "<th>GPU</th><th>kernel.cu</th></tr>" + "".join(rows) + "</table>"
            + (f"<p class='muted'>... and {more} earlier attempt(s) in the history file.</p>" if more > 0 else "")
            + "</section>")
