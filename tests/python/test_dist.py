"""`make dist` of the working tree: the student kit ships no reference, tests or instructor package, and what
it ships works, or says plainly why not, without a GPU."""

import ast
import concurrent.futures
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import GRADE_PY, HAVE_CHECK, KIT_ROOT, NVCC

pytestmark = pytest.mark.skipif(not shutil.which("make") or not shutil.which("git") or not shutil.which("tar"),
                                reason="make, git or tar not installed")

DIST = KIT_ROOT / "grader" / "dist"
NO_REFERENCE = "this student kit has no reference solutions"
#: What the student kit does not ship, so no shipped document may name it.
UNSHIPPED = re.compile(r"tests/|check_verdicts|\btest_\w+\.py|reference/|instructor-only|(classes|instructor)/")
#: The grader's subpackages the student kit leaves out (grader/dist/pack.sh), and cli.py skips there.
INSTRUCTOR_PACKAGES = ("classes", "instructor")
#: grade.py's commands in the student kit, in --help's order: grading/'s, then student/'s.
STUDENT_COMMANDS = ["lab", "all", "preflight", "config", "protocol", "profile", "solve"]
#: What each subpackage of the grader may import (besides the package's root, stencil_grader itself):
#: base <- grading <- student; classes and instructor stand on those three, and nothing stands on them.
LAYERS = {"base": {"base"}, "grading": {"base", "grading"}, "student": {"base", "grading", "student"},
          "classes": {"base", "grading", "student", "classes"},
          "instructor": {"base", "grading", "student", "instructor"},
          "cli": {"base", "grading", "student", "classes", "instructor"}}


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
    assert not {"grader/requirements.txt", "grader/stencil_grader/templates/class.html"} & \
        {n.partition("/")[2] for n in names}                       # the instructor's libraries and pages
    assert "stencil-lab-kit/grader/stencil_grader/templates/lab.html" in names   # the student's report page
    readme = (kit / "README.md").read_text()
    assert readme.startswith("# CUDA stencil labs: student kit") and "make check" in readme.split("\n\n")[1]
    assert "make test" not in readme and "reference/" not in readme and "tests/" not in readme
    assert (kit / "Makefile").read_text() == (DIST / "Makefile").read_text()
    assert (kit / "starter" / "01-naive-5pt" / "kernel.cu").is_file()
    assert (kit / "notebooks" / "colab.ipynb").read_bytes() == (KIT_ROOT / "notebooks" / "colab.ipynb").read_bytes()


def test_student_kit_help_lists_only_what_works_there(packed):
    full = run(["make", "-s", "help"], KIT_ROOT / "labs" / "01-naive-5pt")
    assert full.returncode == 0 and "IMPL=starter|reference|DIR" in full.stdout
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
    """starter/NN-slug/'s Makefile only includes lab.mk: make check there grades as in labs/NN-slug/."""
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
    built = [p for p in (kit / "build").rglob("*") if p.suffix in (".o", ".a") or p.name in ("check", "bench")]
    assert built == []                                                # nothing was compiled


@pytest.mark.parametrize("target", ["test", "dist", "grade", "smem-roof", "ebisu"])
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
    """The shipped handouts cite no tests/ or instructor package; the student Makefile grades the starters."""
    _, kit = packed
    for md in sorted((kit / "handouts").rglob("*.md")):
        found = [line for line in md.read_text().splitlines()
                 if re.search(r"tests/|stencil_grader/(classes|instructor)\b", line)]
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
    """make check's rules stand in grader/check.mk alone, which both Makefiles include and the kit ships."""
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


# ---- the grader's packages: the student kit runs without the instructor's ----------------------

def grader_modules(grader: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of grader/stencil_grader under `grader`."""
    found = {}
    for path in sorted((grader / "stencil_grader").rglob("*.py")):
        parts = list(path.relative_to(grader).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def grader_imports(name: str, path: Path) -> set[str]:
    """The stencil_grader modules, or names in them, that module `name` imports anywhere (functions too)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "stencil_grader"}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            source = base + (node.module.split(".") if node.module else [])
            if source[:1] == ["stencil_grader"]:
                found |= {".".join(source + [a.name]) for a in node.names}
    return found


def bound_names(path: Path) -> set[str]:
    """The names a module binds at its top level (functions, classes, assignments, imports)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return found


def unresolved(target: str, modules: dict[str, Path]) -> bool:
    """True when `target` names no module of `modules` nor a name one binds (a package's: its __init__.py)."""
    if target in modules:
        return False
    parent, _, leaf = target.rpartition(".")
    if parent not in modules:
        return True
    return modules[parent].name == "__init__.py" and leaf not in bound_names(modules[parent])


def test_grader_imports_run_one_way():
    """base <- grading <- student <- classes, instructor (LAYERS): the kit can leave the last two out."""
    modules = grader_modules(KIT_ROOT / "grader")
    wrong = []
    for name, path in modules.items():
        layer = name.split(".")[1] if "." in name else "root"
        for target in grader_imports(name, path):
            floor = target.split(".")[1]
            if floor in LAYERS and floor not in LAYERS.get(layer, set()):
                wrong.append(f"{name} imports {target}")
    assert not wrong, wrong
    assert {name.split(".")[1] for name in modules if "." in name} == set(LAYERS), "a subpackage LAYERS omits"


def test_student_kit_ships_no_instructor_package(packed):
    tarball, kit = packed
    package = kit / "grader" / "stencil_grader"
    assert (package / "student" / "profile" / "command.py").is_file() and (package / "student" / "solve.py").is_file()
    for name in INSTRUCTOR_PACKAGES:
        assert (KIT_ROOT / "grader" / "stencil_grader" / name / "commands.py").is_file(), name
        assert not (package / name).exists(), name
    with tarfile.open(tarball) as tar:
        assert not [n for n in tar.getnames() if re.search(r"/stencil_grader/(classes|instructor)(/|$)", n)]


def _commands(help_text: str) -> list[str]:
    """The command names grade.py --help lists (argparse's sub-command lines, 4 spaces in)."""
    return re.findall(r"^    (\S+)", help_text, re.MULTILINE)


def test_student_kit_grade_py_offers_the_student_commands_only(packed):
    _, kit = packed
    done = run([sys.executable, "grader/grade.py", "--help"], kit)
    assert done.returncode == 0, done.stderr
    assert _commands(done.stdout) == STUDENT_COMMANDS
    full = run([sys.executable, str(GRADE_PY), "--help"], KIT_ROOT)
    assert _commands(full.stdout)[:len(STUDENT_COMMANDS)] == STUDENT_COMMANDS
    assert {"class", "slurm", "tour", "calibrate", "tune", "figures"} <= set(_commands(full.stdout))
    tour = run([sys.executable, "grader/grade.py", "tour"], kit)
    assert tour.returncode == 2 and "invalid choice: 'tour'" in tour.stderr


def test_every_module_the_student_kit_ships_imports_there(packed):
    """Each shipped module imports alone in a fresh interpreter; no import, even in a function, names one left out."""
    _, kit = packed
    modules = grader_modules(kit / "grader")
    missing = [f"{name} imports {target}" for name, path in modules.items()
               for target in grader_imports(name, path) if unresolved(target, modules)]
    assert not missing, missing
    assert len(modules) > 40 and "stencil_grader.student.profile.command" in modules

    def load(name: str) -> str:
        done = run([sys.executable, "-c", f"import sys; sys.path.insert(0, 'grader'); import {name}"], kit)
        return "" if done.returncode == 0 else f"{name}: {done.stderr.strip().splitlines()[-1:]}"

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        failed = [said for said in pool.map(load, modules) if said]
    assert not failed, failed


def _no_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    return not smi or subprocess.run([smi, "-L"], capture_output=True).returncode != 0


needs_build_without_gpu = pytest.mark.skipif(
    NVCC is None or not _no_gpu() or not HAVE_CHECK,
    reason="needs nvcc and Check to build, and no GPU: these are the student kit's answers without one")


@needs_build_without_gpu
def test_student_kit_builds_and_says_what_it_cannot_measure_without_a_gpu(packed):
    """Without a GPU: make check builds, checks statically, says not_measured and fails; profile and solve say why."""
    _, kit = packed
    lab = kit / "labs" / "01-naive-5pt"
    done = run(["make", "-s", "build"], lab, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (kit / "build" / "01-naive-5pt" / "starter" / "bench").is_file()
    check = run(["make", "check"], lab, timeout=600)
    assert check.returncode != 0 and "] Error 1" in check.stderr, check.stdout[-2000:] + check.stderr[-2000:]
    assert re.search(r"^  verdict +not_measured +0\.00/100 points$", check.stdout, re.MULTILINE), check.stdout
    assert "correctness: not measured (no GPU, see next)" in check.stdout and "Why: no GPU: " in check.stdout
    assert re.search(r"^  static +ok ", check.stdout, re.MULTILINE)
    profile = run(["make", "-s", "profile"], lab, timeout=600)
    assert profile.returncode != 0 and "grade.py profile: no GPU to run the bench on" in profile.stderr, \
        profile.stderr
    solve = run(["make", "-s", "solve"], kit / "labs" / "07-reduction-residual", timeout=600)
    assert solve.returncode != 0, solve.stdout[-2000:] + solve.stderr[-2000:]
    assert "make solve: make solve needs a GPU, and this machine has none it can use: " in solve.stderr
    assert "Traceback" not in check.stderr + profile.stderr + solve.stderr
