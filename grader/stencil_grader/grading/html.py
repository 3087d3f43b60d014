"""The report page of one graded lab, BUILD_DIR/report.html (render_lab_html, write_lab_html),
and page(title, body), the frame of every page of the grader.

templates/lab.html holds the markup as blocks in str.format's syntax (standard library only),
filled by fill(), which escapes every value unless it is Markup.  Self-contained: inline CSS and
SVG (plot.py), no script, no network asset.  Sections and their ids: grader/README.md, section 8.
Units: GB/s (1e9 bytes), GFLOP/s (1e9 FLOP), milliseconds.
"""

from __future__ import annotations

import functools
import html
import json
import math
import re
import string
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec
from ..base.files import sha256_of, write_atomic
from . import plot, progress, score
from .report import by_tcase, next_step, without_prefix as _why

#: The kit's page templates (lab.html here; the instructor's pages are Jinja2 templates beside it).
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
#: Failed cases listed in full (the rest are counted).
MAX_FAILED_SHOWN = 50
#: Characters of program output shown.
MAX_OUTPUT_CHARS = 20000
#: Attempts listed in the progress table at most (the newest; the chart shows them all).
TABLE_ROWS = 30
_COORD = re.compile(r"\(x=-?\d+, y=-?\d+(?:, z=-?\d+)?\)")
_OK = ("pass", "ok")
_SLOW = ("slow", "not_measured", "not_run", "skipped", "warn")
#: Keys of report["performance"]["target"] the page shows by name; any other is listed as it is.
_TARGET_KEYS = ("table", "note", "floor", "target", "calibrated", "reference_ratio")


class Markup(str):
    """Markup built by this module from template blocks: fill() puts it in as it is, and text
    added to it is escaped."""

    def __add__(self, other) -> Markup:
        return Markup(str.__add__(self, other if isinstance(other, Markup) else escape(other)))

    def __html__(self) -> str:          # markup to Jinja2 too (the instructor's pages)
        return self


_NO = Markup("")


def escape(value) -> str:
    """Text of anything, escaped for HTML text and attribute values (None shows as an em dash):
    every page of the grader writes what a student controls through this."""
    return "\u2014" if value is None else html.escape(str(value), quote=True)


class _Blocks(string.Formatter):
    """templates/lab.html's blocks, filled (its header says how)."""

    def __init__(self):
        text = (TEMPLATES / "lab.html").read_text(encoding="utf-8")
        found = re.findall(r"^<!-- (\w+) -->\n(.*?)\n(?=<!-- \w+ -->\n|\Z)", text, re.S | re.M)
        self.blocks = {name: body.replace("\n", "") for name, body in found}

    def get_field(self, field_name: str, args, kwargs):
        value = kwargs
        for key in field_name.replace("]", "").split("["):
            value = value.get(key) if isinstance(value, dict) else None
        return value, field_name

    def format_field(self, value, spec: str) -> str:
        if isinstance(value, Markup):
            return value
        if spec and (value is None or isinstance(value, bool) or isinstance(value, float) and not math.isfinite(value)):
            return "\u2014"
        try:
            return escape(None if value is None else format(value, spec))
        except (TypeError, ValueError):                 # a figure that is no number
            return "\u2014"


@functools.lru_cache(maxsize=1)
def _blocks() -> _Blocks:
    return _Blocks()


def fill(block: str, **values) -> Markup:
    """Block `block` of templates/lab.html filled with values (each escaped, unless Markup).
    KeyError for a block that is not there."""
    blocks = _blocks()
    return Markup(blocks.vformat(blocks.blocks[block], (), values))


def _join(parts) -> Markup:
    return Markup("".join(parts))


@functools.lru_cache(maxsize=1)
def css() -> Markup:
    """templates/report.css: the style of every page of the grader."""
    return Markup((TEMPLATES / "report.css").read_text(encoding="utf-8"))


def page(title: str, body: str) -> str:
    """A self-contained HTML page: the title (escaped here), the style sheet, and body (markup the
    caller escaped) in <main>."""
    return fill("page", title=title, css=css(), body=Markup(body)) + "\n"


def _badge(word: str | None) -> Markup:
    word = word or "unknown"
    tone = "good" if word in _OK else "warn" if word in _SLOW else "info" if word == "info" else "bad"
    return fill("badge", tone=tone, word=word)


def _text(value) -> str:
    """A message as the page shows it: one line as text, several (a compiler's output, with its
    carets under the column they point at) as a preformatted block."""
    text = str(value or "").rstrip()
    return fill("compiler", text=text) if "\n" in text else text


# ---------------------------------------------------------------- the reference's ratio

def reference_ratio(report: dict) -> float | None:
    """The reference's ratio on the GPU of this run, from lab.json's `reference_ratio` of the
    targets table that graded it: as the report recorded it, else as the lab's lab.json holds it
    now (a report written before reports recorded it); None for the generic table, which has none."""
    target = (report.get("performance") or {}).get("target") or {}
    value = target.get("reference_ratio")
    if value is None and target.get("table") and (spec := _lab_spec(report.get("lab"))):
        value = getattr(spec.targets.get(target["table"]), "reference_ratio", None)
    return value if (value := progress.number(value)) and value > 0 else None


def _lab_spec(lab: str | None) -> labspec.LabSpec | None:
    """The lab's lab.json as the kit holds it now, or None when it cannot be read (a page never fails
    for want of a figure)."""
    try:
        return labspec.load(KIT_ROOT / "labs" / str(lab) / "lab.json")
    except Exception:
        return None


@functools.lru_cache(maxsize=1)
def _sm_clock_mhz() -> float | None:
    """The GPU's maximum SM clock (nvidia-smi), asked once per process: a class has many pages."""
    return plot.max_sm_clock_mhz()


# ---------------------------------------------------------------- sections

def _at_the_top(r: dict, message: str | None) -> str | None:
    """"... for the reason at the top of the page" when the next step (the page's first box) already
    gives message's reason, so that the page says it once; else None."""
    why = _why(message)
    return "the reason is at the top of the page" if why and why in next_step(r)[2] else None


def _summary(r: dict) -> Markup:
    gpu = (r.get("gpu") or {}).get("device") or {}
    t = (r.get("performance") or {}).get("target") or {}
    tone, headline, detail = next_step(r)
    badge = _badge(r.get("verdict"))
    # Messages the page shows elsewhere (a compiler's output under Build) are not repeated here.
    shown = str((r.get("build") or {}).get("message") or "") + detail
    messages = [m for m in (r.get("messages") or []) + (r.get("notes") or []) if _why(m) not in shown]
    return fill("summary", r=r, tone=tone, headline=headline, detail=detail,
                points=fill("no_grade" if r.get("verdict") in score.NOT_GRADED else "points", r=r, badge=badge),
                seed=fill("seed", r=r) if r.get("seed") is not None else "none drawn: no case ran",
                device=gpu.get("name") if isinstance(gpu, dict) else None,
                targets=fill("targets", t=t, note=f" ({t['note']})" if t.get("note") else "",
                             extra="".join(f"; {k}: {v}" for k, v in t.items() if k not in _TARGET_KEYS)) if t else _NO,
                messages=Markup("<ul>") + _join(fill("li", text=_text(m)) for m in messages) + Markup("</ul>")
                if messages else _NO)


def _score(r: dict) -> Markup:
    c, p = r.get("correctness") or {}, r.get("performance") or {}
    t = p.get("target") or {}

    def row(name: str, stage: dict, how: str) -> Markup:
        message = stage.get("message")
        if stage.get("verdict") in ("not_run", "not_measured"):
            how = _at_the_top(r, message) or how
        said = not message or _why(message) in how or _at_the_top(r, message)
        return fill("stage", name=name, s=stage, badge=_badge(stage.get("verdict")), how=how,
                    why=_NO if said else fill("why", text=message))

    how_c = fill("stage_cases", c=c) if c.get("total") else _why(c.get("message"))
    ratio, floor, target = p.get("ratio"), t.get("floor"), t.get("target")
    if ratio is not None and floor is not None and target is not None and target > floor:
        how_p = fill("ramp", p=p, t=t, share=score.ramp(ratio, floor, target))
    elif p.get("verdict") in ("not_run", "not_measured"):
        how_p = _why(p.get("message"))
    else:
        how_p = "points only when every case passes and the timing is plausible"
    return fill("score", rows=row("correctness", c, how_c) + row("performance", p, how_p),
                table=f", table {t.get('table')}" + (f" ({t['note']})" if t.get("note") else "") if t else "")


def _stderr(c: dict) -> Markup:
    return fill("pre", text=c["stderr_tail"]) if c.get("stderr_tail") else _NO


def _not_measured(r: dict) -> Markup:
    """The one section that stands for cases, bandwidth and roofline when none of them ran."""
    c = r.get("correctness") or {}
    message = c.get("message") or (r.get("performance") or {}).get("message")
    return fill("not_measured", stage="not measured" if r.get("verdict") in score.NOT_GRADED else "not run",
                why=_at_the_top(r, message) or _why(message) or "no case ran", stderr=_stderr(c))


def _cases(r: dict) -> Markup:
    c = r.get("correctness") or {}
    cases = c.get("cases") or []
    if not cases:
        return fill("no_cases", why=_why(c.get("message")) or "no case ran", stderr=_stderr(c))
    failed = [x for x in cases if x.get("outcome") != "pass"]

    def failure(x: dict) -> Markup:
        message = str(x.get("message") or "")
        coords = sorted(set(_COORD.findall(message)), key=message.find)[:6]
        return fill("failure", x=x, badge=_badge(x.get("outcome")), message=message,
                    coords=Markup("<br>".join(map(escape, coords)) or "&mdash;"))
    more = len(failed) - MAX_FAILED_SHOWN
    return fill("cases", passed=len(cases) - len(failed), total=len(cases),
                groups=_join(fill("group", name=k, passed=sum(x.get("outcome") == "pass" for x in v), total=len(v))
                             for k, v in by_tcase(cases).items()),
                failed=fill("failed", rows=_join(map(failure, failed[:MAX_FAILED_SHOWN])),
                            more=fill("more_failed", count=more) if more > 0 else _NO) if failed else _NO)


def _bandwidth(r: dict) -> Markup:
    p = r.get("performance") or {}
    b, t = p.get("bench") or {}, p.get("target") or {}
    if not b.get("copy_gbps"):
        return fill("not_timed", why=_why(p.get("message")))
    launchers = b.get("launchers") or []
    return fill("bandwidth", b=b, nz=b.get("nz", 1), steps=b.get("steps", 1),
                svg=Markup(plot.bandwidth_svg(float(b.get("gbps") or 0.0), float(b["copy_gbps"]), t.get("floor"),
                                              t.get("target"))),
                launchers=_join(fill("launcher", k=k) for k in launchers if len(launchers) > 1))


def _roofline(r: dict, peak_gflops: float | None) -> Markup:
    b = (r.get("performance") or {}).get("bench") or {}
    work = plot.single_launcher(spec.kind) if (spec := _lab_spec(r.get("lab"))) else None
    if not b.get("copy_gbps") or not b.get("gbps") or not b.get("output_ok", True):
        return fill("no_roofline", why="no correct timed run.")
    if work is None:
        return fill("no_roofline", why="this lab's kernels have no single FLOP count per cell (lab 7).")
    flop, nbytes = work.flop_per_cell, work.bytes_per_cell
    intensity = flop / nbytes
    points = [("your kernel", intensity, b["gbps"] * intensity, "#2b6cb0")]
    ref = reference_ratio(r)
    if ref:
        points.append((f"reference ({ref:.3f} of copy)", intensity, ref * b["copy_gbps"] * intensity, "#1f8a4c"))
    if peak_gflops is None and b.get("sm_count"):
        clock = _sm_clock_mhz()
        peak_gflops = plot.peak_fp32_gflops(int(b["sm_count"]), clock) if clock else None
    try:
        svg = Markup(plot.roofline_svg(points, float(b["copy_gbps"]), peak_gflops, str(b.get("device", "GPU"))))
    except ValueError as err:
        return fill("no_roofline", why=err)
    return fill("roofline", body=svg + fill("roofline_note", intensity=intensity, flop=flop, nbytes=nbytes)
                + (_NO if ref else fill("muted", text="No reference point: lab.json has no reference_ratio for "
                                                     "this GPU.")))


def _diagnosis(r: dict, profile: dict | None, stale: str | None) -> Markup:
    if profile is None:
        if not ((r.get("performance") or {}).get("bench") or {}).get("gbps"):
            return _NO          # nothing was timed: make profile has nothing to explain yet
        return fill("no_profile", stale=fill("muted", text=stale) if stale else _NO)
    findings = [fill("finding", f=f, badge=_badge(f.get("severity")),
                     number=str(f.get("handout", "")).split("-", 1)[0].lstrip("0"))
                for f in profile.get("findings") or []]
    kernels = [fill("profiled_kernel", label=k.get("label"), f=k.get("figures") or {})
               for k in profile.get("kernels") or []]
    return fill("diagnosis", p=profile, findings=fill("findings", items=_join(findings)) if findings
                else Markup("<p>No rule fired.</p>"), kernels=fill("profiled", rows=_join(kernels)) if kernels else _NO)


def _build(r: dict) -> Markup:
    b = r.get("build") or {}
    kernels = [fill("kernel", k=k, name=k.get("label") or k.get("short_name") or k.get("name"))
               for k in b.get("kernels") or [] if k.get("entry")]
    checks = [fill("check", c=c, badge=_badge("ok" if c.get("status") == "pass" else c.get("status")),
                   details=_join(fill("detail", text=d) for d in (c.get("details") or [])[:10]))
              for c in list(r.get("static") or []) + list(r.get("launches") or [])]
    return fill("build", b=b, badge=_badge(b.get("outcome")),
                message=fill("compiler", text=b["message"]) if b.get("outcome") not in (None, "ok") and b.get("message")
                else _NO, kernels=fill("kernels", rows=_join(kernels)) if kernels else _NO,
                checks=fill("checks", rows=_join(checks)) if checks else _NO)


def _output(r: dict) -> Markup:
    text = str(r.get("program_output") or "")
    if not text.strip():
        return _NO
    return fill("output", text=text[:MAX_OUTPUT_CHARS], cut=Markup(
        "<p>... cut here; report.json holds what the grader kept.</p>" if len(text) > MAX_OUTPUT_CHARS else ""))


def _progress(history: list[dict], r: dict) -> Markup:
    """The "progress" section: the ratio over the attempts (progress_svg, with the floor and target of
    r's table) and the newest TABLE_ROWS attempts, newest first; nothing without any attempt."""
    if len(history) < 2:
        return fill("progress_first") if history else _NO
    t = (r.get("performance") or {}).get("target") or {}
    ratios = [progress.number(e.get("ratio")) for e in history]
    models = sorted({str(e.get("gpu")) for e in history if e.get("gpu")})
    rows = []
    for i in range(len(history) - 1, max(-1, len(history) - 1 - TABLE_ROWS), -1):
        e, sha = history[i], history[i].get("source_sha256")
        most = progress.number(e.get("max_points"))
        points = f"{progress.number(e.get('points')) or 0.0:.2f}" + (f" / {most:g}" if most is not None else "") \
            if score.is_grade(e) else "no grade"
        rows.append(fill("attempt", number=i + 1, e=e, points=points, gpu=e.get("gpu") or "",
                         ratio="" if ratios[i] is None else f"{ratios[i]:.3f}",
                         changed="" if not sha else "changed" if i == 0 or sha != history[i - 1].get("source_sha256")
                         else "same file"))
    best = max((x for x in ratios if x is not None), default=None)
    more = len(history) - TABLE_ROWS
    return fill("progress", count=len(history), best="; none timed yet" if best is None else f"; best ratio {best:.3f}",
                svg=Markup(plot.progress_svg(ratios, progress.number(t.get("floor")),
                                             progress.number(t.get("target")))),
                models=fill("progress_models", models=", ".join(models)) if len(models) > 1 else _NO,
                rows=_join(rows), more=fill("progress_more", count=more) if more > 0 else _NO)


# ---------------------------------------------------------------- the page

def render_lab_html(report: dict, profile: dict | None = None, stale_note: str | None = None,
                    peak_gflops: float | None = None, history: list[dict] | None = None) -> str:
    """The whole page of one lab report (a dict of report.to_dict(); every key read with a
    default, so a report of a build failure or a class placeholder renders too).  history: the
    lab's gradings, oldest first (progress.read), for the progress section."""
    measured = (report.get("correctness") or {}).get("cases") or (report.get("performance") or {}).get("bench")
    gpu_side = _cases(report) + _bandwidth(report) + _roofline(report, peak_gflops) if measured \
        else _not_measured(report)
    return page(fill("title", r=report, points="no grade" if report.get("verdict") in score.NOT_GRADED
                     else fill("title_points", r=report)),
                fill("lab", summary=_summary(report), build=_build(report), score=_score(report),
                     gpu_side=Markup(gpu_side), diagnosis=_diagnosis(report, profile, stale_note),
                     progress=_progress(history or [], report), output=_output(report)))


def matching_profile(report: dict) -> tuple[dict | None, str | None]:
    """BUILD_DIR/profile.json when it was profiled from the source this report graded (same
    sha256), else (None, why not)."""
    if not (build_dir := report.get("build_dir")) or not (path := Path(build_dir) / "profile.json").is_file():
        return None, None
    try:
        profile = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, f"{path} could not be read"
    if profile.get("source_sha256") and profile["source_sha256"] != (sha256_of(report.get("source")) or None):
        return None, "The profile in the build directory is of another version of your file: run make profile again."
    return profile, None


def write_lab_html(report: dict, path: str | Path, profile: dict | None = None,
                   history: list[dict] | None = None) -> Path:
    """Write the page to path (atomically: a reader never sees half a page); returns path.
    history: as render_lab_html's."""
    stale = None
    if profile is None:
        profile, stale = matching_profile(report)
    return write_atomic(path, render_lab_html(report, profile, stale, history=history))
