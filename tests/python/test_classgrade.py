"""Instructor mode on one host: class folders, one process per (student, lab), grades kept, refusals."""

import csv
import graphlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import (FAKE_BENCH, FAKE_CHECK, FAKE_LAB, GOOD_KERNEL, KIT_ROOT as KIT, grade_class as grade, put,
                      run_grade, write_script)
from stencil_grader.base.files import write_json
from stencil_grader import cli
from stencil_grader.base import locks
from stencil_grader.base.files import sha256_of
from stencil_grader.classes import backend, batch, gpupool, outdir, plan, resume, submissions, worker
from stencil_grader.classes.submissions import ClassError
from test_checkrun import alive
from test_dist import grader_imports, grader_modules


def read_csv(path):
    with open(path, newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def report(out, student, lab=FAKE_LAB):
    return json.loads(outdir.report_path(out, student, lab).read_text())


def add_lab(fake_kit, name, number):
    """A second fake lab, a copy of the first under another name."""
    target = fake_kit.root / "labs" / name
    shutil.copytree(fake_kit.lab_dir, target)
    data = json.loads((target / "lab.json").read_text())
    data.update(lab=name, number=number, title=f"Fake lab {number}")
    (target / "lab.json").write_text(json.dumps(data, indent=2))
    return target


def no_gpu_cli(monkeypatch, fake_kit):
    """cli.main on the fake kit, on a host whose GPU list is empty."""
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)
    monkeypatch.setattr(gpupool, "choose", lambda spec: ([], "nvidia-smi not found (test)"))
    return cli.main


def gpu_gone(fake_kit):
    """From now on the fake check and bench find no GPU, whatever the kernel.cu."""
    write_script(fake_kit.fake / "check", FAKE_CHECK.replace('if "NO_GPU" in src:', "if True:"))
    write_script(fake_kit.fake / "bench", FAKE_BENCH.replace('if "NO_GPU" in src:', "if True:"))


@pytest.fixture
def klass(fake_kit):
    """Five students: a good one, a compile error, a hang, a missing lab, a cheat."""
    subs = fake_kit.root / "submissions"
    fake_kit.submission("alice", GOOD_KERNEL, nested=True)
    fake_kit.submission("bob", GOOD_KERNEL + "COMPILE_ERROR\n", nested=True)
    fake_kit.submission("carol", GOOD_KERNEL + "// HANG\n", nested=True)
    (subs / "dave").mkdir()
    fake_kit.submission("erin", GOOD_KERNEL + "void f() { system(\"cp ref.cu .\"); }\n// CALLS=system\n",
                        nested=True)
    (subs / ".hidden").mkdir()
    return subs


def test_whole_class(fake_kit, klass, tmp_path):
    out = tmp_path / "out"
    lines = []
    result = grade(klass, out, fake_kit, jobs=3, progress=lines.append)
    verdicts = {g.student: g.verdict for g in result.gradings}
    assert verdicts == {"alice": "pass", "bob": "compile_error", "carol": "timeout", "dave": "missing",
                        "erin": "forbidden"}
    assert result.exit_status == 0                    # every submitted lab got a grade
    rows = read_csv(out / "class.csv")
    assert list(rows) == ["alice", "bob", "carol", "dave", "erin"]
    assert rows["alice"][FAKE_LAB] == "100.00" and rows["alice"]["total"] == "100.00"
    assert rows["carol"][FAKE_LAB] == "20.00" and rows["bob"]["total"] == "0.00"
    assert rows["dave"][FAKE_LAB] == "missing" and rows["dave"]["total"] == "0.00"
    alice = report(out, "alice")
    assert alice["verdict"] == "pass" and alice["student"] == "alice" and alice["seed"] == 777 and alice["final"]
    assert alice["class"]["source_sha256"] == sha256_of(klass / "alice" / FAKE_LAB / "kernel.cu")
    assert (out / "students" / "alice" / f"{FAKE_LAB}.log").is_file()
    dave = report(out, "dave")
    assert "not found" in dave["messages"][0] and dave["final"] is False
    for student in ("alice", "bob", "carol", "erin"):
        results = json.loads(outdir.gradescope_path(out, FAKE_LAB, student).read_text())
        assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(100)
        assert results["score"] == pytest.approx(float(rows[student]["total"]))
    assert not outdir.gradescope_path(out, FAKE_LAB, "dave").exists()    # missing: left out (no --missing-as-zero)
    assert any("alice" in line and "pass" in line for line in lines)
    assert any("skipped .hidden: hidden" in line for line in result.summary)
    gradings_csv = {(r["student"], r["lab"]): r for r in csv.DictReader(open(out / "gradings.csv"))}
    assert gradings_csv[("alice", FAKE_LAB)]["verdict"] == "pass"
    assert float(gradings_csv[("alice", FAKE_LAB)]["total_s"]) > 0
    assert "grading(s)" in (out / "summary.txt").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["class.csv", "class.html", "class.json", "gradescope",
                                                     "gradings.csv", "students", "summary.txt"]
    # the temporary build dirs are gone; nothing was written into the submissions
    assert sorted(p.name for p in (klass / "alice" / FAKE_LAB).iterdir()) == ["kernel.cu"]


def test_a_second_run_grades_only_what_is_not_final_and_one_student_alone(fake_kit, klass, tmp_path, monkeypatch):
    out = tmp_path / "out"
    grade(klass, out, fake_kit, jobs=2)
    mtimes = {s: outdir.report_path(out, s, FAKE_LAB).stat().st_mtime_ns for s in ("alice", "bob", "erin")}
    asked, real = [], resume.is_final
    monkeypatch.setattr(resume, "is_final", lambda r, s, spec: asked.append(r.get("student")) or real(r, s, spec))
    result = grade(klass, out, fake_kit)
    # carol timed out (a grade, final): nothing left to grade; dave's missing lab is recorded again
    assert [(g.student, g.verdict) for g in result.gradings] == [("dave", "missing")]
    assert sorted(asked) == ["alice", "bob", "carol", "erin"]
    assert {s: outdir.report_path(out, s, FAKE_LAB).stat().st_mtime_ns for s in mtimes} == mtimes
    zoe = dict(report(out, "alice"), student="zoe", points=55.0, verdict="slow")   # an earlier class member
    write_json(outdir.report_path(out, "zoe", FAKE_LAB), zoe)
    (out / "students" / "zoe" / "notes.txt").write_text("keep me")
    grade(klass, out, fake_kit)                                  # nothing to grade: the files rebuilt
    bob_json = outdir.report_path(out, "bob", FAKE_LAB)
    before = (bob_json.stat().st_mtime_ns, read_csv(out / "class.csv"))
    assert before[1]["zoe"][FAKE_LAB] == "55.00"

    fake_kit.submission("alice", GOOD_KERNEL + "// WRONG\n", nested=True)
    result = grade(klass, out, fake_kit, student="alice")
    assert [(g.student, g.verdict) for g in result.gradings] == [("alice", "incorrect")]
    rows = read_csv(out / "class.csv")
    assert rows["alice"][FAKE_LAB] == "40.00"
    for student in ("bob", "carol", "dave", "erin", "zoe"):
        assert rows[student] == before[1][student]
    assert bob_json.stat().st_mtime_ns == before[0]
    assert (out / "students" / "zoe" / "notes.txt").read_text() == "keep me"
    summary = (out / "summary.txt").read_text()                 # still the whole class, not alice alone
    assert "the class in" in summary and "5 student(s)" not in summary and "6 student(s)" in summary
    assert f"bob/{FAKE_LAB}: compile_error: " in summary and f"carol/{FAKE_LAB}: timeout: " in summary


def test_a_grading_process_past_its_limit_is_no_grade(fake_kit, tmp_path, monkeypatch):
    """A grading killed at its limit is grader_error: no points, no Gradescope file, exit 1, no process left."""
    # a lab name of its own: only this grading's processes carry it (their temporary folder)
    lab = f"09-k{secrets.token_hex(4)}"
    add_lab(fake_kit, lab, 9)
    subs = tmp_path / "subs"
    put(subs, "carol", lab, GOOD_KERNEL + "// HANG\n")           # carol's check hangs for 3 s
    monkeypatch.setattr(worker, "time_limit_s", lambda *a, **k: 1.0)
    out = tmp_path / "out"
    result = grade(subs, out, fake_kit, labs=[lab])
    (g,) = result.gradings
    assert g.verdict == "grader_error" and g.points == 0 and not g.graded
    assert result.exit_status == 1
    data = report(out, "carol", lab)
    assert "timed out" in data["messages"][0] and data["final"] is False
    assert read_csv(out / "class.csv")["carol"][lab] == "grader_error"
    assert read_csv(out / "class.csv")["carol"]["total"] == ""
    assert not (out / "gradescope" / FAKE_LAB / "carol").exists()
    assert any("failed to produce a report" in line for line in result.summary)
    # carol's hung check ran in a session of its own, under the killed grading process: gone too
    time.sleep(0.2)
    marker = f"grade-{lab}-".encode()
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and alive(int(p))
                 and any(marker in _proc(p, what) for what in ("cmdline", "environ"))]
    assert leftovers == []


def _proc(pid: str, what: str) -> bytes:
    try:
        return open(f"/proc/{pid}/{what}", "rb").read()
    except OSError:
        return b""


def test_usage_errors(fake_kit, klass, tmp_path):
    (tmp_path / "empty" / "__MACOSX").mkdir(parents=True)
    for subs, kw, match in ((klass, {"student": "nobody"}, "no submissions for student 'nobody'"),
                            (klass, {"labs": ["99-none"]}, "unknown lab"),
                            (klass, {"student": "../klass"}, "no submissions for student '../klass'"),
                            (klass, {"student": ".."}, "no submissions for student '..'"),
                            (tmp_path / "nothing", {}, "no such directory"),
                            (klass, {"student": "dave"}, "nothing to grade: no kernel.cu"),
                            (tmp_path / "empty", {}, "holds no student folder.*skipped __MACOSX")):
        with pytest.raises(ClassError, match=match):
            grade(subs, tmp_path / "o", fake_kit, **kw)
    assert not (tmp_path / "o").exists()                        # nothing written on a usage error


def test_an_output_folder_of_another_class_is_refused_and_kept(fake_kit, klass, tmp_path):
    out = tmp_path / "out"
    grade(klass, out, fake_kit, student="alice")
    other = tmp_path / "other"
    put(other, "yann", FAKE_LAB)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ClassError, match="holds the results of another class"):
        grade(other, out, fake_kit)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "thesis.tex").write_text("mine")
    with pytest.raises(ClassError, match="holds other files and no class grading"):
        grade(other, stranger, fake_kit)


def test_clean_environment_and_limits(monkeypatch, fake_kit):
    monkeypatch.setenv("CK_FORK", "no")
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-DCHEAT")
    env = worker.clean_env()
    assert "CK_FORK" not in env and "NVCC_APPEND_FLAGS" not in env
    assert env["NO_COLOR"] == "1" and "PATH" in env
    spec = plan.select_labs(None, fake_kit.root)[0]
    assert worker.time_limit_s(spec, 1) < worker.time_limit_s(spec, 4)
    # four gradings at once on four GPUs wait for nobody's GPU stages
    assert worker.time_limit_s(spec, 4, gpus=4) == worker.time_limit_s(spec, 1)
    assert worker.time_limit_s(spec, 1, stage="gpu") < worker.time_limit_s(spec, 1)


def test_builds_run_ahead_of_a_slow_gpu_stage(fake_kit, tmp_path, monkeypatch):
    """One build at a time (--jobs 1) and GPU stages that take a while: the next grading's build runs while a GPU
    stage is still under way, instead of waiting for it; each grading's GPU stage comes after its own build."""
    subs = tmp_path / "subs"
    for name in ("ann", "bob", "cy"):
        put(subs, name, FAKE_LAB, GOOD_KERNEL)
    real, calls = worker.grade, []

    def timed(task, *a, **k):
        start = time.monotonic()
        if k.get("stage") == "gpu":
            time.sleep(1.0)
        done = real(task, *a, **k)
        calls.append((task.student, k.get("stage"), start, time.monotonic()))
        return done
    monkeypatch.setattr(worker, "grade", timed)
    result = grade(subs, tmp_path / "out", fake_kit, jobs=1)
    assert [g.verdict for g in result.gradings] == ["pass"] * 3
    builds = sorted(c for c in calls if c[1] == "build")
    gpu = {c[0]: c for c in calls if c[1] == "gpu"}
    assert len(builds) == 3 and len(gpu) == 3
    assert all(gpu[b[0]][2] >= b[3] for b in builds)                             # its own build first
    assert any(b[2] < g[3] and g[2] < b[3] for b in builds for g in gpu.values() if g[0] != b[0])   # side by side
    assert not any(a[2] < b[3] and b[2] < a[3] for a in builds for b in builds if a is not b)        # one at a time


def test_a_build_takes_only_the_cpu_that_gpu_stages_leave(fake_kit, tmp_path):
    """The build stage of a grading runs at the lowest CPU priority (nice 19), whatever runs beside it, so that the
    GPU stages of other gradings (their host side holds their GPU) get the CPUs first; a grading's other stages
    run at the grader's own priority."""
    spec = plan.select_labs(None, fake_kit.root)[0]
    put(tmp_path / "subs", "ann", FAKE_LAB, GOOD_KERNEL)
    task = plan.Task("ann", spec, tmp_path / "subs" / "ann" / FAKE_LAB / "kernel.cu")
    ours = os.nice(0)
    report, _ = worker.grade(task, tmp_path / "subs", 60, stage="build", build_dir=tmp_path / "built")
    assert report["verdict"] == "pending"
    assert int((tmp_path / "built" / "niceness").read_text()) == max(ours, worker.BUILD_NICENESS)
    report, _ = worker.grade(task, tmp_path / "subs", 60, build_dir=tmp_path / "whole")
    assert report["verdict"] == "pass" and int((tmp_path / "whole" / "niceness").read_text()) == ours


def test_gpu_lock_excludes_other_processes(tmp_path):
    lock = tmp_path / "gpu-any.lock"                              # the pool's lock without a GPU list
    probe = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n    sys.exit(3)\n")
    slot = locks.GpuPool(tmp_path, []).reserve()
    assert slot.held and slot.gpu is None
    assert subprocess.run([sys.executable, "-c", probe, str(lock)], timeout=30).returncode == 3
    slot.release()
    assert subprocess.run([sys.executable, "-c", probe, str(lock)], timeout=30).returncode == 0
    assert os.path.exists(lock)


@pytest.mark.parametrize("shared_memory", [False, True], ids=["plain", "failed_constraint"])
def test_no_gpu_is_no_grade_and_says_so(fake_kit, tmp_path, shared_memory):
    """Without a GPU (a failed static constraint too): not_measured, no 0.00, earlier Gradescope file kept, exit 1."""
    fake_kit.set_lab_json(constraints__shared_memory=shared_memory)       # plain PTX: no shared memory
    subs = tmp_path / "subs"
    put(subs, "ann", FAKE_LAB, GOOD_KERNEL + "// NO_GPU\n")
    out = tmp_path / "out"
    earlier = outdir.gradescope_path(out, FAKE_LAB, "ann")
    earlier.parent.mkdir(parents=True)
    earlier.write_text('{"score": 40}')
    result = grade(subs, out, fake_kit)
    assert [(g.verdict, g.graded) for g in result.gradings] == [("not_measured", False)]
    assert result.exit_status == 1 and "NOTHING WAS MEASURED for 1 of 1" in result.alarm[0]
    row = read_csv(out / "class.csv")["ann"]
    assert row[FAKE_LAB] == "not_measured" and row["total"] == ""
    assert earlier.read_text() == '{"score": 40}'
    data = report(out, "ann")
    assert data["verdict"] == "not_measured" and data["final"] is False
    assert any(c["status"] == "fail" for c in data["static"]) is shared_memory   # the constraint still reported


def test_missing_lab_is_missing_and_counts_as_zero_only_when_asked(fake_kit, tmp_path):
    """A lab never submitted is 'missing' in class.csv; only --missing-as-zero writes it as a Gradescope 0."""
    add_lab(fake_kit, "02-fake-two", 2)
    subs = tmp_path / "subs"
    put(subs, "ann", FAKE_LAB)                        # ann: lab 1 only
    (subs / "ben").mkdir(parents=True)                # ben: nothing at all
    out = tmp_path / "out"
    result = grade(subs, out, fake_kit)
    rows = read_csv(out / "class.csv")
    assert rows["ann"]["02-fake-two"] == "missing" and rows["ann"]["total"] == "100.00"
    assert rows["ben"][FAKE_LAB] == "missing" and rows["ben"]["02-fake-two"] == "missing"
    # one Gradescope assignment per lab: a file per (lab, student) with a grade, none for "missing"
    assert json.loads(outdir.gradescope_path(out, FAKE_LAB, "ann").read_text())["score"] == 100
    assert not outdir.gradescope_path(out, "02-fake-two", "ann").exists()
    assert not (out / "gradescope" / FAKE_LAB / "ben").exists()
    assert result.exit_status == 0
    assert any("never submitted" in line for line in result.summary)

    grade(subs, out, fake_kit, missing_as_zero=True)
    for student, lab in (("ann", "02-fake-two"), ("ben", FAKE_LAB), ("ben", "02-fake-two")):
        counted = json.loads(outdir.gradescope_path(out, lab, student).read_text())
        assert counted["score"] == 0 and counted["tests"][0]["max_score"] == 100       # counted as 0


def test_stray_folders_are_skipped_and_near_misses_named(fake_kit, tmp_path):
    """__MACOSX, hidden folders and files are no students; Kernel.cu and other near misses are named."""
    subs = tmp_path / "subs"
    put(subs, "ann", FAKE_LAB)
    put(subs, "__MACOSX", FAKE_LAB, "\x00\x05garbage")
    put(subs, ".git", FAKE_LAB)
    (subs / "notes.txt").write_text("grading notes")
    put(subs, "ben", FAKE_LAB, name="Kernel.cu")
    (subs / "cho" / FAKE_LAB / "kernel.cu").mkdir(parents=True)
    put(subs / "dan", "dan", FAKE_LAB)                 # the archive's own top folder
    put(subs, "eve", FAKE_LAB, name="kernel.cu.txt")
    (subs / "roster.csv").write_text("folder,site,id,name\nann,moodle,12,Ann\n")   # an importer's: no student
    out = tmp_path / "out"
    result = grade(subs, out, fake_kit)
    assert [g.student for g in result.gradings] == ["ann", "ben", "cho", "dan", "eve"]
    notes = "\n".join(result.summary)
    assert "skipped __MACOSX: an archive tool's folder" in notes
    assert "skipped .git: hidden" in notes and "skipped notes.txt: a file" in notes and "skipped roster.csv" not in notes
    messages = {g.student: g.message for g in result.gradings}
    assert "found Kernel.cu: the file must be named kernel.cu" in messages["ben"]
    assert f"cho/{FAKE_LAB}/kernel.cu is a folder, not a file" in messages["cho"]
    assert f"found dan/dan/{FAKE_LAB}/kernel.cu: it must be dan/{FAKE_LAB}/kernel.cu" in messages["dan"]
    assert "found kernel.cu.txt" in messages["eve"]
    assert sorted(read_csv(out / "class.csv")) == ["ann", "ben", "cho", "dan", "eve"]
    assert not (out / "gradescope" / "__MACOSX").exists() and not (out / "students" / "__MACOSX").exists()


def test_bad_paths_get_clear_messages_and_exit_2(fake_kit, tmp_path):
    """--out naming a file, or an archive given as the submissions: one clear message, exit 2."""
    subs = tmp_path / "subs"
    put(subs, "ann", FAKE_LAB)
    a_file = tmp_path / "grades.csv"
    a_file.write_text("keep")
    done = run_grade("class", subs, "--out", a_file, "--labs", "01-naive-5pt")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--out {a_file} is a file" in done.stderr
    assert a_file.read_text() == "keep"
    archive = tmp_path / "class.zip"
    archive.write_bytes(b"PK\x03\x04")
    done = run_grade("class", archive, "--out", tmp_path / "o")
    assert done.returncode == 2 and "is a file, not a directory of submissions" in done.stderr
    assert "unpack it first" in done.stderr


def test_rows_come_in_lab_order_and_no_hidden_file_is_left(fake_kit, tmp_path):
    """Progress rows come in lab order, not completion order; no hidden file stays in OUT."""
    add_lab(fake_kit, "02-fake-two", 2)
    makefile = fake_kit.lab_dir / "Makefile"                   # lab 1 builds slowly (without the GPU lock)
    makefile.write_text(makefile.read_text().replace("build:\n", "build:\n\t@sleep 3\n", 1))
    subs = tmp_path / "subs"
    put(subs, "ann", FAKE_LAB)
    put(subs, "ann", "02-fake-two")                            # lab 2 is done long before
    out = tmp_path / "out"
    (out / "students" / "ann").mkdir(parents=True)
    (out / "class.csv").write_text("student,total\n")
    (out / "students" / "ann" / f".{FAKE_LAB}.json.999999999.tmp").write_text("{")      # a writer killed
    lines = []
    grade(subs, out, fake_kit, jobs=2, progress=lines.append)
    rows = [line.split()[1] for line in lines if line.startswith("ann ")]
    assert rows == [FAKE_LAB, "02-fake-two"]
    hidden = [p for p in out.rglob(".*")]
    assert hidden == []


def test_submissions_reader_unit(tmp_path):
    subs = tmp_path / "s"
    put(subs, "ann", "01-x")
    (subs / "ann" / "01-X").mkdir()
    roster = submissions.read_students(subs)
    assert roster.students == ["ann"]
    assert submissions.find_source(subs, "ann", "01-x")[0] == subs / "ann" / "01-x" / "kernel.cu"
    path, why = submissions.find_source(subs, "ann", "02-y")
    assert path is None and why == "no submission: ann/02-y/kernel.cu not found"
    (subs / "bob" / "02-Y").mkdir(parents=True)
    assert "found the folder bob/02-Y: it must be bob/02-y" in submissions.find_source(subs, "bob", "02-y")[1]
    (subs / "cy").mkdir()
    (subs / "cy" / "kernel.cu").write_text("x")
    assert "put it in the lab's folder" in submissions.find_source(subs, "cy", "02-y")[1]


def test_a_measured_grade_is_never_lost(fake_kit, tmp_path):
    """Grading again into the same --out keeps a measured grade: not replaced by not_measured, nor deleted."""
    subs = tmp_path / "subs"
    put(subs, "ann", FAKE_LAB)
    put(subs, "ben", FAKE_LAB, GOOD_KERNEL + "// WRONG\n")
    out = tmp_path / "out"
    first = grade(subs, out, fake_kit)
    assert [(g.student, g.verdict) for g in first.gradings] == [("ann", "pass"), ("ben", "incorrect")]
    ann_json, ann_gs = outdir.report_path(out, "ann", FAKE_LAB), outdir.gradescope_path(out, FAKE_LAB, "ann")
    kept = (ann_json.read_bytes(), ann_gs.read_bytes(), outdir.gradescope_path(out, FAKE_LAB, "ben").read_bytes())
    gpu_gone(fake_kit)

    # the same command again: both are final for the same kernel.cu: nothing is graded, exit 0
    lines = []
    again = grade(subs, out, fake_kit, progress=lines.append)
    assert again.gradings == [] and again.exit_status == 0
    assert any("2 lab(s) kept" in line for line in lines)
    assert (ann_json.read_bytes(), ann_gs.read_bytes()) == kept[:2]

    # --regrade, and --student: graded again, measured nothing: the grades stay, and it says so
    for asked in ({"regrade": True}, {"student": "ann"}):
        result = grade(subs, out, fake_kit, **asked)
        assert {g.verdict for g in result.gradings} == {"not_measured"} and result.exit_status == 1
        assert (ann_json.read_bytes(), ann_gs.read_bytes()) == kept[:2]
        attempt = json.loads(outdir.attempt_path(out, "ann", FAKE_LAB).read_text())
        assert attempt["verdict"] == "not_measured" and attempt["final"] is False
        assert read_csv(out / "class.csv")["ann"] == {"student": "ann", FAKE_LAB: "100.00", "total": "100.00"}
        assert "measured nothing, and the earlier grade stays" in "\n".join(result.summary)
    assert outdir.gradescope_path(out, FAKE_LAB, "ben").read_bytes() == kept[2]

    # a changed kernel.cu is graded again without being asked; measured nothing: the grade stays
    put(subs, "ann", FAKE_LAB, GOOD_KERNEL + "// resubmitted\n")
    result = grade(subs, out, fake_kit)
    assert [(g.student, g.verdict) for g in result.gradings] == [("ann", "not_measured")]
    assert ann_json.read_bytes() == kept[0] and result.exit_status == 1

    # a kernel.cu gone from the submissions: the grade stays, unless asked
    (subs / "ben" / FAKE_LAB / "kernel.cu").unlink()
    result = grade(subs, out, fake_kit, labs=[FAKE_LAB])
    assert report(out, "ben")["verdict"] == "incorrect"
    assert any("ben/" + FAKE_LAB + ": kernel.cu is no longer in the submissions" in line for line in result.summary)
    grade(subs, out, fake_kit, regrade=True)
    assert report(out, "ben")["verdict"] == "missing" and report(out, "ann")["verdict"] == "pass"

    # a grade measured later replaces the attempt (and the attempt files go)
    put(subs, "ann", FAKE_LAB, GOOD_KERNEL + "// WRONG\n")
    write_script(fake_kit.fake / "check", FAKE_CHECK)
    write_script(fake_kit.fake / "bench", FAKE_BENCH)
    result = grade(subs, out, fake_kit)
    assert report(out, "ann")["verdict"] == "incorrect" and not outdir.attempt_path(out, "ann", FAKE_LAB).exists()


def test_the_local_and_slurm_runners_plan_alike(fake_kit, klass, tmp_path, monkeypatch):
    """`grade.py class` and `grade.py slurm` both plan with plan.make_plan (whose rule is resume.is_final)."""
    plans = []
    monkeypatch.setattr(plan, "make_plan", lambda *a, **k: plans.append(a) or (_ for _ in ()).throw(ClassError("x")))
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)
    out = tmp_path / "out"
    assert cli.main(["slurm", str(klass), "--out", str(out), "--arch", "90", "--dry-run"]) == 2
    assert cli.main(["class", str(klass), "--out", str(out)]) == 2
    assert len(plans) == 2 and batch.planning is plan


def test_the_summary_lists_every_failure_and_agrees_with_the_files(fake_kit, klass, tmp_path, capsys, monkeypatch):
    """summary.txt gives each failure's reason, apart from the unmeasured, after a resume and --student too."""
    put(klass, "fay", FAKE_LAB, GOOD_KERNEL + "// NO_GPU\n")
    out = tmp_path / "out"
    main = no_gpu_cli(monkeypatch, fake_kit)
    assert main(["class", str(klass), "--out", str(out)]) == 1
    for run in ("first", "resumed", "one student"):
        text = (out / "summary.txt").read_text()
        lines = text.splitlines()
        failed = lines.index("3 lab(s) failed, with the reason:")
        assert lines[failed + 1].startswith(f"  bob/{FAKE_LAB}: compile_error: kernel.cu(3): error: identifier")
        assert lines[failed + 3].startswith(f"  erin/{FAKE_LAB}: forbidden: ") and "system" in lines[failed + 3]
        assert lines[failed + 2] == f"  carol/{FAKE_LAB}: timeout: 1/3 cases passed; 1 timed out and 1 not run (worst: timeout)"
        missing = lines.index("1 lab(s) never submitted, shown as 'missing' in class.csv and left out of the "
                              "gradebook files (--missing-as-zero counts them as 0):")
        assert lines[missing + 1].startswith(f"  dave/{FAKE_LAB}: no submission")
        unmeasured = lines.index("1 lab(s) not measured (not_measured): no grade, shown as such in class.csv:")
        assert lines[unmeasured + 1].startswith(f"  fay/{FAKE_LAB}: not_measured: not measured: no GPU")
        assert "NOTHING WAS MEASURED for 1 of 6 lab(s)" in text
        out_err = capsys.readouterr()
        if run != "first":
            assert "NOTHING WAS MEASURED" in out_err.err
        # the console printed what summary.txt holds
        printed = out_err.out.splitlines() + out_err.err.splitlines()
        for line in lines:
            assert line in printed, (run, line)
        if run == "first":
            assert main(["class", str(klass), "--out", str(out)]) == 1           # resumed: fay again
        elif run == "resumed":
            assert main(["class", str(klass), "--out", str(out), "--student", "alice"]) == 1
    # class.csv is rebuilt from the reports: the same from nothing
    before = (out / "class.csv").read_text()
    (out / "class.csv").unlink()
    grade(klass, out, fake_kit, labs=[FAKE_LAB])
    assert (out / "class.csv").read_text() == before
    assert read_csv(out / "class.csv")["fay"] == {"student": "fay", FAKE_LAB: "not_measured", "total": ""}


def test_refusals_exit_2_in_one_line(fake_kit, klass, tmp_path, monkeypatch, capsys):
    """Refused in one line, exit 2: --out inside the submissions, an --out a batch run owns, a kernel.cu over 1 MiB."""
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)

    def refused(*argv):
        status = cli.main([str(a) for a in argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert status == 2 and len(err) == 1, err
        return err[0]

    inside = klass / "grades"
    assert "lies inside the submissions folder" in refused("class", klass, "--out", inside)
    assert "choose an --out outside it" in refused("slurm", klass, "--out", klass, "--arch", "90", "--dry-run")
    assert not inside.exists()
    # an --out that a batch run owns: its jobs submitted, its merge not run (as run.json records it)
    out = tmp_path / "out"
    grade(klass, out, fake_kit, student="alice")
    run = out / "batch" / "run-1"
    write_json(run / "run.json", {"jobs": {"build": "101", "gpu": "102", "merge": "103"}, "items": []})
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    line = refused("class", klass, "--out", out)
    assert "belongs to the batch run" in line and "101, 102, 103" in line and f"class-task merge {run}" in line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    write_json(run / "run.json", {"jobs": {"build": "101"}, "items": [], "merged": "2026-01-01"})
    assert cli.main(["class", str(klass), "--out", str(out)]) == 0
    # a kernel.cu over 1 MiB: refused by grade.py lab; in a class, that lab's grade, in one line
    huge = tmp_path / "huge"
    put(huge, "hal", FAKE_LAB, GOOD_KERNEL + "//" + "x" * (1 << 20) + "\n")
    capsys.readouterr()
    line = refused("lab", fake_kit.lab_dir, "--impl", huge / "hal", "--build-dir", tmp_path / "b")
    assert "kernel.cu is 1.0 MB, over the 1 MiB a kernel.cu may have" in line
    result = grade(huge, tmp_path / "hout", fake_kit)
    (g,) = result.gradings
    assert (g.verdict, g.points) == ("compile_error", 0.0) and "over the 1 MiB" in g.message
    assert report(tmp_path / "hout", "hal")["final"] is True


def test_make_grade_passes_paths_whole_and_names_the_graders_status(tmp_path):
    """make grade passes a folder with spaces and quotes whole, and names grade.py's exit status."""
    odd = tmp_path / "spring class" / "it's \"here\" $(x)"
    odd.mkdir(parents=True)
    done = subprocess.run(["make", "-s", "-C", str(KIT), "grade", f"SUBMISSIONS={odd}", f"OUT={tmp_path / 'o u t'}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"{odd} holds no student folder" in done.stderr
    assert "grade.py class exited with status 2" in done.stderr
    assert not (tmp_path / "o u t").exists()


def test_the_class_layer_has_no_import_circle_and_no_module_over_500_lines():
    """classes/ imports (function-local ones too) have no circle and run one way: plan -> gradings -> table -> files."""
    root = "stencil_grader.classes"
    modules = {name: path for name, path in grader_modules(KIT / "grader").items() if name.startswith(root)}
    short = {name: name[len(root) + 1:] or "__init__" for name in modules}
    graph = {}
    for name, path in modules.items():
        assert len(path.read_text().splitlines()) <= 500, f"{path.name}: {len(path.read_text().splitlines())} lines"
        deps = {t if t in modules else t.rpartition(".")[0] for t in grader_imports(name, path)} & modules.keys()
        graph[short[name]] = {short[d] for d in deps - {name}}
    graphlib.TopologicalSorter(graph).prepare()            # CycleError names the circle
    later = {"plan": {"backend", "worker", "classtable", "classfiles"}, "worker": {"backend", "classfiles"},
             "classtable": {"classfiles", "backend", "batch", "tasks"}}
    for name, after in later.items():
        assert not graph[name] & after, f"{name} imports a later step: {graph[name] & after}"


def test_instructor_paths_with_a_space(fake_kit, tmp_path, monkeypatch):
    """Submissions and --out may hold a space; a kit there is refused in one line; a TMPDIR with one is passed over."""
    subs = tmp_path / "spring class" / "subs"
    put(subs, "ann", FAKE_LAB)
    result = grade(subs, tmp_path / "spring class" / "grades", fake_kit)
    assert [g.verdict for g in result.gradings] == ["pass"]
    moved = tmp_path / "my kit"
    shutil.copytree(fake_kit.root / "labs", moved / "labs")
    with pytest.raises(ClassError, match=r"the kit lies in .*my kit', a path that holds a space, which make "
                                         r"cannot take: move the kit"):
        backend.grade_class(subs, tmp_path / "o", kit_root=moved, progress=lambda line: None)
    odd = tmp_path / "t m p"
    odd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(odd))
    assert worker.temp_root() in ("/tmp", "/var/tmp")
