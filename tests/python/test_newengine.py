"""The worked example of a new batch engine (tests/newengine/, grader/README.md section 9): one
module added to a copy of the kit, and no other edit, gives `grade.py localbatch`, which grades a
class through the batch layer (run folder, build and GPU tasks, merge) to the same grades as
`grade.py class`.  The count of files is checked, so the README's claim stays true."""

import csv
import shutil
import subprocess
import sys

from conftest import FAKE_LAB, GOOD_KERNEL, KIT_ROOT, FakeKit
from test_newkind import copy_kit

EXAMPLE = KIT_ROOT / "tests" / "newengine" / "localbatch.py"
ENGINE_FILE = "grader/stencil_grader/classes/engines/localbatch.py"
ENGINE_FILES = {ENGINE_FILE}


def grade_py(kit, *args):
    return subprocess.run([sys.executable, str(kit / "grader" / "grade.py"), *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def rows(path):
    with open(path, newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def test_a_new_engine_is_one_module_and_no_other_edit(tmp_path):
    kit = tmp_path / "kit"
    copy_kit(kit)
    FakeKit(kit)                                     # a lab whose build and runs need no toolchain or GPU
    before = {p.relative_to(kit).as_posix(): p.read_bytes() for p in kit.rglob("*") if p.is_file()}
    assert "localbatch" not in grade_py(kit, "--help").stdout
    # what a maintainer does: one file
    shutil.copy(EXAMPLE, kit / ENGINE_FILE)
    after = {p.relative_to(kit).as_posix(): p.read_bytes() for p in kit.rglob("*") if p.is_file()}
    changed = {name for name in set(before) | set(after) if after.get(name) != before.get(name)}
    assert changed == ENGINE_FILES, "a new batch engine should be its own module and nothing else"

    subs = tmp_path / "class"
    for name, text in (("ann", GOOD_KERNEL), ("ben", GOOD_KERNEL + "// WRONG\n"), ("cy", GOOD_KERNEL + "COMPILE_ERROR\n")):
        (subs / name / FAKE_LAB).mkdir(parents=True)
        (subs / name / FAKE_LAB / "kernel.cu").write_text(text)
    (subs / "dee").mkdir()                           # a lab never submitted
    done = grade_py(kit, "localbatch", subs, "--out", tmp_path / "out", "--labs", FAKE_LAB, "--arch", "90",
                    "--per-task", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted" in done.stdout and "merge task 0: exit status 0" in done.stdout
    run = tmp_path / "out" / "batch" / "run-1"
    assert sorted(p.name for p in run.glob("*.sh")) == ["build.sh", "gpu.sh", "merge.sh"]
    assert sorted(p.name for p in (run / "tasks").iterdir()) == ["build-0.json", "build-1.json", "gpu-0.json",
                                                                 "gpu-1.json", "merge-0.json"]
    local = rows(tmp_path / "out" / "class.csv")
    done = grade_py(kit, "class", subs, "--out", tmp_path / "out-class", "--labs", FAKE_LAB)
    assert done.returncode == 0, done.stdout + done.stderr
    assert local == rows(tmp_path / "out-class" / "class.csv")
    assert (local["ann"][FAKE_LAB], local["ben"][FAKE_LAB], local["cy"][FAKE_LAB], local["dee"][FAKE_LAB]) == \
        ("100.00", "40.00", "0.00", "missing")
