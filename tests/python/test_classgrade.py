"""Instructor mode: a class of submissions, one process per (student, lab)."""

import csv
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import FAKE_LAB, GOOD_KERNEL
from stencil_grader.classes import classgrade
from stencil_grader.base import locks
from test_checkrun import alive


def read_csv(path):
    with open(path, newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


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
    gradings = classgrade.grade_class(klass, out, jobs=3, progress=lines.append, kit_root=fake_kit.root)
    verdicts = {g.student: g.verdict for g in gradings}
    assert verdicts == {"alice": "pass", "bob": "compile_error", "carol": "timeout", "dave": "missing",
                        "erin": "forbidden"}
    rows = read_csv(out / "class.csv")
    assert list(rows) == ["alice", "bob", "carol", "dave", "erin"]
    assert rows["alice"][FAKE_LAB] == "100.00" and rows["alice"]["total"] == "100.00"
    assert rows["carol"][FAKE_LAB] == "20.00" and rows["bob"]["total"] == "0.00"
    alice = json.loads((out / "alice" / f"{FAKE_LAB}.json").read_text())
    assert alice["verdict"] == "pass" and alice["student"] == "alice" and alice["seed"] == 777
    assert (out / "alice" / f"{FAKE_LAB}.log").is_file()
    dave = json.loads((out / "dave" / f"{FAKE_LAB}.json").read_text())
    assert "no submission" in dave["messages"][0]
    for student in verdicts:
        results = json.loads((out / "gradescope" / student / "results.json").read_text())
        assert results["max_score"] == 100
        assert results["score"] == pytest.approx(float(rows[student]["total"]))
    assert any("alice" in line and "pass" in line for line in lines)
    # the temporary build dirs are gone; nothing was written into the submissions
    assert sorted(p.name for p in (klass / "alice" / FAKE_LAB).iterdir()) == ["kernel.cu"]


def test_regrade_one_student_leaves_the_others_alone(fake_kit, klass, tmp_path):
    out = tmp_path / "out"
    classgrade.grade_class(klass, out, jobs=2, progress=lambda line: None, kit_root=fake_kit.root)
    (out / "zoe").mkdir()                                        # an earlier class member
    (out / "zoe" / "notes.txt").write_text("keep me")
    with open(out / "class.csv", "a", newline="") as f:
        csv.writer(f).writerow(["zoe", "55.00", "55.00"])
    bob_json = out / "bob" / f"{FAKE_LAB}.json"
    before = (bob_json.stat().st_mtime_ns, read_csv(out / "class.csv"))

    fake_kit.submission("alice", GOOD_KERNEL + "// WRONG\n", nested=True)
    gradings = classgrade.grade_class(klass, out, student="alice", progress=lambda line: None,
                                      kit_root=fake_kit.root)
    assert [(g.student, g.verdict) for g in gradings] == [("alice", "incorrect")]
    rows = read_csv(out / "class.csv")
    assert rows["alice"][FAKE_LAB] == "40.00"
    for student in ("bob", "carol", "dave", "erin", "zoe"):
        assert rows[student] == before[1][student]
    assert bob_json.stat().st_mtime_ns == before[0]
    assert (out / "zoe" / "notes.txt").read_text() == "keep me"


def test_a_grading_process_past_its_limit_costs_that_lab_only(fake_kit, klass, tmp_path, monkeypatch):
    monkeypatch.setattr(classgrade, "time_limit_s", lambda spec, jobs: 1.0)
    out = tmp_path / "out"
    (g,) = classgrade.grade_class(klass, out, student="carol", progress=lambda line: None,
                                  kit_root=fake_kit.root)      # carol's check hangs for 3 s
    assert g.verdict == "grader_error" and g.points == 0
    data = json.loads((out / "carol" / f"{FAKE_LAB}.json").read_text())
    assert "timed out" in data["messages"][0]
    tests = json.loads((out / "gradescope" / "carol" / "results.json").read_text())["tests"]
    assert tests[0]["score"] == 0 and tests[0]["max_score"] == 100
    # carol's hung check ran in a session of its own, under the killed grading process: gone too
    time.sleep(0.2)
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and alive(int(p))
                 and (b"grade-01-fake-5pt" in _cmdline(p) or b"stencil-check-" in _cmdline(p))]
    assert leftovers == []


def _cmdline(pid: str) -> bytes:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return b""


def test_usage_errors(fake_kit, klass, tmp_path):
    with pytest.raises(classgrade.ClassError, match="no submissions for student 'nobody'"):
        classgrade.grade_class(klass, tmp_path / "o", student="nobody", kit_root=fake_kit.root)
    with pytest.raises(classgrade.ClassError, match="unknown lab"):
        classgrade.grade_class(klass, tmp_path / "o", labs=["99-none"], kit_root=fake_kit.root)
    with pytest.raises(classgrade.ClassError, match="no submissions for student '../klass'"):
        classgrade.grade_class(klass, tmp_path / "o", student="../klass", kit_root=fake_kit.root)
    with pytest.raises(classgrade.ClassError, match="no such directory"):
        classgrade.grade_class(tmp_path / "nothing", tmp_path / "o", kit_root=fake_kit.root)


def test_clean_environment_and_limits(monkeypatch, fake_kit):
    monkeypatch.setenv("CK_FORK", "no")
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-DCHEAT")
    env = classgrade.clean_env()
    assert "CK_FORK" not in env and "NVCC_APPEND_FLAGS" not in env
    assert env["NO_COLOR"] == "1" and "PATH" in env
    spec = classgrade.select_labs(None, fake_kit.root)[0]
    assert classgrade.time_limit_s(spec, 1) < classgrade.time_limit_s(spec, 4)


def test_gpu_lock_excludes_other_processes(tmp_path):
    lock = tmp_path / "gpu.lock"
    probe = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n    sys.exit(3)\n")
    with locks.GpuLock(lock):
        assert subprocess.run([sys.executable, "-c", probe, str(lock)], timeout=30).returncode == 3
    assert subprocess.run([sys.executable, "-c", probe, str(lock)], timeout=30).returncode == 0
    with locks.GpuLock(None):                                     # no lock file: does nothing
        pass
    assert os.path.exists(lock)


def test_no_gpu_is_no_grade_and_says_so(fake_kit, tmp_path):
    """Without a GPU nothing is measured: no 0.00 in class.csv, no Gradescope file, exit 1, loudly."""
    subs = tmp_path / "subs"
    (subs / "ann" / FAKE_LAB).mkdir(parents=True)
    (subs / "ann" / FAKE_LAB / "kernel.cu").write_text(GOOD_KERNEL + "// NO_GPU\n")
    out = tmp_path / "out"
    stale = out / "gradescope" / "ann" / "results.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    gradings = classgrade.grade_class(subs, out, progress=lambda line: None, kit_root=fake_kit.root)
    assert [(g.verdict, g.graded) for g in gradings] == [("not_measured", False)]
    row = read_csv(out / "class.csv")["ann"]
    assert row[FAKE_LAB] == "not_measured" and row["total"] == ""
    assert not stale.exists()
    assert json.loads((out / "ann" / f"{FAKE_LAB}.json").read_text())["verdict"] == "not_measured"


def test_class_command_exits_1_and_shouts_when_nothing_was_measured(fake_kit, tmp_path, monkeypatch):
    from stencil_grader import cli
    monkeypatch.setattr(classgrade, "KIT_ROOT", fake_kit.root)
    subs = tmp_path / "subs"
    (subs / "ann" / FAKE_LAB).mkdir(parents=True)
    (subs / "ann" / FAKE_LAB / "kernel.cu").write_text(GOOD_KERNEL + "// NO_GPU\n")
    real = classgrade.grade_class
    monkeypatch.setattr(classgrade, "grade_class", lambda *a, **k: real(*a, **k, kit_root=fake_kit.root))
    status = cli.main(["class", str(subs), "--out", str(tmp_path / "out")])
    assert status == 1
