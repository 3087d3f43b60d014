"""`make dist`: the student kit is the tracked files, without the instructor's parts, with its own
README and Makefile, and what it ships works (or says plainly why not) without a GPU.

The kit is packed from the working tree as it stands (tracked files and new ones not yet
committed, copied into a fresh git repository), so the test checks what the next commit ships.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import tarfile

import pytest

from conftest import KIT_ROOT

pytestmark = pytest.mark.skipif(not shutil.which("make") or not shutil.which("git") or not shutil.which("tar"),
                                reason="make, git or tar not installed")

DIST = KIT_ROOT / "grader" / "dist"
NO_REFERENCE = "this student kit has no reference solutions"
#: What the student kit does not ship, so no shipped document may name it.
UNSHIPPED = re.compile(r"tests/|check_verdicts|\btest_\w+\.py|reference/|instructor-only")


def run(args, cwd, timeout=120, **kw):
    env = dict(os.environ, NO_COLOR="1")
    env.pop("IMPL", None)
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, **kw)


def load_instructor_only():
    spec = importlib.util.spec_from_file_location("instructor_only", DIST / "instructor_only.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """(the tarball, the unpacked student kit): `make dist` in a git copy of the working tree."""
    root = tmp_path_factory.mktemp("dist")
    repo = root / "repo"
    listed = run(["git", "ls-files", "-z", "-c", "-o", "--exclude-standard"], KIT_ROOT).stdout.split("\0")
    for name in filter(None, listed):
        source = KIT_ROOT / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main"]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "kit"]):
        done = run(git + step, repo)
        assert done.returncode == 0, done.stderr
    done = run(["make", "-s", "dist"], repo)
    assert done.returncode == 0, done.stdout + done.stderr
    tarball = repo / "dist" / "stencil-lab-kit.tar.gz"
    with tarfile.open(tarball) as tar:
        tar.extractall(root / "unpacked", **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
    assert not [p for p in (repo / "dist").iterdir() if p.name != tarball.name], "make dist left files behind"
    return tarball, root / "unpacked" / "stencil-lab-kit"


def test_dist_without_git_fails_clearly_and_writes_nothing(tmp_path):
    kit = tmp_path / "kit"
    shutil.copytree(DIST, kit / "grader" / "dist")
    shutil.copy(KIT_ROOT / "Makefile", kit / "Makefile")
    shutil.copy(KIT_ROOT / "grader" / "check.mk", kit / "grader" / "check.mk")
    done = subprocess.run(["make", "-s", "dist"], cwd=kit, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert done.returncode != 0 and "not a git checkout" in done.stderr
    assert not (kit / "dist" / "stencil-lab-kit.tar.gz").exists()


def test_dist_ships_the_student_readme_and_makefile_and_no_reference(packed):
    tarball, kit = packed
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert len(names) > 10 and all(n.startswith("stencil-lab-kit") for n in names)
    assert not [n for n in names if n.count("/") and n.split("/")[1] in ("reference", "tests", ".ci")]
    assert not [n for n in names if n.startswith("stencil-lab-kit/grader/dist")]
    readme = (kit / "README.md").read_text()
    assert readme.startswith("# CUDA stencil labs: student kit") and "make check" in readme.split("\n\n")[1]
    assert "make test" not in readme and "reference/" not in readme and "tests/" not in readme
    assert (kit / "Makefile").read_text() == (DIST / "Makefile").read_text()
    assert (kit / "starter" / "01-naive-5pt" / "kernel.cu").is_file()
    assert (kit / "notebooks" / "colab.ipynb").read_bytes() == (KIT_ROOT / "notebooks" / "colab.ipynb").read_bytes()


def test_student_kit_help_lists_only_what_works_there(packed):
    _, kit = packed
    done = run(["make", "-s", "help"], kit)
    assert done.returncode == 0, done.stderr
    assert "make check" in done.stdout and "01-naive-5pt" in done.stdout
    for word in ("make test", "make grade", "make tour", "make calibrate", "make tune", "make dist", "reference"):
        assert word not in done.stdout, word
    lab = run(["make", "-s", "help"], kit / "labs" / "01-naive-5pt")
    assert lab.returncode == 0, lab.stderr
    assert "IMPL=starter|DIR" in lab.stdout and "reference" not in lab.stdout


def test_make_check_works_from_the_folder_of_the_file_a_student_edits(packed):
    """starter/NN-slug/ holds the file a student edits; make check there grades it, through the same
    lab.mk as labs/NN-slug/ (a Makefile of a few lines that includes it, no rule of its own)."""
    _, kit = packed
    for lab in sorted(p.name for p in (kit / "labs").iterdir()):
        folder = kit / "starter" / lab
        lines = [x for x in (folder / "Makefile").read_text().splitlines() if x and not x.startswith("#")]
        assert lines == [f"LAB := {lab}", "include ../../grader/lab.mk"], lab
        here = run(["make", "-s", "print-build-dir"], folder)
        there = run(["make", "-s", "print-build-dir"], kit / "labs" / lab)
        assert here.returncode == 0 and here.stdout == there.stdout, here.stderr
    dry = run(["make", "-n", "check"], kit / "starter" / "01-naive-5pt")
    assert dry.returncode == 0 and "No rule to make target" not in dry.stderr, dry.stderr
    assert "grade.py lab" in dry.stdout and "labs/01-naive-5pt --impl starter" in dry.stdout


def test_the_full_kit_help_still_offers_the_reference():
    lab = run(["make", "-s", "help"], KIT_ROOT / "labs" / "01-naive-5pt")
    assert lab.returncode == 0 and "IMPL=starter|reference|DIR" in lab.stdout


@pytest.mark.parametrize("where, args", [
    (".", ["check", "IMPL=reference"]),
    ("labs/01-naive-5pt", ["check", "IMPL=reference"]),
    ("labs/05-z-coarsening", ["build", "IMPL=reference"]),
    (".", ["calibrate"]),
    (".", ["tour"]),
])
def test_student_kit_says_it_has_no_reference_solutions(packed, where, args):
    """No GPU, nvcc or Check needed: the answer comes before anything is built."""
    _, kit = packed
    done = run(["make", *args], kit / where, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert NO_REFERENCE in done.stderr
    assert "/reference/" not in done.stdout + done.stderr            # no path that does not exist
    assert not (kit / "build" / "harness").exists()                  # nothing was compiled


@pytest.mark.parametrize("target", ["test", "dist", "grade"])
def test_student_kit_instructor_targets_say_why_not(packed, target):
    _, kit = packed
    done = run(["make", target], kit, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith(f"make {target}: ")


def test_shipped_documents_name_nothing_the_kit_does_not_ship(packed):
    _, kit = packed
    for name in ("README.md", "grader/README.md"):
        text = (kit / name).read_text()
        found = [line for line in text.splitlines() if UNSHIPPED.search(line)]
        assert not found, (name, found[:3])
    shipped_grader = (kit / "grader" / "README.md").read_text()
    full_grader = (KIT_ROOT / "grader" / "README.md").read_text()
    assert "### 5. Known submissions" in full_grader and "### 5. Known submissions" not in shipped_grader
    assert "| attack | defence | where |\n" in shipped_grader               # the table, without "proved by"
    assert "check_verdicts.py" in full_grader                              # written once, in the full kit
    for md in kit.rglob("*.md"):
        assert "instructor-only" not in md.read_text(), md


def test_shipped_handouts_cite_no_file_of_the_kits_tests(packed):
    """The handouts ship; tests/ (the known submissions) does not: the instructor-only marks leave
    those citations out of the student kit, and what the top-level make check grades is the kit's."""
    _, kit = packed
    for md in sorted((kit / "handouts").glob("*.md")):
        found = [line for line in md.read_text().splitlines() if "tests/" in line]
        assert not found, (md.name, found[:3])
    index = (kit / "handouts" / "README.md").read_text()
    assert "IMPL=reference` by default" not in index and "your starter files in the student kit" in index
    assert re.search(r"^IMPL \?= starter$", (kit / "Makefile").read_text(), re.MULTILINE)
    full = (KIT_ROOT / "handouts" / "05-z-coarsening.md").read_text()
    assert "make check IMPL=../../reference/tour/" in full and "`tests/` is not in the student kit" not in full


def test_starter_01_names_the_grid_limit_its_tallest_case_tests():
    """Lab 1's 4 x 600001 case needs more than 65535 rows of blocks: the starter's TODO says so."""
    assert "4, 600001" in (KIT_ROOT / "labs" / "01-naive-5pt" / "check_01.c").read_text()
    starter = (KIT_ROOT / "starter" / "01-naive-5pt" / "kernel.cu").read_text()
    todo = starter[starter.index("TODO(lab01): choose a block shape"):]
    assert "65535" in todo and "600001" in todo and "gridDim.y" in todo


def test_both_makefiles_grade_with_the_one_check_rule(packed):
    """make check's rules stand in grader/check.mk alone, which both Makefiles include and the
    student kit ships (its make check IMPL=reference, tested above, runs through it)."""
    _, kit = packed
    rule = re.compile(r"^(check|build-labs|build-lab-%):\s*\n\t", re.MULTILINE)
    assert len(rule.findall((KIT_ROOT / "grader" / "check.mk").read_text())) == 3
    for makefile in (KIT_ROOT / "Makefile", DIST / "Makefile", kit / "Makefile"):
        text = makefile.read_text()
        assert re.search(r"^include grader/check\.mk$", text, re.MULTILINE), makefile
        assert not rule.search(text), f"{makefile} writes a rule of grader/check.mk again"
    assert (kit / "grader" / "check.mk").is_file()


def test_instructor_only_marks():
    strip = load_instructor_only().strip
    text = ("keep\n<!-- instructor-only -->\ngone\n<!-- /instructor-only -->\nkept"
            " a<!-- instructor-only --> b\nc<!-- /instructor-only -->.\n"
            "<!-- instructor-only: last column -->\n\n| x | y | z |\n|---|---|---|\n| 1 | 2 | 3 |\nafter | 9 |\n")
    assert strip(text) == "keep\nkept a.\n\n| x | y |\n|---|---|\n| 1 | 2 |\nafter | 9 |\n"


@pytest.mark.parametrize("text, line", [
    ("a\n<!-- instructor-only -->\nb\n", 2),
    ("a\nb <!-- /instructor-only -->\n", 2),
    ("<!-- instructor-only: last column -->\ntext\n", 1),
])
def test_instructor_only_marks_unbalanced(text, line):
    module = load_instructor_only()
    with pytest.raises(module.MarkError, match=f"line {line}"):
        module.strip(text)
