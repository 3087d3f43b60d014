"""The report page of one graded lab: BUILD_DIR/report.html, beside report.json.

    render_lab_html(report, profile=None) -> str       the page, from report.to_dict()'s dict
    write_lab_html(report, path, profile=None) -> Path  written atomically; the profile, when not
                                                        given, is BUILD_DIR/profile.json if it
                                                        belongs to the graded source
    (what the student should do next is nextstep.py's, which the terminal table uses too)

The page is self-contained: inline CSS, inline SVG (charts.py), no script, no network asset, so it
opens from a file, in a mail attachment or on a grading server alike, and reads the same without
JavaScript.  Everything that comes from the student (case messages, kernel names, compiler output,
program output, paths) is escaped with html.escape; nothing of the report is trusted as markup.

It leads with what the student must do next, then what stopped or scored the run, in the order the
stages ran.  Each section has a stable id (the tests look for them):
    summary     lab, the next step (id "next"), the points (or, for a run that is no grade, why
                not), seed and the command that replays it, the device, the targets' table
    build       the build (a failed one's compiler output as it was printed, carets in place),
                kernels (registers, shared memory, spills), static checks, launches
    score       how the points were computed: the formulas with this run's figures in them
    cases       every correctness case, failures first, with the mismatch coordinates pulled out
    bandwidth   effective bandwidth against the copy bandwidth and the floor and target
    roofline    the student's kernel and the reference on the roofline of the GPU it ran on
    diagnosis   `make profile`'s ranked findings, when one was profiled for this source, or
                the suggestion to run it, once the kernel was timed
    progress    the ratio over this lab's earlier gradings (progress.py), when a history is given
    output      what the student's code printed, when it printed anything
When the GPU stages did not run (no GPU, a failed build, a forbidden call), cases, bandwidth and
roofline are one section (id "cases") saying so once.
Units: GB/s with 1 GB = 1e9 bytes, GFLOP/s with 1 GFLOP = 1e9 FLOP, milliseconds.
"""

from __future__ import annotations

import functools
import html
import json
import math
import os
import re
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec
from ..base.files import sha256_of
from . import plot, progress, score
from .charts import bandwidth_svg, roofline_svg  # noqa: F401  (part of this module's interface)
from .nextstep import next_step, without_prefix as _why

#: Failed cases listed in full (the rest are counted).
MAX_FAILED_SHOWN = 50
#: Characters of program output shown.
MAX_OUTPUT_CHARS = 20000
_COORD = re.compile(r"\(x=-?\d+, y=-?\d+(?:, z=-?\d+)?\)")
_OK = ("pass", "ok")
_SLOW = ("slow", "not_measured", "not_run", "skipped", "warn")
#: Keys of report["performance"]["target"] the page shows by name; any other is listed as it is.
_TARGET_KEYS = ("table", "note", "floor", "target", "calibrated", "reference_ratio")

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:0 0 10px;border-bottom:1px solid #dde1e7;padding-bottom:4px}
section,header{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:16px 20px;margin:0 0 16px}
table{border-collapse:collapse;width:100%;font-size:14px}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eceff3;vertical-align:top}
th{background:#f0f2f5}code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}
pre{white-space:pre-wrap;word-break:break-word;margin:0;background:#f6f7f9;padding:6px 8px;border-radius:4px}
pre.compiler{white-space:pre;overflow-x:auto;word-break:normal}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:600;color:#fff}
.good{background:#1f8a4c}.warn{background:#b7791f}.bad{background:#c53030}.info{background:#4a5568}
.muted{color:#5f6b7a}.big{font-size:28px;font-weight:700}.grid{display:flex;flex-wrap:wrap;gap:24px}
.next{border-left:6px solid #4a5568;background:#f6f7f9;padding:10px 14px;margin:10px 0;border-radius:4px}
.next.good{border-color:#1f8a4c;background:#eef8f2}.next.warn{border-color:#b7791f;background:#fdf6ea}
.next.bad{border-color:#c53030;background:#fdf0f0}.next p{margin:4px 0 0}.next b{font-size:17px}
.coord{font-family:ui-monospace,Menlo,Consolas,monospace;color:#c53030}
ol.findings li{margin:0 0 10px}svg{max-width:100%;height:auto;background:#fff}
"""


def escape(value) -> str:
    """Text of anything, escaped for HTML text and attribute values (None shows as an em dash):
    every page of the grader writes what a student controls through this."""
    return "\u2014" if value is None else html.escape(str(value), quote=True)


_e = escape


def _num(value, spec: str = ".3f", unit: str = "") -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "\u2014"
    return f"{value:{spec}}{unit}"


def _badge(word: str | None) -> str:
    word = word or "unknown"
    cls = "good" if word in _OK else "warn" if word in _SLOW else "info" if word == "info" else "bad"
    return f'<span class="badge {cls}">{_e(word)}</span>'


def _text(value) -> str:
    """A message as the page shows it: one line as text, several (a compiler's output, with its
    carets under the column they point at) as a preformatted block."""
    text = str(value or "").rstrip()
    return f'<pre class="compiler">{_e(text)}</pre>' if "\n" in text else _e(text)


# ---------------------------------------------------------------- the reference's ratio

def reference_ratio(report: dict) -> float | None:
    """The reference's ratio on the GPU of this run, from lab.json's `reference_ratio` of the
    targets table that graded it: as the report recorded it, else as the lab's lab.json holds it
    now (a report written before reports recorded it); None for the generic table, which has none."""
    target = (report.get("performance") or {}).get("target") or {}
    value = target.get("reference_ratio")
    if value is None and target.get("table"):
        try:
            entry = labspec.load(KIT_ROOT / "labs" / str(report.get("lab")) / "lab.json").targets.get(target["table"])
            value = entry.reference_ratio if entry else None
        except (labspec.LabSpecError, OSError):
            value = None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def _kind_facts(lab: str | None) -> tuple[float | None, float | None]:
    """(useful FLOP per cell, compulsory bytes per cell) of a lab's first launcher, from its
    lab.json and grader/kinds.json; (None, None) when unknown (lab 7 counts no FLOP)."""
    try:
        spec = labspec.load(KIT_ROOT / "labs" / str(lab) / "lab.json")
        launchers = spec.kind.launchers
        if len(launchers) != 1:
            return None, None
        return launchers[0].flop_per_cell, launchers[0].bytes_per_cell
    except Exception:                # a page must never fail for want of a figure
        return None, None


@functools.lru_cache(maxsize=1)
def _sm_clock_mhz() -> float | None:
    """The GPU's maximum SM clock (nvidia-smi), asked once per process: a class has many pages."""
    return plot.max_sm_clock_mhz()


# ---------------------------------------------------------------- sections

def _summary(r: dict) -> str:
    gpu = (r.get("gpu") or {}).get("device") or {}
    device = gpu.get("name") if isinstance(gpu, dict) else None
    t = (r.get("performance") or {}).get("target") or {}
    targets = None
    if t:
        targets = f"table {_e(t.get('table'))}" + (f" ({_e(t.get('note'))})" if t.get("note") else "")
        targets += "".join(f"; {_e(k)}: {_e(v)}" for k, v in t.items() if k not in _TARGET_KEYS)
    rows = [("source", f"<code>{_e(r.get('source'))}</code> (impl {_e(r.get('impl'))})"),
            ("seed", f"{_e(r.get('seed'))}; replay: <code>{_e(r.get('replay'))}</code>"
             if r.get("seed") is not None else "none drawn: no case ran"),
            ("device", _e(device)), ("targets", targets),
            ("graded", f"{_e(r.get('generated_at'))}, grader {_e(r.get('grader_version'))}")]
    tone, headline, detail = next_step(r)
    verdict = r.get("verdict")
    if verdict in score.NOT_GRADED:
        points = f'<p><span class="big">No grade</span> &nbsp;{_badge(verdict)}</p>'
    else:
        points = (f'<p><span class="big">{_num(r.get("points"), ".2f")}</span> / {_num(r.get("max_points"), "g")} '
                  f'points &nbsp;{_badge(verdict)}</p>')
    # Messages the page shows elsewhere (a compiler's output under Build) are not repeated here.
    shown = str((r.get("build") or {}).get("message") or "") + detail
    messages = [m for m in (r.get("messages") or []) + (r.get("notes") or []) if _why(m) not in shown]
    return (f'<header id="summary"><h1>Lab {_e(r.get("lab"))}: {_e(r.get("title"))}</h1>'
            f'<div id="next" class="next {tone}"><b>{_e(headline)}</b><p>{_e(detail)}</p></div>{points}<table>'
            + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows if v is not None) + "</table>"
            + ("<ul>" + "".join(f"<li>{_text(m)}</li>" for m in messages) + "</ul>" if messages else "")
            + "</header>")


def _at_the_top(r: dict, message: str | None) -> str | None:
    """"... for the reason at the top of the page" when the next step (the page's first box) already
    gives message's reason, so that the page says it once; else None."""
    why = _why(message)
    return "the reason is at the top of the page" if why and why in next_step(r)[2] else None


def _score(r: dict) -> str:
    c, p = r.get("correctness") or {}, r.get("performance") or {}
    t = p.get("target") or {}
    lines = ["<table><tr><th>stage</th><th>verdict</th><th>points</th><th>how</th></tr>"]

    def row(name: str, stage: dict, how: str) -> str:
        if stage.get("verdict") in ("not_run", "not_measured"):
            how = _e(_at_the_top(r, stage.get("message")) or how)
        why = _e(stage.get("message"))
        said = not stage.get("message") or _e(_why(stage.get("message"))) in how or _at_the_top(r, stage.get("message"))
        note = "" if said else f"<br><span class='muted'>{why}</span>"
        return (f"<tr><td>{name}</td><td>{_badge(stage.get('verdict'))}</td><td>{_num(stage.get('points'), '.2f')} / "
                f"{_num(stage.get('max_points'), 'g')}</td><td>{how}{note}</td></tr>")

    passed, total = c.get("passed"), c.get("total")
    how_c = (f"{_num(c.get('max_points'), 'g')} x {passed} / {total} cases passed" if total
             else _e(_why(c.get("message"))))
    ratio, floor, target = p.get("ratio"), t.get("floor"), t.get("target")
    if ratio is not None and floor is not None and target is not None and target > floor:
        share = score.ramp(ratio, floor, target)
        how_p = (f"{_num(p.get('max_points'), 'g')} x clamp((ratio {ratio:.3f} - floor {floor:g}) / "
                 f"(target {target:g} - floor {floor:g}), 0, 1) = {_num(p.get('max_points'), 'g')} x {share:.3f}")
    elif p.get("verdict") in ("not_run", "not_measured"):
        how_p = _e(_why(p.get("message")))
    else:
        how_p = "points only when every case passes and the timing is plausible"
    lines += [row("correctness", c, how_c), row("performance", p, how_p), "</table>"]
    lines.append("<p class='muted'>ratio = effective bandwidth / copy bandwidth measured in the same run; effective "
                 "bandwidth = compulsory bytes (each input cell read once, each output cell written once per sweep) "
                 "/ median time. Floor and target are fractions of copy bandwidth from lab.json"
                 + (f", table {_e(t.get('table'))} ({_e(t.get('note'))})" if t else "") + ".</p>")
    return '<section id="score"><h2>How the points were computed</h2>' + "".join(lines) + "</section>"


def _measured(r: dict) -> bool:
    """Whether the GPU stages ran: some case reported, or the bench ran."""
    return bool((r.get("correctness") or {}).get("cases") or ((r.get("performance") or {}).get("bench")))


def _not_measured(r: dict) -> str:
    """The one section that stands for cases, bandwidth and roofline when none of them ran."""
    c = r.get("correctness") or {}
    message = c.get("message") or (r.get("performance") or {}).get("message")
    why = _at_the_top(r, message) or _why(message) or "no case ran"
    stage = "not measured" if r.get("verdict") in score.NOT_GRADED else "not run"
    return (f'<section id="cases"><h2>Correctness and bandwidth: {stage}</h2><p>No case ran and nothing was '
            f'timed: {_e(why)}.</p>'
            + (f"<pre>{_e(c.get('stderr_tail'))}</pre>" if c.get("stderr_tail") else "") + "</section>")


def _cases(r: dict) -> str:
    c = r.get("correctness") or {}
    cases = c.get("cases") or []
    if not cases:
        return (f'<section id="cases"><h2>Correctness cases</h2><p>{_e(_why(c.get("message")) or "no case ran")}</p>'
                + (f"<pre>{_e(c.get('stderr_tail'))}</pre>" if c.get("stderr_tail") else "") + "</section>")
    failed = [x for x in cases if x.get("outcome") != "pass"]
    groups: dict[str, list[int]] = {}
    for x in cases:
        g = groups.setdefault(str(x.get("tcase")), [0, 0])
        g[0] += x.get("outcome") == "pass"
        g[1] += 1
    out = [f'<section id="cases"><h2>Correctness cases: {len(cases) - len(failed)} of {len(cases)} passed</h2>',
           "<table><tr><th>group</th><th>passed</th></tr>"
           + "".join(f"<tr><td>{_e(k)}</td><td>{v[0]} / {v[1]}</td></tr>" for k, v in groups.items()) + "</table>"]
    if failed:
        out.append('<h3>Failed cases</h3><table id="failed-cases"><tr><th>group</th><th>case</th><th>outcome</th>'
                   "<th>mismatch at</th><th>message</th></tr>")
        for x in failed[:MAX_FAILED_SHOWN]:
            message = str(x.get("message") or "")
            coords = sorted(set(_COORD.findall(message)), key=message.find)[:6]
            out.append(f"<tr><td>{_e(x.get('tcase'))}</td><td>{_e(x.get('label'))}</td><td>{_badge(x.get('outcome'))}</td>"
                       f"<td class='coord'>{'<br>'.join(_e(co) for co in coords) or '&mdash;'}</td>"
                       f"<td><pre>{_e(message)}</pre></td></tr>")
        out.append("</table>")
        if len(failed) > MAX_FAILED_SHOWN:
            out.append(f"<p>... and {len(failed) - MAX_FAILED_SHOWN} more failed cases (report.json has them all).</p>")
    out.append("</section>")
    return "".join(out)


def _bandwidth(r: dict) -> str:
    p = r.get("performance") or {}
    b, t = p.get("bench") or {}, p.get("target") or {}
    if not b or not b.get("copy_gbps"):
        return (f'<section id="bandwidth"><h2>Bandwidth</h2><p>Not timed: {_e(_why(p.get("message")))}</p></section>')
    rows = [("effective", f"{_num(b.get('gbps'), '.1f')} GB/s"), ("copy", f"{_num(b.get('copy_gbps'), '.1f')} GB/s"),
            ("ratio", _num(b.get("ratio"), ".3f")),
            ("median time", f"{_num(b.get('ms_median'), '.3f')} ms over {_e(b.get('repetitions'))} repetitions"),
            ("grid", f"{_e(b.get('nx'))} x {_e(b.get('ny'))} x {_e(b.get('nz', 1))}, {_e(b.get('steps', 1))} sweep(s) per call")]
    for k in b.get("launchers") or []:
        if len(b.get("launchers")) > 1:
            rows.append((f"launcher {_e(k.get('name'))}", f"{_num(k.get('gbps'), '.1f')} GB/s, ratio {_num(k.get('ratio'))}"))
    return ('<section id="bandwidth"><h2>Bandwidth against the targets</h2>'
            + bandwidth_svg(float(b.get("gbps") or 0.0), float(b["copy_gbps"]), t.get("floor"), t.get("target"))
            + "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table></section>")


def _roofline(r: dict, peak_gflops: float | None) -> str:
    p = r.get("performance") or {}
    b = p.get("bench") or {}
    head = '<section id="roofline"><h2>Roofline</h2>'
    flop, nbytes = _kind_facts(r.get("lab"))
    if not b.get("copy_gbps") or not b.get("gbps") or not b.get("output_ok", True):
        return head + "<p>Not drawn: no correct timed run.</p></section>"
    if not flop or not nbytes:
        return head + "<p>Not drawn: this lab's kernels have no single FLOP count per cell (lab 7).</p></section>"
    intensity = flop / nbytes
    points = [("your kernel", intensity, b["gbps"] * intensity, "#2b6cb0")]
    ref = reference_ratio(r)
    if ref:
        points.append((f"reference ({ref:.3f} of copy)", intensity, ref * b["copy_gbps"] * intensity, "#1f8a4c"))
    if peak_gflops is None and b.get("sm_count"):
        clock = _sm_clock_mhz()
        peak_gflops = plot.peak_fp32_gflops(int(b["sm_count"]), clock) if clock else None
    try:
        svg = roofline_svg(points, float(b["copy_gbps"]), peak_gflops, str(b.get("device", "GPU")))
    except ValueError as err:
        return head + f"<p>Not drawn: {_e(err)}</p></section>"
    note = ("" if ref else "<p class='muted'>No reference point: lab.json has no reference_ratio for this GPU.</p>")
    return (head + svg + f"<p class='muted'>Intensity {intensity:.3f} FLOP per compulsory byte ({flop:g} FLOP, "
            f"{nbytes:g} bytes per cell and sweep); a point at the roof moves its compulsory bytes at copy speed.</p>"
            + note + "</section>")


def _diagnosis(r: dict, profile: dict | None, stale: str | None) -> str:
    head = '<section id="diagnosis"><h2>Diagnosis (make profile)</h2>'
    if profile is None:
        if not ((r.get("performance") or {}).get("bench") or {}).get("gbps"):
            return ""                       # nothing was timed: make profile has nothing to explain yet
        return (head + "<p>No profile for this source. Run <code>make profile</code> in the lab directory: Nsight "
                "Compute's counters, and a ranked list of what makes the kernel slow (not part of the grade).</p>"
                + (f"<p class='muted'>{_e(stale)}</p>" if stale else "") + "</section>")
    findings = profile.get("findings") or []
    out = [head, f"<p class='muted'>Profiled {_e(profile.get('recorded_at'))} on {_e(profile.get('device'))}, "
                 f"{_e(profile.get('ncu_version'))}; rules: {_e(profile.get('rules'))}.</p>"]
    if findings:
        out.append('<ol class="findings" id="findings">')
        for f in findings:
            number = str(f.get("handout", "")).split("-", 1)[0].lstrip("0")
            out.append(f"<li>{_badge(f.get('severity'))} <b>{_e(f.get('kernel'))}</b>: {_e(f.get('message'))}"
                       f"<br><span class='muted'>read: handout {_e(number)}, \u201c{_e(f.get('section'))}\u201d "
                       f"(handouts/{_e(f.get('handout'))}); threshold from {_e(f.get('source'))}</span></li>")
        out.append("</ol>")
    else:
        out.append("<p>No rule fired.</p>")
    rows = []
    for k in profile.get("kernels") or []:
        f = k.get("figures") or {}
        rows.append(f"<tr><td>{_e(k.get('label'))}</td><td>{_num(f.get('duration_ms'), '.3f')}</td>"
                    f"<td>{_num(f.get('dram_over_compulsory'), '.2f')}</td><td>{_num(f.get('dram_of_copy'), '.2f')}</td>"
                    f"<td>{_num(f.get('gld_sectors_per_request'), '.1f')} / {_num(f.get('gld_ideal_sectors'), '.0f')}</td>"
                    f"<td>{_num(f.get('shared_conflict_share'), '.0%')}</td>"
                    f"<td>{_num(f.get('achieved_occupancy'), '.0f')}% / {_num(f.get('theoretical_occupancy'), '.0f')}% "
                    f"({_e(f.get('occupancy_limiter'))})</td><td>{_num(f.get('local_bytes'), ',.0f')}</td>"
                    f"<td>{_e(f.get('top_stall'))}</td></tr>")
    if rows:
        out.append("<table><tr><th>kernel</th><th>ms</th><th>DRAM / compulsory</th><th>DRAM / copy</th>"
                   "<th>load sectors per request / ideal</th><th>bank conflicts</th><th>occupancy (limit)</th>"
                   "<th>local bytes</th><th>top stall</th></tr>" + "".join(rows) + "</table>")
    return "".join(out) + "</section>"


def _build(r: dict) -> str:
    b = r.get("build") or {}
    out = ['<section id="build"><h2>Build and static checks</h2>',
           f"<p>build {_badge(b.get('outcome'))} in {_num(b.get('seconds'), '.1f')} s</p>"]
    if b.get("outcome") not in (None, "ok") and b.get("message"):
        out.append(f'<pre class="compiler">{_e(b.get("message"))}</pre>')
    kernels = [k for k in b.get("kernels") or [] if k.get("entry")]
    if kernels:
        out.append("<table><tr><th>kernel</th><th>arch</th><th>registers</th><th>static shared memory</th>"
                   "<th>spills (stored / loaded, bytes per thread)</th></tr>")
        for k in kernels:
            out.append(f"<tr><td><code>{_e(k.get('label') or k.get('short_name') or k.get('name'))}</code></td><td>{_e(k.get('arch'))}</td>"
                       f"<td>{_e(k.get('registers'))}</td><td>{_e(k.get('smem_bytes'))} B</td>"
                       f"<td>{_e(k.get('spill_stores'))} / {_e(k.get('spill_loads'))}</td></tr>")
        out.append("</table>")
    checks = list(r.get("static") or []) + list(r.get("launches") or [])
    if checks:
        out.append("<table><tr><th>check</th><th>status</th><th>message</th></tr>")
        for c in checks:
            details = "".join(f"<br><code>{_e(d)}</code>" for d in (c.get("details") or [])[:10])
            out.append(f"<tr><td>{_e(c.get('name'))}</td><td>{_badge('ok' if c.get('status') == 'pass' else c.get('status'))}"
                       f"</td><td>{_e(c.get('message'))}{details}</td></tr>")
        out.append("</table>")
    return "".join(out) + "</section>"


def _output(r: dict) -> str:
    text = r.get("program_output") or ""
    if not str(text).strip():
        return ""
    text = str(text)
    cut = len(text) > MAX_OUTPUT_CHARS
    return ('<section id="output"><h2>What your code printed</h2>'
            f"<pre>{_e(text[:MAX_OUTPUT_CHARS])}</pre>"
            + ("<p>... cut here; report.json holds what the grader kept.</p>" if cut else "") + "</section>")


# ---------------------------------------------------------------- the page

def render_lab_html(report: dict, profile: dict | None = None, stale_note: str | None = None,
                    peak_gflops: float | None = None, history: list[dict] | None = None) -> str:
    """The whole page of one lab report (a dict of report.to_dict(); every key read with a
    default, so a report of a build failure or a class placeholder renders too).  history: the
    lab's gradings, oldest first (progress.read), for the progress section."""
    verdict = report.get("verdict")
    points = "no grade" if verdict in score.NOT_GRADED else \
        f"{_num(report.get('points'), '.2f')}/{_num(report.get('max_points'), 'g')}"
    title = f"Lab {report.get('lab')}: {verdict} {points}"
    if _measured(report):
        gpu_side = [_cases(report), _bandwidth(report), _roofline(report, peak_gflops)]
    else:
        gpu_side = [_not_measured(report)]
    body = [_summary(report), _build(report), _score(report), *gpu_side,
            _diagnosis(report, profile, stale_note), progress.section(history or [], report), _output(report)]
    return page(title, "".join(body) + "<p class='muted'>Written by the stencil lab kit's grader; report.json "
                "beside this page holds every figure.</p>")


def page(title: str, body: str, css: str = CSS) -> str:
    """A self-contained HTML page: the title (escaped here), inline CSS, and body (markup the
    caller escaped) in <main>.  Every page of the grader is made by this function."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{css}</style></head><body><main>{body}</main></body></html>\n")


def matching_profile(report: dict) -> tuple[dict | None, str | None]:
    """BUILD_DIR/profile.json when it was profiled from the source this report graded (same
    sha256), else (None, why not)."""
    build_dir = report.get("build_dir")
    if not build_dir:
        return None, None
    path = Path(build_dir) / "profile.json"
    if not path.is_file():
        return None, None
    try:
        profile = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, f"{path} could not be read"
    if profile.get("source_sha256") and profile["source_sha256"] != (sha256_of(report.get("source")) or None):
        return None, ("The profile in the build directory is of another version of your file: run make profile "
                      "again.")
    return profile, None


def write_lab_html(report: dict, path: str | Path, profile: dict | None = None,
                   history: list[dict] | None = None) -> Path:
    """Write the page to path (atomically: a reader never sees half a page); returns path.
    history: as render_lab_html's."""
    stale = None
    if profile is None:
        profile, stale = matching_profile(report)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_lab_html(report, profile, stale, history=history), encoding="utf-8")
    os.replace(tmp, path)
    return path
