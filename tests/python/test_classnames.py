"""Student names as course sites export them, and as a hostile student chooses them.

A class folder's names are the students' (or their course site's): spaces, quotes of both kinds,
backticks, `$(...)`, `;`, `&`, `|`, `*`, a newline, a leading `-`, `..`, one accented name in NFC
and in NFD, CJK, a 255-byte name, Moodle's and Canvas's export patterns, the folders `grade.py
import` makes (`<name> (<site id>)`), and the names of the kit's own output folders.  Each must grade exactly as the same kernel under a plain name (verdict,
points, static findings, messages), show as written in class.csv and class.html (and in
summary.txt, with control characters escaped: submissions.shown), and nothing may be created
outside --out and the temporary folders: no name runs a command (the `touch PWNED` payloads).

Fast: one class grading of the whole corpus through the fake kit (conftest.py: a make build that
takes a fraction of a second), generated names (Hypothesis) through the class files with the
grading stubbed and through the fake build itself, and two real builds of lab 1 (nvcc; no GPU
needed: the verdict is not_measured, the static findings are real).
"""

from __future__ import annotations

import csv
import html
import json
import os
import shutil
import tempfile
import unicodedata
from pathlib import Path

import pytest

from conftest import FAKE_LAB, GOOD_KERNEL, KIT_ROOT, grade_class, put
from stencil_grader.classes import outdir, plan, worker
from stencil_grader.classes.submissions import FORMULA_START, sheet_cell, shown

try:
    from hypothesis import HealthCheck, given, settings, strategies as st
except ImportError:                          # tests/install-deps.sh installs python3-hypothesis
    given = None

#: The verdict of each plain twin (the fake kit: its check finds a GPU unless NO_GPU).
VERDICTS = {"plain-compile-error": "compile_error", "plain-forbidden": "forbidden", "plain-incorrect": "incorrect",
            "plain-no-gpu": "not_measured"}
#: The kernels the corpus is graded with, and the plain name each is compared with.
KERNELS = {
    "plain-compile-error": GOOD_KERNEL + "COMPILE_ERROR\n",
    "plain-forbidden": GOOD_KERNEL + 'void f() { system("cp ref.cu ."); }\n// CALLS=system\n',
    "plain-incorrect": GOOD_KERNEL + "// WRONG\n",
    "plain-no-gpu": GOOD_KERNEL + "// NO_GPU\n",
}

#: What a name would run if it reached a shell: each creates a file named PWNED.
PAYLOADS = ["x`touch PWNED`y", "$(touch PWNED)", "a;touch PWNED", "b&touch PWNED&", "c|touch PWNED",
            "d$(touch${IFS}PWNED)", "e\ntouch PWNED\n"]

CORPUS = PAYLOADS + [
    "José García", unicodedata.normalize("NFD", "José García"),        # one name, NFC and NFD
    "o'brien", 'Ann "Nan" Lee', "it's \"both\"", "star *", "*", "[a-z]?", "tab\there", "-rf", "--out=x",
    "x..y", "a..", "back\\slash", "50% #1: a=b, c", "王小明", "محمد", "Zoë 🙂", "evil\u202eexe.cu",
    "red\x1b[31mX", "a" * 255, "é" * 127 + "a",                         # 255 bytes each
    "Full Name_123_assignsubmission_file_",                              # Moodle's export
    "Jane Doe_12345_67890_kernel.cu", "doejane_12345_67890",             # Canvas's file names, as folders
    "José García (12345)", "Ann O'Neil (u-77)",                          # grade.py import's folders
    "gradescope", "slurm", "batch", "gradebook", "students", "class.csv", "class.json", "class.html",
    "summary.txt", "gradings.csv", "index.html", "results.json", "01-fake-5pt",   # the kit's own names
    '=HYPERLINK("https:\\\\x.example?"&A1,"grade")', "+1 555", "@SUM(A1:A9)",       # spreadsheet formulas
]
#: The entries of OUT's top level, whatever the students are called.
OUT_TOP = {"class.csv", "class.html", "class.json", "gradescope", "gradings.csv", "students", "summary.txt"}


def kernel_of(name: str) -> str:
    """The plain twin of a corpus name: the corpus cycles through KERNELS."""
    return list(KERNELS)[CORPUS.index(name) % len(KERNELS)] if name in CORPUS else name


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root: (size, mtime in ns)."""
    return {str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")
            if "__pycache__" not in p.parts and ".pytest_cache" not in p.parts}


def pwned(*roots: Path) -> list[Path]:
    """Files named PWNED under the roots (what a payload would have created)."""
    found = []
    for root in roots:
        found += [p for p in Path(root).rglob("PWNED*")] if Path(root).is_dir() else []
    return found


def same_grading(got: dict, want: dict) -> None:
    """got grades as want does: verdict, points, static findings, build message, cases, messages."""
    keys = ("verdict", "points", "max_points", "static", "messages", "final")
    assert {k: got.get(k) for k in keys} == {k: want.get(k) for k in keys}
    assert (got.get("build") or {}).get("message") == (want.get("build") or {}).get("message")
    cases = lambda r: [(c["label"], c["outcome"], c["message"]) for c in (r.get("correctness") or {}).get("cases", [])]
    assert cases(got) == cases(want)


@pytest.fixture
def private_tmp(monkeypatch):
    """The temporary folder of the gradings: a folder of this test's (checked empty afterwards),
    under /tmp and open to all (0711): the sandbox user must reach its own folder inside."""
    folder = Path(tempfile.mkdtemp(prefix="stencil-names-", dir="/tmp"))
    os.chmod(folder, 0o711)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_corpus_grades_as_plain_names(fake_kit, tmp_path, private_tmp, monkeypatch):
    subs = fake_kit.root / "submissions"
    for name in CORPUS:
        put(subs, name, text=KERNELS[kernel_of(name)])
    for twin, text in KERNELS.items():
        put(subs, twin, text=text)
    out = tmp_path / "out"
    before, cwd_before, tmp_before = snapshot(fake_kit.root), sorted(os.listdir()), set(os.listdir("/tmp"))
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)
    result = grade_class(subs, out, jobs=2)

    # every name graded, as its plain twin
    assert sorted(g.student for g in result.gradings) == sorted(CORPUS + list(KERNELS))
    assert {g.student: g.verdict for g in result.gradings if g.student in KERNELS} == VERDICTS
    for name in CORPUS:
        same_grading(json.loads(outdir.report_path(out, name, FAKE_LAB).read_text()),
                     json.loads(outdir.report_path(out, kernel_of(name), FAKE_LAB).read_text()))
    # shown as written: class.csv (a formula after a "'"), class.html, summary.txt (control
    # characters escaped there)
    with open(out / "class.csv", newline="", encoding="utf-8") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert set(rows) == {sheet_cell(n) for n in CORPUS} | set(KERNELS)
    for formula in ("-rf", "--out=x", "+1 555", "@SUM(A1:A9)", '=HYPERLINK("https:\\\\x.example?"&A1,"grade")'):
        assert "'" + formula in rows and formula not in rows
    with open(out / "gradings.csv", newline="", encoding="utf-8") as f:
        assert not [r for r in csv.DictReader(f) if r["student"][:1] in FORMULA_START]
    page = (out / "class.html").read_bytes().decode()
    summary = (out / "summary.txt").read_bytes().decode()
    for name in CORPUS:
        assert rows[sheet_cell(name)] == dict(rows[kernel_of(name)], student=sheet_cell(name))
        assert html.escape(name, quote=True) in page
        assert f"  {shown(name)}/{FAKE_LAB}: " in summary
        if not any(c in name for c in "\n\t\x1b\u202e"):
            assert shown(name) == name
    assert not [line for line in summary.splitlines() if line.startswith(("touch", "line/"))]   # no forged line
    # nothing created outside --out and the temporary folders; no payload ran
    assert snapshot(fake_kit.root) == before and sorted(os.listdir()) == cwd_before
    assert list(private_tmp.iterdir()) == []
    assert pwned(fake_kit.root, tmp_path, Path.cwd(), KIT_ROOT) == []
    assert not [n for n in set(os.listdir("/tmp")) - tmp_before if "PWNED" in n]
    # OUT's layout: no name reaches a kit file
    assert {p.name for p in out.iterdir()} == OUT_TOP
    assert {p.name for p in (out / "students").iterdir()} == set(CORPUS) | set(KERNELS)
    graded = {n for n in CORPUS + list(KERNELS) if rows[sheet_cell(n)]["total"]}
    assert {p.name for p in (out / "gradescope" / FAKE_LAB).iterdir()} == graded
    assert all(outdir.gradescope_path(out, FAKE_LAB, n).is_file() for n in graded)
    assert json.loads((out / "class.json").read_text())["layout"] == outdir.LAYOUT

    # --student with a hostile name, as written: that student only
    name = PAYLOADS[0]
    again = grade_class(subs, out, student=name)
    assert [g.student for g in again.gradings] == [name]
    assert pwned(fake_kit.root, tmp_path, Path.cwd(), KIT_ROOT) == []


def test_an_earlier_layout_is_moved_into_students(fake_kit, tmp_path, monkeypatch):
    """An OUT written by the earlier layout (OUT/<student>/<lab>.json, a student named "students"
    too) keeps its reports: they move into OUT/students/.  Layout 2's Gradescope files (one per
    student, every lab in it) are kept, moved into gradescope/.earlier/, and never read again."""
    subs = fake_kit.root / "submissions"
    put(subs, "ann", text=GOOD_KERNEL)
    out = tmp_path / "out"
    for student in ("ann", "students", "zed"):
        (out / student).mkdir(parents=True)
        (out / student / f"{FAKE_LAB}.json").write_text(json.dumps(
            {"lab": FAKE_LAB, "student": student, "verdict": "slow", "points": 70.0, "max_points": 100.0}))
    (out / "class.csv").write_text("student,total\n")
    (out / "gradescope" / FAKE_LAB).mkdir(parents=True)                  # a student named as a lab
    (out / "gradescope" / FAKE_LAB / "results.json").write_text('{"score": 70}')
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)
    grade_class(subs, out)
    assert {p.name for p in out.iterdir()} == OUT_TOP
    assert (out / "gradescope" / ".earlier" / FAKE_LAB / "results.json").read_text() == '{"score": 70}'
    assert outdir.gradescope_path(out, FAKE_LAB, "ann").is_file()
    assert outdir.read_reports(out, [FAKE_LAB])["zed"][FAKE_LAB]["points"] == 70.0
    assert outdir.read_reports(out, [FAKE_LAB])["students"][FAKE_LAB]["verdict"] == "slow"


# ---------------------------------------------------------------- generated names (Hypothesis)

def _names():
    """Names a file system holds: no '/', no NUL, at most 255 bytes, not hidden (skipped by
    design, as `.git`), not an archive tool's `__` folder."""
    chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00")
    return st.text(chars, min_size=1, max_size=60).filter(
        lambda s: len(s.encode()) <= 255 and not s.startswith((".", "__")))


needs_hypothesis = pytest.mark.skipif(given is None, reason="Hypothesis is not installed (Debian: python3-hypothesis; "
                                                             "tests/install-deps.sh installs it when run as root)")


@needs_hypothesis
def test_generated_names_through_the_class_files(fake_kit, tmp_path, monkeypatch):
    """Any name, with the grading itself stubbed (the name handling is the point): the plan finds
    it, its report lands in OUT/students/<name>/, the class files show it as written."""
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)
    put(tmp_path / "once", "plain", text=KERNELS["plain-incorrect"])
    canned, _ = worker.grade(plan.Task("plain", plan.select_labs(None, fake_kit.root)[0],
                                       tmp_path / "once" / "plain" / FAKE_LAB / "kernel.cu"), tmp_path / "once", 60)
    assert canned["verdict"] == "incorrect"
    monkeypatch.setattr(worker, "grade", lambda task, *a, **k: (dict(canned, student=task.student), "log\n"))
    counter = iter(range(10**6))

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(_names())
    def check(name):
        work = tmp_path / f"w{next(counter)}"
        subs, out = work / "subs", work / "out"
        put(subs, name, text=GOOD_KERNEL)
        put(subs, "plain", text=GOOD_KERNEL)
        result = grade_class(subs, out)
        assert sorted(g.student for g in result.gradings) == sorted([name, "plain"])
        assert outdir.read_reports(out, [FAKE_LAB])[name][FAKE_LAB]["points"] == canned["points"]
        with open(out / "class.csv", newline="", encoding="utf-8") as f:
            rows = {row["student"]: row for row in csv.DictReader(f)}
        assert rows[sheet_cell(name)] == dict(rows["plain"], student=sheet_cell(name))
        assert html.escape(name, quote=True) in (out / "class.html").read_bytes().decode()
        assert f"  {shown(name)}/{FAKE_LAB}: incorrect: " in (out / "summary.txt").read_text()
        assert {p.name for p in out.iterdir()} == OUT_TOP
        assert outdir.gradescope_path(out, FAKE_LAB, name).is_file()
        shutil.rmtree(work)
    check()


@needs_hypothesis
def test_generated_names_build_as_plain_ones(fake_kit, tmp_path, private_tmp):
    """Any name through the real worker and the fake lab's make build: the same report as a
    plain name's, and no file outside the temporary folder."""
    spec = plan.select_labs(None, fake_kit.root)[0]
    subs = tmp_path / "subs"
    put(subs, "plain", text=KERNELS["plain-forbidden"])
    want, _ = worker.grade(plan.Task("plain", spec, subs / "plain" / FAKE_LAB / "kernel.cu"), subs, 60)
    assert want["verdict"] == "forbidden"
    before = snapshot(fake_kit.root)

    @settings(max_examples=8, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(_names())
    def check(name):
        put(subs, name, text=KERNELS["plain-forbidden"])
        got, _ = worker.grade(plan.Task(name, spec, subs / name / FAKE_LAB / "kernel.cu"), subs, 60)
        same_grading(got, want)
        shutil.rmtree(subs / name)
        assert list(private_tmp.iterdir()) == []
    check()
    assert snapshot(fake_kit.root) == before and pwned(tmp_path, KIT_ROOT) == []


# ---------------------------------------------------------------- real builds (nvcc, no GPU needed)

def _real_build_missing() -> str | None:
    if not (shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()):
        return "nvcc not found"
    if shutil.which("pkg-config") is None or os.system("pkg-config --exists check") != 0:
        return "the Check library is not installed"
    return None


def test_a_hostile_name_builds_lab_1_for_real(tmp_path, private_tmp):
    """lab 1's reference under a name that holds every payload, and under a plain name: the same
    verdict and static findings from the real lab.mk and nvcc; no payload ran."""
    if why := _real_build_missing():
        pytest.skip(f"needs the real lab build: {why}")
    lab = "01-naive-5pt"
    hostile = "José \"Q\" o'brien $(touch PWNED) `touch PWNED`; & | * -rf"
    subs = tmp_path / "spring class"                     # the submissions' own path has a space too
    for name in (hostile, "plain"):
        (subs / name / lab).mkdir(parents=True)
        shutil.copyfile(KIT_ROOT / "reference" / lab / "kernel.cu", subs / name / lab / "kernel.cu")
    out = tmp_path / "out dir"
    kit_before = {k for k in snapshot(KIT_ROOT) if not k.startswith(("build/", "build", ".git"))}
    result = grade_class(subs, out, labs=[lab], jobs=2)
    assert {g.student: g.verdict for g in result.gradings}.keys() == {hostile, "plain"}
    got, want = (json.loads(outdir.report_path(out, n, lab).read_text()) for n in (hostile, "plain"))
    assert got["verdict"] == want["verdict"] and got["verdict"] in ("not_measured", "pass", "slow")
    assert got["static"] and got["build"]["outcome"] == "ok"
    assert [(c["name"], c["status"]) for c in got["static"]] == [(c["name"], c["status"]) for c in want["static"]]
    assert pwned(tmp_path, KIT_ROOT) == [] and list(private_tmp.iterdir()) == []
    assert {k for k in snapshot(KIT_ROOT) if not k.startswith(("build/", "build", ".git"))} == kit_before


def test_student_by_name_in_another_unicode_form_is_pointed_at(fake_kit, tmp_path):
    subs = tmp_path / "subs"
    nfd = unicodedata.normalize("NFD", "José")
    put(subs, nfd, text=GOOD_KERNEL)
    with pytest.raises(plan.ClassError, match="is that name in another Unicode form"):
        grade_class(subs, tmp_path / "out", fake_kit, student="José")
