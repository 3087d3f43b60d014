"""The worked example of a new problem kind (tests/newkind/): own files, two shared edits, builds and grades."""

import json
import shutil
import subprocess
import sys

import pytest

from conftest import KIT_ROOT
from stencil_grader.base import toolkit

EXAMPLE = KIT_ROOT / "tests" / "newkind"
LAB = "90-box-9pt"
SHARED_EDITS = {"grader/kinds.json", "grader/include/stencil_lab.h"}


def tooling_missing() -> str | None:
    if not toolkit.find_nvcc():
        return "nvcc not found"
    if not shutil.which("make") or not shutil.which("git"):
        return "make or git not installed"
    if subprocess.run(["pkg-config", "--exists", "check"]).returncode != 0:
        return "the Check library is not installed (pkg-config check)"
    return None


def copy_kit(kit) -> None:
    """A copy of the kit as a clone has it (kit_files), without build/ and tests/, at kit."""
    for name in kit_files():
        if name.startswith(("build/", "tests/")):
            continue
        (kit / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(KIT_ROOT / name, kit / name)


def kit_files() -> list[str]:
    """The kit's files as a clone has them (tracked, and untracked but not ignored)."""
    listed = subprocess.run(["git", "-C", str(KIT_ROOT), "ls-files", "-c", "-o", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return [f for f in listed if f and (KIT_ROOT / f).is_file()]


def add_the_example(kit) -> None:
    """What a maintainer does, file by file (tests/newkind/README.md)."""
    shutil.copy(EXAMPLE / "stencil2d_box9_sweep.cu", kit / "grader" / "harness" / "kinds")
    shutil.copytree(EXAMPLE / "lab", kit / "labs" / LAB)
    for impl in ("starter", "reference"):
        (kit / impl / LAB).mkdir(parents=True)
        shutil.copy(EXAMPLE / f"{impl}.cu", kit / impl / LAB / "kernel.cu")
    # shared file 1: the kind's entry
    table = json.loads((kit / "grader" / "kinds.json").read_text())
    table.update(json.loads((EXAMPLE / "kind.json").read_text()))
    (kit / "grader" / "kinds.json").write_text(json.dumps(table, indent=2) + "\n")
    # shared file 2: the launcher, before the header's closing extern "C" block
    header = kit / "grader" / "include" / "stencil_lab.h"
    text = header.read_text()
    at = text.rindex("#ifdef __cplusplus\n}")
    header.write_text(text[:at] + (EXAMPLE / "stencil_lab.h.part").read_text().lstrip("\n") + "\n" + text[at:])


@pytest.mark.skipif(tooling_missing() is not None, reason=f"cannot build labs here: {tooling_missing()}")
def test_a_new_kind_is_its_own_files_and_two_shared_edits(tmp_path):
    kit = tmp_path / "kit"
    copy_kit(kit)
    before = {p.relative_to(kit).as_posix(): p.read_bytes() for p in kit.rglob("*") if p.is_file()}
    add_the_example(kit)
    after = {p.relative_to(kit).as_posix(): p.read_bytes() for p in kit.rglob("*") if p.is_file()}
    changed = {name for name in before if after.get(name) != before[name]}
    assert changed == SHARED_EDITS, "a new kind should edit only grader/kinds.json and stencil_lab.h"

    # make test's build step, for this lab only: its starter and its reference
    built = subprocess.run(["make", "-s", "-C", str(kit), "test-build", f"LABS={LAB}"],
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    assert built.stdout.count(f"== build {LAB}") == 2, built.stdout
    for impl in ("starter", "reference"):
        build_dir = kit / "build" / LAB / impl
        described = json.loads(subprocess.run([build_dir / "bench", "--describe"], capture_output=True,
                                              text=True, timeout=30, check=True).stdout)
        assert described["api"] == "stencil2d_box9_sweep" and not described["solver"]
        called = subprocess.run(["nm", "-u", *map(str, build_dir.glob("kind_*.o"))], capture_output=True,
                                text=True, timeout=30, check=True).stdout.split()
        assert "stencil2d_box9_sweep" in called          # the module calls the new launcher
        listed = subprocess.run([build_dir / "check", "--list"], capture_output=True, text=True, timeout=30,
                                check=True).stdout.splitlines()
        assert listed[0] == "degenerate\t0\tnx=1 ny=1" and len(listed) == 6

    for impl, on_a_gpu in (("reference", ("pass", "slow")), ("starter", ("incorrect",))):
        report_path = tmp_path / f"{impl}.json"
        graded = subprocess.run([sys.executable, kit / "grader" / "grade.py", "lab", LAB, "--impl", impl,
                                 "--json", report_path], capture_output=True, text=True, timeout=900,
                                env={"PATH": "/usr/bin:/bin:/usr/local/cuda/bin", "NO_COLOR": "1",
                                     "HOME": str(tmp_path)})
        report = json.loads(report_path.read_text())
        assert report["build"]["outcome"] == "ok", graded.stdout + graded.stderr
        # every rule passes; a note (the starter's TODO(lab90) still there) costs nothing
        assert all(c["status"] == "pass" for c in report["static"] if c["severity"] != "note"), report["static"]
        if report["verdict"] == "not_measured":        # no GPU here: the CPU side is all there is
            assert "no GPU" in report["correctness"]["message"]
        else:                                          # on a GPU machine: the kind works end to end
            assert report["verdict"] in on_a_gpu, (impl, graded.stdout)
