"""Progress over attempts: histories never rewritten, report.html's chart, class.html's moves, class-diff."""

from __future__ import annotations

import json
import multiprocessing
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import FAKE_LAB, GOOD_KERNEL, grade_class as grade, put, run_grade
from stencil_grader.base.files import write_json
from stencil_grader import cli
from stencil_grader.classes import classdiff, outdir
from stencil_grader.grading import html, progress
from test_classnames import PAYLOADS

REPORT = {"generated_at": "2026-11-25T10:00:00+00:00", "lab": "02-shared-tiling", "verdict": "slow", "points": 60.0,
          "max_points": 100, "final": True, "seed": 7, "grader_version": "1.0", "source": "/nonexistent/kernel.cu",
          "correctness": {"passed": 17, "total": 17},
          "performance": {"ratio": 0.31, "bench": {"gbps": 930.0, "copy_gbps": 3000.0},
                          "target": {"floor": 0.49, "target": 0.94}},
          "gpu": {"device": {"name": "NVIDIA H100 80GB HBM3"}}}


def attempt(**changes) -> dict:
    data = json.loads(json.dumps(REPORT))
    for key, value in changes.items():
        if key == "ratio":
            data["performance"]["ratio"] = value
        else:
            data[key] = value
    return data


def test_append_and_read(tmp_path):
    path = tmp_path / "deep" / "history.jsonl"
    first = progress.append(path, attempt())
    assert set(first) == set(progress.HISTORY_KEYS)
    assert first["ratio"] == 0.31 and first["gpu"] == "NVIDIA H100 80GB HBM3" and first["gbps"] == 930.0
    assert progress.append(path, attempt(verdict="pending")) is None
    assert progress.append(path, attempt(verdict="missing")) is None
    progress.append(path, attempt(verdict="pass", points=100.0, ratio=0.95))
    assert [e["verdict"] for e in progress.read(path)] == ["slow", "pass"]
    assert progress.read(tmp_path / "none.jsonl") == []


def test_a_history_is_only_ever_appended_to_and_a_cut_line_is_skipped(tmp_path):
    path = tmp_path / "h.jsonl"
    progress.append(path, attempt())
    with open(path, "ab") as f:
        f.write(b'{"verdict": "pass", "poi')                 # a writer killed mid-line
    before = path.read_bytes()
    progress.append(path, attempt(verdict="pass", points=100.0))
    after = path.read_bytes()
    assert after.startswith(before)                          # never rewritten
    assert [e["verdict"] for e in progress.read(path)] == ["slow", "pass"]
    assert after.count(b"\n") == 3


def _appender(path: str, worker: int) -> None:
    for i in range(25):
        progress.append(path, attempt(seed=worker * 1000 + i))


def test_gradings_at_once_never_interleave(tmp_path):
    """Six processes appending at once (a class's --jobs, Slurm tasks): every line whole."""
    path = tmp_path / "h.jsonl"
    procs = [multiprocessing.get_context("fork").Process(target=_appender, args=(str(path), w)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = path.read_bytes().splitlines()
    assert len(lines) == 150, [line for line in lines if not line.startswith(b"{")]
    assert all(json.loads(line)["verdict"] == "slow" for line in lines)
    assert sorted(json.loads(line)["seed"] for line in lines) == sorted(w * 1000 + i for w in range(6) for i in range(25))


def test_the_report_page_charts_the_attempts():
    history = [progress.entry(attempt(ratio=r, verdict=v, generated_at=f"2026-11-2{i}T10:00:00+00:00"))
               for i, (r, v) in enumerate([(None, "incorrect"), (0.31, "slow"), (0.62, "slow"), (0.95, "pass")])]
    history[2]["gpu"] = '<img src=x onerror=alert(1)>'
    page = html.render_lab_html(attempt(verdict="pass", ratio=0.95), history=history)
    assert 'id="progress"' in page and 'id="attempts"' in page
    svg = re.search(r'<svg id="progress-svg".*?</svg>', page, re.S).group(0)
    ET.fromstring(svg)
    assert svg.count("<circle") == 3 and svg.count("<path") == 1                   # the untimed attempt: a cross
    assert "floor 0.49" in svg and "target 0.94" in svg
    assert "<img" not in page and "&lt;img src=x" in page
    assert "best ratio 0.950" in page and "different models" in page
    rows = re.findall(r"<tr><td>(\d+)</td>", page.split('id="attempts"')[1])
    assert rows == ["4", "3", "2", "1"]                                              # newest first
    one = html.render_lab_html(attempt(), history=history[:1])
    assert "first attempt recorded" in one and "progress-svg" not in one
    assert 'id="progress"' not in html.render_lab_html(attempt())
    many = [progress.entry(attempt(ratio=0.01 * i)) for i in range(45)]
    page = html.render_lab_html(attempt(), history=many)
    chart = re.search(r'<svg id="progress-svg".*?</svg>', page, re.S).group(0)
    assert "15 earlier attempt(s)" in page and chart.count("<circle") == 45


def test_make_check_keeps_the_history_in_the_build_folder(fake_kit, tmp_path):
    """make check appends one line a grading to BUILD_DIR/history.jsonl; report.html charts it."""
    build = tmp_path / "build"
    folder = fake_kit.submission("me", GOOD_KERNEL + "// RATIO=0.3\n")
    for ratio in ("0.3", "0.5", "0.7"):
        (folder / "kernel.cu").write_text(GOOD_KERNEL + f"// RATIO={ratio}\n")
        done = run_grade("lab", fake_kit.lab_dir, "--impl", folder, "--build-dir", build)
        assert done.returncode in (0, 1), done.stderr
    history = progress.read(build / progress.BUILD_HISTORY)
    assert [e["ratio"] for e in history] == [0.3, 0.5, 0.7]
    assert len({e["source_sha256"] for e in history}) == 3
    page = (build / "report.html").read_text()
    assert 'id="progress-svg"' in page and "3 gradings of this lab" in page


def test_a_class_keeps_every_grading_and_shows_who_moved(fake_kit, tmp_path, capsys):
    subs, out = fake_kit.root / "submissions", tmp_path / "out"
    put(subs, "ann", FAKE_LAB, GOOD_KERNEL + "// WRONG\n")
    put(subs, "bob", FAKE_LAB, GOOD_KERNEL)
    put(subs, "cid", FAKE_LAB, GOOD_KERNEL + "// RATIO=0.5\n")
    grade(subs, out, fake_kit)
    first = tmp_path / "first"
    shutil.copytree(out, first)
    put(subs, "ann", FAKE_LAB, GOOD_KERNEL)                             # fixed
    put(subs, "bob", FAKE_LAB, GOOD_KERNEL + "// RATIO=0.45\n")         # slower
    put(subs, "cid", FAKE_LAB, GOOD_KERNEL + "// NO_GPU\n")             # measured nothing: the grade stays
    grade(subs, out, fake_kit)
    for student, verdicts in (("ann", ["incorrect", "pass"]), ("bob", ["pass", "slow"]),
                              ("cid", ["slow", "not_measured"])):
        history = progress.read(outdir.history_path(out, student, FAKE_LAB))
        assert [e["verdict"] for e in history] == verdicts, student
    assert outdir.read_json(outdir.report_path(out, "cid", FAKE_LAB))["verdict"] == "slow"
    page = (out / "class.html").read_text()
    moved = re.search(r'<section id="moved">.*?</section>', page, re.S).group(0)
    assert "improved 1, regressed 1, changed 1" in moved
    assert re.search(r'<tr class="improved"><td>ann</td>', moved) and re.search(r'<tr class="regressed"><td>bob</td>', moved)
    assert 'id="progress-svg"' in (out / "students" / "ann" / f"{FAKE_LAB}.html").read_text()

    assert cli.main(["class-diff", str(first), str(out), "--html", str(tmp_path / "diff.html")]) == 0
    said = capsys.readouterr().out
    assert "improved 1, regressed 1, changed 0, new 0, gone 0, same 1" in said      # cid's grade stayed
    assert f"  ann/{FAKE_LAB}: incorrect" in said and "-> pass 100.00" in said
    diff = (tmp_path / "diff.html").read_text()
    assert 'id="class-diff-table"' in diff and "<script" not in diff
    assert cli.main(["class-diff", str(first), str(tmp_path)]) == 2
    assert "no class grading's output folder" in capsys.readouterr().err


def test_kinds_of_change():
    graded = lambda v, p: {"verdict": v, "points": p}                     # noqa: E731
    assert classdiff.kind_of(graded("slow", 60), graded("pass", 100)) == "improved"
    assert classdiff.kind_of(graded("pass", 100), graded("incorrect", 40)) == "regressed"
    assert classdiff.kind_of(graded("not_measured", 0), graded("pass", 100)) == "changed"    # no 0 to improve on
    assert classdiff.kind_of(graded("pass", 100), graded("grader_error", 0)) == "changed"
    assert classdiff.kind_of(graded("crash", 20), graded("timeout", 20)) == "changed"
    assert classdiff.kind_of(None, graded("pass", 100)) == "new" and classdiff.kind_of(graded("pass", 1), None) == "gone"
    assert classdiff.kind_of(graded("slow", 60), graded("slow", 60.001)) == "same"


def test_hostile_names_keep_their_histories_apart(fake_kit, tmp_path):
    """Each student's history lives in their own folder: no name reaches another's."""
    subs, out = fake_kit.root / "submissions", tmp_path / "out"
    names = PAYLOADS[:4] + ["a..", "-rf", f"{FAKE_LAB}.history.jsonl", "ann"]
    for i, name in enumerate(names):
        put(subs, name, FAKE_LAB, GOOD_KERNEL + f"// RATIO=0.{i + 1}\n")
    grade(subs, out, fake_kit)
    for i, name in enumerate(names):
        history = progress.read(outdir.history_path(out, name, FAKE_LAB))
        assert [e["ratio"] for e in history] == [float(f"0.{i + 1}")], name
    assert sorted(p.name for p in (out / "students").iterdir()) == sorted(names)
    for bad in ("..", ".", "a/b", ""):
        with pytest.raises(ValueError):
            outdir.history_path(out, bad, FAKE_LAB)


def test_the_pages_render_in_headless_chromium(tmp_path):
    """report.html with its progress chart, and class.html with the leaderboard and the labs that moved."""
    from test_html import assert_not_blank, chromium, run_chromium
    from test_leaderboard import write_roster
    if chromium() is None:
        pytest.skip("chromium is not installed (tests/install-deps.sh installs Debian's chromium when run as root)")
    history = [progress.entry(attempt(ratio=r)) for r in (None, 0.2, 0.45, 0.4, 0.7, 0.93)]
    lab_page = tmp_path / "report.html"
    html.write_lab_html(attempt(verdict="pass", ratio=0.93), lab_page, history=history)
    out = tmp_path / "grades"
    shutil.copytree(Path(__file__).parent / "data" / "html" / "class", out)
    subs = tmp_path / "class"
    write_roster(subs, [{"folder": "alice", "leaderboard": "Blue Falcon"}, {"folder": "carol", "leaderboard": "cc"}])
    write_json(out / outdir.MANIFEST, {"submissions": str(subs), "layout": outdir.LAYOUT})
    for student, lab in (("bob", "01-naive-5pt"), ("erin", "02-shared-tiling")):
        report = outdir.read_json(outdir.report_path(out, student, lab))
        progress.append(outdir.history_path(out, student, lab), dict(report, verdict="incorrect", points=30.0))
        progress.append(outdir.history_path(out, student, lab), report)
    from stencil_grader.classes import classhtml, classtable
    class_page = classhtml.write_class_html(classtable.load(out, ["01-naive-5pt", "02-shared-tiling"]))
    for page, ids in ((lab_page, ("progress", "progress-svg", "attempts")),
                      (class_page, ("students", "moved", "moved-table", "leaderboard"))):
        shot = page.with_suffix(".png")
        run_chromium([f"--screenshot={shot}", "--window-size=1100,1500"], page)
        assert_not_blank(shot)
        dom = run_chromium(["--dump-dom"], page)
        assert dom.returncode == 0, dom.stderr[-2000:]
        for ident in ids:
            assert f'id="{ident}"' in dom.stdout, (page.name, ident)
