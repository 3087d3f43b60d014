"""`make dist`: the student kit is the tracked files, without the instructor's parts, with its own README."""

import shutil
import subprocess
import tarfile

import pytest

from conftest import KIT_ROOT

pytestmark = pytest.mark.skipif(not shutil.which("make") or not shutil.which("git") or not shutil.which("tar"),
                                reason="make, git or tar not installed")


def test_dist_without_git_fails_clearly_and_writes_nothing(tmp_path):
    kit = tmp_path / "kit"
    (kit / "grader" / "dist").mkdir(parents=True)
    shutil.copy(KIT_ROOT / "Makefile", kit / "Makefile")
    shutil.copy(KIT_ROOT / "grader" / "dist" / "README.md", kit / "grader" / "dist" / "README.md")
    done = subprocess.run(["make", "-s", "dist"], cwd=kit, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert done.returncode != 0 and "not a git checkout" in done.stderr
    assert not (kit / "dist" / "stencil-lab-kit.tar.gz").exists()


def test_dist_ships_the_student_readme_and_no_reference(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(KIT_ROOT), str(clone)], check=True, timeout=120)
    if not (clone / "grader" / "dist" / "README.md").is_file():
        pytest.skip("grader/dist/README.md is not committed yet")
    done = subprocess.run(["make", "-s", "dist"], cwd=clone, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with tarfile.open(clone / "dist" / "stencil-lab-kit.tar.gz") as tar:
        names = tar.getnames()
        readme = tar.extractfile("stencil-lab-kit/README.md").read().decode()
    assert len(names) > 10 and all(n.startswith("stencil-lab-kit/") for n in names)
    assert not [n for n in names if n.split("/")[1] in ("reference", "tests", ".ci")]
    assert "stencil-lab-kit/grader/dist/README.md" not in names
    assert readme.startswith("# CUDA stencil labs: student kit") and "make check" in readme.split("\n\n")[1]
    assert "make test" not in readme and "reference/" not in readme and "tests/" not in readme
