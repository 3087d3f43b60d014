"""report.html (grading/html.py) and class.html (classes/classhtml.py) from recorded reports: self-contained,
escaped, every section; rendered by headless Chromium (screenshot not blank, element ids in the DOM)."""

from __future__ import annotations

import html as std_html
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import DATA, KIT_ROOT
from stencil_grader.base.files import sha256_of
from stencil_grader.classes import classhtml, classtable, grades, outdir
from stencil_grader.grading import html, plot, score
from stencil_grader.grading.report import next_step
from stencil_grader.instructor.pictures import chromium

HTML_DATA = DATA / "html"
REPORT = HTML_DATA / "report-02-shared-tiling--diag_bank_conflicts.json"
PROFILE = HTML_DATA / "profile-02-shared-tiling--diag_bank_conflicts.json"
LABS = ["01-naive-5pt", "02-shared-tiling"]
LAB_IDS = ("summary", "next", "score", "cases", "bandwidth", "roofline", "roofline-svg", "bandwidth-svg",
           "diagnosis", "findings", "build")
#: Reports of runs that measured nothing, recorded here (no GPU) by `make check` of lab 1: the starter
#: without a GPU, and a submission that does not compile (nvcc 13.0's message, carets and all).
NOT_MEASURED = HTML_DATA / "report-01-naive-5pt--no_gpu.json"
COMPILE_ERROR = HTML_DATA / "report-01-naive-5pt--compile_error.json"
CLASS_IDS = ("overview", "lab-01-naive-5pt", "lab-02-shared-tiling", "points-01-naive-5pt",
             "ratios-02-shared-tiling", "students", "student-table")
#: An H100 SXM's estimated fp32 peak (132 SMs x 128 lanes x 2 x 1980 MHz), for a drawn compute roof.
H100_PEAK_GFLOPS = 132 * 128 * 2 * 1980 / 1e3
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
#: The class pages are Jinja2's (an instructor's library: grader/requirements.txt).
needs_jinja2 = pytest.mark.skipif(importlib.util.find_spec("jinja2") is None,
                                  reason="Jinja2 is not installed (grader/requirements.txt: python3-jinja2)")


def report() -> dict:
    return json.loads(REPORT.read_text())


def profile() -> dict:
    return json.loads(PROFILE.read_text())


def test_the_lab_page_has_every_section_and_nothing_external():
    page = html.render_lab_html(report(), profile(), peak_gflops=H100_PEAK_GFLOPS)
    for ident in LAB_IDS:
        assert f'id="{ident}"' in page, ident
    assert "<script" not in page and "<link" not in page and " src=" not in page
    assert not re.search(r'(href|src)="(https?:)?//', page), "no network asset"
    assert "bank-conflict replays" in page and "How much shared memory you can use" in page
    assert "60 x clamp" not in page                       # the formula is the performance one below
    assert "40 x clamp((ratio 0.113 - floor 0.49) / (target 0.94 - floor 0.49), 0, 1)" in page
    assert f"reference ({lab_reference_ratio('02-shared-tiling', 'NVIDIA H100 80GB HBM3'):.3f} of copy)" in page
    assert page.index('id="next"') < page.index('id="build"') < page.index('id="score"') < page.index('id="cases"')


def test_escapes_everything_a_student_controls():
    r = report()
    r["program_output"] = HOSTILE
    r["correctness"]["cases"][0].update(outcome="failure", message=f"(x=3, y=4) got 1 want 2 {HOSTILE}")
    r["build"]["kernels"][0]["short_name"] = HOSTILE
    r["source"] = f"/tmp/{HOSTILE}/kernel.cu"
    p = profile()
    p["findings"][0]["kernel"] = HOSTILE
    page = html.render_lab_html(r, p)
    assert HOSTILE not in page and "<script" not in page and "<img" not in page
    assert page.count("&lt;script&gt;") >= 5
    assert '<td class="coord">(x=3, y=4)</td>' in page  # the coordinates pulled out of the message


def test_failed_cases_list_mismatch_coordinates():
    r = report()
    r["correctness"]["cases"][1].update(outcome="failure", message="nx=33 ny=9: 3 cells differ; first: "
                                        "(x=32, y=1) got NaN (never written?) want 0.5; (x=32, y=2) got 1 want 2")
    page = html.render_lab_html(r)
    assert 'id="failed-cases"' in page and "(x=32, y=1)<br>(x=32, y=2)" in page


def test_svgs_are_well_formed():
    page = html.render_lab_html(report(), profile(), peak_gflops=H100_PEAK_GFLOPS)
    for ident in ("roofline-svg", "bandwidth-svg"):
        svg = re.search(rf'<svg id="{ident}".*?</svg>', page, re.S).group(0)
        ET.fromstring(svg)
    assert "peak fp32 66.9 TFLOP/s" in page
    no_roof = plot.roofline_svg([("k", 1.125, 2000.0, "#000")], 3000.0, None)
    ET.fromstring(no_roof)
    assert "compute roof not known" in no_roof
    with pytest.raises(ValueError):
        plot.roofline_svg([("k", 1.125, -1.0, "#000")], 3000.0, None)


def lab_reference_ratio(lab: str, table: str) -> float:
    return json.loads((KIT_ROOT / "labs" / lab / "lab.json").read_text())["targets"][table]["reference_ratio"]


def test_reference_ratio_is_lab_jsons_never_the_free_text():
    """The report's reference_ratio, else lab.json's; the free-text "calibrated" note is never parsed."""
    def rep(**target):
        return {"lab": "02-shared-tiling", "performance": {"target": target}}
    assert html.reference_ratio(rep(table="NVIDIA H100 80GB HBM3", reference_ratio=0.7,
                                    calibrated="reference at 0.5 of copy")) == 0.7
    assert html.reference_ratio(rep(table="NVIDIA H100 80GB HBM3", calibrated="reference at 0.5 of copy")) \
        == lab_reference_ratio("02-shared-tiling", "NVIDIA H100 80GB HBM3")
    assert html.reference_ratio(rep(table="Some GPU", calibrated="reference at 0.696 of copy bandwidth")) is None
    assert html.reference_ratio(rep(table="generic")) is None and html.reference_ratio({}) is None


def test_a_profile_of_another_source_is_not_shown(tmp_path):
    r = report()
    source = tmp_path / "kernel.cu"
    source.write_text("// graded\n")
    r.update(source=str(source), build_dir=str(tmp_path))
    p = profile()
    p["source_sha256"] = "0" * 64
    (tmp_path / "profile.json").write_text(json.dumps(p))
    page = html.write_lab_html(r, tmp_path / "report.html").read_text()
    assert 'id="findings"' not in page and "another version of your file" in page
    p["source_sha256"] = sha256_of(source)
    (tmp_path / "profile.json").write_text(json.dumps(p))
    assert 'id="findings"' in html.write_lab_html(r, tmp_path / "report.html").read_text()


def test_placeholders_and_build_failures_render():
    for minimal in ({"lab": "02-shared-tiling", "verdict": "missing", "points": 0.0, "max_points": 100.0,
                     "messages": ["no submission"]},
                    {"lab": "01-naive-5pt", "verdict": "compile_error", "points": 0.0, "max_points": 100,
                     "build": {"outcome": "compile_error", "seconds": 1.0, "message": "error: x undeclared"},
                     "correctness": {"verdict": "not_run"}, "performance": {"verdict": "not_run"}},
                    {"lab": "01-naive-5pt", "verdict": "grader_error", "points": 0.0, "max_points": 100,
                     "messages": ["the grading process died"]}):
        page = html.render_lab_html(minimal)
        for ident in ("summary", "next", "score", "cases", "build"):
            assert f'id="{ident}"' in page


def page_text(page: str) -> str:
    """The words of a page (tags and the style sheet removed, entities decoded)."""
    return std_html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", page, flags=re.S)))


def test_a_page_of_nothing_measured_says_why_once_and_what_to_do():
    """No GPU: the reason once, "No grade" (never 0.00), no make profile; the next step first."""
    r = json.loads(NOT_MEASURED.read_text())
    assert r["verdict"] == "not_measured" and r["gpu"]["status"] == "no_gpu"
    page = html.render_lab_html(r)
    text = page_text(page)
    reason = "no NVIDIA GPU or driver found on this machine"
    assert text.count(reason) == 1, text.count(reason)
    assert "not measured: not measured" not in text.lower()
    assert '<span class="big">0.00</span>' not in page and '<span class="big">No grade</span>' in page
    assert "make profile" not in text and 'id="diagnosis"' not in page
    assert "run make check on a machine with an nvidia gpu" in text.lower()
    assert page.index('id="next"') < page.index('id="build"') < page.index('id="score"') < page.index('id="cases"')
    assert 'id="bandwidth"' not in page and 'id="roofline"' not in page     # one section says it for all three


def test_a_compile_error_keeps_its_lines_and_carets():
    r = json.loads(COMPILE_ERROR.read_text())
    message = r["build"]["message"]
    assert r["verdict"] == "compile_error" and "\n" in message and "^" in message
    page = html.render_lab_html(r)
    block = re.search(r'<pre class="compiler">(.*?)</pre>', page, re.S).group(1)
    assert std_html.unescape(block) == message              # every line, the caret under its column
    assert page.count('class="compiler"') == 1               # once, in the build section
    assert "make profile" not in page_text(page) and '<span class="big">0.00</span>' in page
    assert "fix the first error the compiler names" in page_text(page)


@pytest.mark.parametrize("verdict", ["pass", "slow", "not_measured", "constraint", "implausible", "incorrect",
                                     "crash", "timeout", "forbidden", "compile_error", "kit_error", "pending",
                                     "missing", "grader_error"])
def test_every_verdict_has_a_next_step(verdict):
    r = dict(report(), verdict=verdict)
    tone, headline, detail = next_step(r)
    assert tone in ("good", "warn", "bad") and headline.strip() and detail.strip()
    assert ".." not in detail


def test_the_targets_table_is_shown_with_any_field_the_grader_adds():
    r = report()
    r["performance"]["target"]["chosen_by"] = "the GPU's name"          # a field a later grader may add
    text = page_text(html.render_lab_html(r))
    assert "table NVIDIA H100 80GB HBM3" in text and "chosen_by: the GPU's name" in text


def make_class(tmp_path: Path) -> Path:
    out = tmp_path / "grades"
    shutil.copytree(HTML_DATA / "class", out)
    return out


@needs_jinja2
def test_class_page_counts_links_and_outliers(tmp_path):
    out = make_class(tmp_path)
    page_path = classhtml.write_class_html(classtable.load(out, LABS))
    page = page_path.read_text()
    for ident in CLASS_IDS:
        assert f'id="{ident}"' in page, ident
    for student in ("alice", "bob", "carol", "dave", "erin", "frank"):
        assert (out / "students" / student / "index.html").is_file()
    for href in re.findall(r'href="([^"]+)"', page):
        assert (out / href).is_file(), f"broken link {href}"
    assert "<th>missing</th>" in page and "<th>incorrect</th>" in page
    assert (out / "students" / "frank" / "02-shared-tiling.html").read_text().count('id="summary"') == 1
    assert "<script" not in page
    index = (out / "students" / "frank" / "index.html").read_text()
    for href in re.findall(r'href="([^"]+)"', index):
        assert (out / "students" / "frank" / href).resolve().is_file(), f"broken link {href}"


def class_with_ungraded_labs(tmp_path: Path) -> Path:
    """The recorded class, dave's lab 2 not_measured, erin's grader_error (frank's is missing already)."""
    out = make_class(tmp_path)
    for student, verdict in (("dave", "not_measured"), ("erin", "grader_error")):
        path = outdir.report_path(out, student, "02-shared-tiling")
        data = json.loads(path.read_text())
        data.update(verdict=verdict, points=0.0, final=False, messages=[f"{verdict}: why, in one line"])
        data["performance"]["ratio"] = None
        path.write_text(json.dumps(data))
    return out


@needs_jinja2
def test_class_page_leads_with_the_students_and_counts_grades_only(tmp_path):
    """Labs without a grade show their verdict and reason, count in no median or histogram, blank the total."""
    out = class_with_ungraded_labs(tmp_path)
    table = outdir.read_reports(out, LABS)
    page = classhtml.write_class_html(classtable.load(out, LABS)).read_text()
    assert page.index('id="not-measured"') < page.index('id="student-table"') < page.index('id="lab-01-naive-5pt"')
    assert "Nothing was measured for 2 of 12 lab(s)" in page
    rows = {m.group(1): m.group(0) for m in re.finditer(r'<tr><td><a href="students/(\w+)/index.html">.*?</tr>', page)}
    assert set(rows) == {"alice", "bob", "carol", "dave", "erin", "frank"}
    dave = re.findall(r'<td class="cell (\w+)" data-verdict="(\w+)"><a [^>]*>([^<]*)</a>', rows["dave"])
    assert dave[1] == ("ungraded", "not_measured", "not_measured")
    assert "not_measured: why, in one line" in rows["dave"]
    for student in ("dave", "erin"):
        assert rows[student].endswith('<td class="total"></td></tr>')
    frank = table["frank"]
    assert frank["02-shared-tiling"]["verdict"] == "missing"
    assert re.findall(r'data-verdict="missing"><a [^>]*>([^<]*)</a>', rows["frank"]) == ["missing"]
    assert f'<td class="total">{frank["01-naive-5pt"]["points"]:.2f}</td>' in rows["frank"]
    for student, row in rows.items():
        if student not in ("dave", "erin"):
            assert f'<td class="total">{grades.total(list(table[student].values())):.2f}</td>' in row
    graded = [r["02-shared-tiling"] for r in table.values() if score.is_grade(r["02-shared-tiling"])]
    assert len(graded) == 3
    lab2 = page[page.index('id="lab-02-shared-tiling"'):]
    assert "3 graded</span> (3 without a grade: grader_error, missing, not_measured)" in lab2
    median = sorted(r["points"] for r in graded)[1]
    assert f"points: median {median:.1f} of 100" in lab2
    bars = re.search(r'<svg id="points-02-shared-tiling".*?</svg>', lab2).group(0)
    assert sum(int(n) for n in re.findall(r'text-anchor="middle">(\d+)</text>', bars)) == 3


def test_outliers_by_tukeys_fences():
    reports = {f"s{i}": {"02-shared-tiling": {"verdict": "pass", "performance": {"ratio": r}}}
               for i, r in enumerate([0.9, 0.92, 0.91, 0.93, 0.1, 1.2])}
    reports["s6"] = {"02-shared-tiling": {"verdict": "crash", "performance": {"ratio": None}}}
    found = dict(classhtml.outliers(reports, "02-shared-tiling"))
    assert set(found) == {"s4", "s5", "s6"}
    assert "outside the class's fences" in found["s5"] and "crash" in found["s6"]


@needs_jinja2
def test_class_page_escapes_student_names(tmp_path):
    """Student folder names with markup, quotes, accents, spaces: shown as text, linked percent-encoded."""
    out = make_class(tmp_path)
    odd = ['<b>eve&"x', "<script>alert('x')", "Zoë O'Brien", "ann  lee (2)"]        # no "/": folder names
    for name in odd:
        shutil.copytree(out / "students" / "alice", out / "students" / name)
    page = classhtml.write_class_html(classtable.load(out, LABS)).read_text()
    assert "<script" not in page and "<b>" not in page and "&lt;b&gt;eve&amp;&quot;x" in page
    for name in odd:
        assert std_html.escape(name) in page and f"students/{quote(name, safe='')}/index.html" in page
        index = (out / "students" / name / "index.html").read_text()
        assert f"<h1>{std_html.escape(name)}</h1>" in index and "<script" not in index


def test_without_jinja2_the_class_page_says_what_to_install(tmp_path, monkeypatch):
    """Without Jinja2 the class files are written all the same; the summary names the package."""
    from stencil_grader.classes import classfiles, pages
    out = make_class(tmp_path)
    monkeypatch.setitem(sys.modules, "jinja2", None)              # import jinja2 raises ImportError
    pages.environment.cache_clear()
    try:
        result = classfiles.class_files(out, LABS)
    finally:
        pages.environment.cache_clear()
    assert (out / "class.csv").is_file() and not (out / "class.html").exists()
    assert any("python3-jinja2" in line for line in result.summary)


def test_an_unreadable_report_is_a_grader_error_not_a_gap(tmp_path):
    out = make_class(tmp_path)
    (out / "students" / "bob" / "01-naive-5pt.json").write_text("{ not json")
    reports = outdir.read_reports(out, LABS)
    assert reports["bob"]["01-naive-5pt"]["verdict"] == "grader_error"


# ---------------------------------------------------------------- headless Chromium

def run_chromium(args: list[str], page: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Chromium, headless, on a file URL, with every network name unresolvable (the page must need none)."""
    command = [chromium(), "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
               f"--user-data-dir={page.parent / '.chromium-profile'}"] + args + [page.as_uri()]
    if os.geteuid() == 0:
        command.insert(2, "--no-sandbox")       # Chromium refuses to sandbox itself as root
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def assert_not_blank(path: Path) -> None:
    """At least 8 colours, and over 2% of the pixels (every 4th row and column) unlike the top-left one."""
    from matplotlib.image import imread
    pixels = (imread(path)[::4, ::4, :3] * 255).round().astype(int)
    colours = {tuple(px) for row in pixels for px in row}
    assert len(colours) >= 8, f"{path}: only {len(colours)} colours: a blank page"
    differing = (pixels != pixels[0, 0]).any(axis=2).mean()
    assert differing > 0.02, f"{path}: {differing:.1%} of the pixels differ from the background"


@pytest.fixture(scope="module")
def need_chromium():
    if chromium() is None:
        pytest.skip("chromium is not installed (tests/install-deps.sh installs Debian's chromium when run as root)")
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib, which reads the screenshots, is not installed (grader/requirements.txt)")


@needs_jinja2
def test_pages_render_in_headless_chromium(need_chromium, tmp_path):
    """Each page renders, not blank, with its sections; class.html: the banner first, verdicts, not 0.00."""
    lab_page = tmp_path / "report.html"
    lab_page.write_text(html.render_lab_html(report(), profile(), peak_gflops=H100_PEAK_GFLOPS))
    class_page = classhtml.write_class_html(classtable.load(class_with_ungraded_labs(tmp_path), LABS))
    pages = [(lab_page, LAB_IDS), (class_page, CLASS_IDS + ("not-measured",))]
    for path in (NOT_MEASURED, COMPILE_ERROR):
        page = tmp_path / (path.stem + ".html")
        page.write_text(html.render_lab_html(json.loads(path.read_text())))
        pages.append((page, ("summary", "next", "build", "score", "cases")))
    doms = {}
    for page, ids in pages:
        shot = page.with_suffix(".png")
        run = run_chromium([f"--screenshot={shot}", "--window-size=1100,1500"], page)
        assert shot.is_file(), f"chromium wrote no screenshot of {page.name}: {run.stderr[-2000:]}"
        assert_not_blank(shot)
        dom = run_chromium(["--dump-dom"], page)
        assert dom.returncode == 0, dom.stderr[-2000:]
        for ident in ids:
            assert f'id="{ident}"' in dom.stdout, f"{page.name}: no element {ident} in the DOM"
        doms[page] = dom.stdout
    text = doms[class_page]
    assert text.index('id="not-measured"') < text.index('id="student-table"') < text.index('id="lab-01-naive-5pt"')
    dave = re.search(r'<tr><td><a href="students/dave/index.html">.*?</tr>', text, re.S).group(0)
    assert ">not_measured</a>" in dave and ">0.00</a>" not in dave.split("01-naive-5pt.html")[-1]


def test_committed_example_screenshots_are_pngs():
    for name in ("report-page.png", "class-page.png"):
        path = KIT_ROOT / "handouts" / "img" / name
        assert path.is_file(), f"{path} (the example screenshots handouts/README.md shows)"
        head = path.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path} is not a PNG"
        width, height = struct.unpack(">II", head[16:24])
        assert width >= 800 and height >= 600


def test_the_index_screenshot_shows_todays_targets_and_the_recorded_points():
    """report-page.png shows the recorded grading with lab.json's targets of today, never points it did not get."""
    from stencil_grader.instructor import pictures
    entry = json.loads((KIT_ROOT / "labs" / "02-shared-tiling" / "lab.json").read_text())["targets"][
        "NVIDIA H100 80GB HBM3"]
    shown = pictures.retarget(report())
    t = shown["performance"]["target"]
    assert (t["floor"], t["target"], t["reference_ratio"]) == (entry["floor"], entry["target"], entry["reference_ratio"])
    assert f"(floor {entry['floor']:g}, target {entry['target']:g}, " in shown["performance"]["message"]
    assert shown["points"] == report()["points"] and report()["performance"]["target"]["floor"] == 0.49
    r = report()
    r["performance"]["ratio"] = entry["target"]           # would now earn full performance points
    with pytest.raises(pictures.PictureError, match="would earn 40.00 performance points"):
        pictures.retarget(r)


def test_the_index_screenshot_takes_its_peak_from_the_recordings(tmp_path):
    """The roofline's peak: the SM count the grading recorded, the clock of a recorded tour of its GPU; the page says so."""
    from stencil_grader.instructor import pictures
    sm_count, clock, note = pictures.recorded_peak(report())
    device = json.loads((KIT_ROOT / "handouts" / "data" / "h100" / "tour.json").read_text())["device"]
    assert (sm_count, clock) == (report()["performance"]["bench"]["sm_count"], device["sm_clock_max_mhz"])
    assert "h100/tour.json" in note and f"{sm_count} SMs (recorded by the grading)" in note
    with pytest.raises(pictures.PictureError, match="no recorded tour of 'NVIDIA H100 80GB HBM3'"):
        pictures.recorded_peak(report(), data_dir=tmp_path)
