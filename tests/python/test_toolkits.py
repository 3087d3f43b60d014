"""The build matrix of grader/toolkits.mk (CUDA 13 here; CUDA 12 from CUDA12_HOME or `make cuda12`), the finder."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import KIT_ROOT
from stencil_grader.base import toolkit

LABS = sorted(p.name for p in (KIT_ROOT / "labs").iterdir() if (p / "lab.json").is_file())
MATRIX = KIT_ROOT / "build" / "matrix"
#: Where `make cuda12` (tests/cuda-toolkit.sh 12.4 build/cuda) lays CUDA 12.4 out.
LAID_OUT = KIT_ROOT / "build" / "cuda"
HAVE_CHECK = shutil.which("pkg-config") is not None and \
    subprocess.run(["pkg-config", "--exists", "check"]).returncode == 0


class Toolkit:
    """One toolkit of the matrix: its folder, nvcc and release, its architectures (its release's
    row), and why it is missing (home None)."""

    def __init__(self, major: int):
        self.major = major
        env = dict(os.environ)
        self.why = ""
        if major == 12:
            env.pop("NVCC", None)
            if os.environ.get("CUDA12_HOME"):
                env["CUDA_HOME"] = os.environ["CUDA12_HOME"]
            elif (LAID_OUT / "12.4" / ".complete").is_file():
                env["CUDA_HOME"] = str(LAID_OUT / "12.4")
            else:
                unavailable = LAID_OUT / "12.4.unavailable"
                self.why = (unavailable.read_text().strip() if unavailable.is_file()
                            else "no CUDA 12 toolkit: run `make cuda12` (CUDA 12.4 from Debian and PyPI), "
                                 "or set CUDA12_HOME")
                env["CUDA_HOME"] = ""
        self.nvcc = toolkit.find_nvcc(env) if env.get("CUDA_HOME") != "" else None
        self.home = toolkit.cuda_home(env, self.nvcc) if self.nvcc else None
        self.release = toolkit.release(self.nvcc) if self.nvcc else None
        if self.nvcc and not (self.release or "").startswith(f"{major}."):
            self.why = f"the toolkit found ({self.home}) is CUDA {self.release}, not {major}"
            self.home = self.nvcc = None
        if env.get("CUDA_HOME") != "" and not self.nvcc and not self.why:
            self.why = toolkit.why_no_nvcc(env)
        self.archs = toolkit.architectures(self.release) if self.release else []

    def make_vars(self) -> list[str]:
        return [f"CUDA_HOME={self.home}", f"CUDA_ARCH={' '.join(map(str, self.archs))}"]


TOOLKITS = {major: Toolkit(major) for major in sorted({int(r.split(".")[0]) for r in toolkit.rows()})}


def _run(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def _need(tk: Toolkit):
    if not tk.nvcc:
        pytest.skip(f"CUDA {tk.major}: {tk.why}")
    if not HAVE_CHECK:
        pytest.skip("the Check library is not installed (pkg-config check)")


def test_ci_has_every_toolkit_of_the_matrix():
    """In CI (STENCIL_REQUIRE_TOOLKITS=1) a toolkit missing from the matrix fails, never skips."""
    if os.environ.get("STENCIL_REQUIRE_TOOLKITS") != "1":
        pytest.skip("STENCIL_REQUIRE_TOOLKITS is not 1: a toolkit the matrix lacks skips its tests, saying why")
    assert {m: tk.why for m, tk in TOOLKITS.items() if not tk.nvcc} == {}


def test_the_list_is_what_the_toolkit_builds():
    """toolkits.mk's row for a release is every sm_ code its nvcc knows, from the first up to 12.0."""
    tested = [tk for tk in TOOLKITS.values() if tk.nvcc]
    if not tested:
        pytest.skip("no nvcc here")
    for tk in tested:
        codes = _run([tk.nvcc, "--list-gpu-code"]).stdout
        known = sorted({int(n) for n in re.findall(r"\bsm_(\d+)\b", codes)})
        assert tk.archs and [a for a in known if tk.archs[0] <= a <= 120] == tk.archs, f"CUDA {tk.release}: {known}"


@pytest.mark.parametrize("tk,lab,impl", [pytest.param(tk, lab, impl, id=f"cuda{m}-{lab}-{impl}")
                                         for m, tk in TOOLKITS.items() for lab in LABS
                                         for impl in ("starter", "reference")])
def test_every_lab_builds_for_every_architecture(tk, lab, impl):
    """make build with a release's whole list: one ELF per architecture, its own runtime linked."""
    _need(tk)
    build_dir = MATRIX / f"cuda{tk.major}" / lab / impl
    done = _run(["make", "--no-print-directory", "-s", "-C", str(KIT_ROOT / "labs" / lab), "build",
                 f"IMPL={impl}", f"BUILD_DIR={build_dir}", *tk.make_vars()])
    assert done.returncode == 0, done.stdout + done.stderr
    cuobjdump = Path(tk.nvcc).with_name("cuobjdump")
    if cuobjdump.is_file():
        elves = _run([str(cuobjdump), "--list-elf", str(build_dir / "bench")]).stdout
        built = {int(n) for n in re.findall(r"\.sm_(\d+)\.", elves)}
        assert set(tk.archs) <= built, elves
    linked = _run(["ldd", str(build_dir / "check")]).stdout
    assert "libcudart.so" not in linked or f"{tk.home}/" in linked, linked


@pytest.mark.parametrize("tk", [pytest.param(tk, id=f"cuda{m}") for m, tk in TOOLKITS.items()])
def test_the_check_unit_suite_builds_and_passes_with_each_toolkit(tk):
    _need(tk)
    binary = MATRIX / f"cuda{tk.major}" / "check_harness"
    done = _run(["make", "--no-print-directory", "-s", "-C", str(KIT_ROOT), str(binary.relative_to(KIT_ROOT)),
                 f"UNIT_BIN={binary.relative_to(KIT_ROOT)}", f"CUDA_HOME={tk.home}"])
    assert done.returncode == 0, done.stdout + done.stderr
    ran = _run([str(binary)], env={**os.environ, "CK_FORK": "no"})
    assert ran.returncode == 0 and "100%" in ran.stdout, ran.stdout + ran.stderr
    linked = _run(["ldd", str(binary)]).stdout
    assert f"libcudart.so.{tk.major}" in linked, linked


# ---------------------------------------------------------------- one finder, CUDA_HOME honoured

def fake_toolkit(root: Path, release: str = "12.4") -> Path:
    """A toolkit folder whose bin/nvcc says `release` and logs its arguments."""
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f'#!/bin/sh\necho "$@" >> "{root}/calls"\n'
                    f'echo "Cuda compilation tools, release {release}, V{release}.0"\n')
    nvcc.chmod(0o755)
    return nvcc


def test_finder_order(tmp_path):
    home = tmp_path / "cuda-12.4"
    nvcc = fake_toolkit(home)
    on_path = fake_toolkit(tmp_path / "other", "13.0")
    path = str(on_path.parent)
    assert toolkit.find_nvcc({"CUDA_HOME": str(home), "PATH": path}) == str(nvcc)     # CUDA_HOME first
    assert toolkit.find_nvcc({"PATH": path}) == str(on_path)                          # then PATH
    assert toolkit.find_nvcc({"NVCC": str(on_path), "CUDA_HOME": str(home)}) == str(on_path)
    assert toolkit.find_nvcc({"CUDA_HOME": str(tmp_path / "none"), "PATH": path}) is None   # never another
    assert "has no bin/nvcc" in toolkit.why_no_nvcc({"CUDA_HOME": str(tmp_path / "none")})
    assert toolkit.cuda_home({"PATH": path}) == on_path.parent.parent
    assert toolkit.release(str(nvcc)) == "12.4"


def test_release_of_a_folder_without_nvcc(tmp_path):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda_runtime_api.h").write_text("#define CUDART_VERSION 12090\n")
    assert toolkit.release(None, tmp_path) == "12.9"
    assert toolkit.release(None, tmp_path / "nowhere") is None


def test_the_architectures_file_lists_each_release():
    assert toolkit.rows() == ["12.0", "12.8", "12.9", "13.0"]
    assert toolkit.architectures(12)[0] == 70 and toolkit.architectures(13)[0] == 75
    assert toolkit.architectures(13)[-1] == 120 and 70 not in toolkit.architectures(13)
    assert toolkit.row("12.4") == "12.0" and toolkit.architectures("12.4")[-1] == 90   # no Blackwell before 12.8
    assert {100, 101, 120} <= set(toolkit.architectures("12.8")) and 103 not in toolkit.architectures("12.8")
    assert toolkit.first_release_for(120) == "12.8" and toolkit.last_release_for(70) == "12.9"
    assert toolkit.architectures("11.8") == [] and toolkit.row("11.8") is None


def _dry_build(tmp_path, *make_vars, env=None) -> subprocess.CompletedProcess:
    return _run(["make", "--no-print-directory", "-n", "-C", str(KIT_ROOT / "labs" / "01-naive-5pt"), "build",
                 "IMPL=starter", f"BUILD_DIR={tmp_path / 'b'}", *make_vars],
                env={**os.environ, **(env or {})})


def test_lab_mk_and_python_use_the_same_nvcc_and_cuda_home(tmp_path):
    home = tmp_path / "cuda-12.4"
    nvcc = fake_toolkit(home)
    for how in ({"env": {"CUDA_HOME": str(home)}}, {"make_vars": [f"CUDA_HOME={home}"]}):
        done = _dry_build(tmp_path, *how.get("make_vars", []), "CUDA_ARCH=80", env=how.get("env"))
        commands = [line for line in done.stdout.splitlines() if "-Xptxas -v" in line]
        assert commands and commands[0].lstrip("@").startswith(str(nvcc)), done.stdout + done.stderr
        assert f"-I{home}/include" in commands[0]
    assert toolkit.find_nvcc({"CUDA_HOME": str(home)}) == str(nvcc)


def test_a_cuda_home_without_nvcc_is_a_kit_error(tmp_path):
    done = _run(["make", "--no-print-directory", "-s", "-C", str(KIT_ROOT / "labs" / "01-naive-5pt"), "build",
                 "IMPL=starter", f"BUILD_DIR={tmp_path / 'b'}", f"CUDA_HOME={tmp_path / 'missing'}"])
    assert done.returncode != 0
    assert f"kit error: no CUDA compiler: CUDA_HOME={tmp_path / 'missing'} has no bin/nvcc" in done.stderr


@pytest.mark.skipif(not TOOLKITS[13].nvcc, reason="no CUDA 13 nvcc here")
def test_ptx_only_and_too_old_architecture_words(tmp_path):
    done = _dry_build(tmp_path, "CUDA_ARCH=compute_75")
    kernel = next(line for line in done.stdout.splitlines() if "-Xptxas -v" in line)
    assert re.findall(r"-gencode (\S+)", kernel) == ["arch=compute_75,code=compute_75"]
    done = _dry_build(tmp_path, "CUDA_ARCH=70 80")
    kernel = next(line for line in done.stdout.splitlines() if "-Xptxas -v" in line)
    assert re.findall(r"-gencode (\S+)", kernel) == ["arch=compute_80,code=sm_80", "arch=compute_80,code=compute_80"]
    said = [line for line in done.stdout.splitlines() if "left out" in line]
    assert said == ["lab.mk: sm_70 left out: CUDA 13.0 builds for compute capability 75 and later "
                    "(Volta (7.0) and Xavier (7.2) need CUDA 12)"]
    done = _dry_build(tmp_path, "CUDA_ARCH=70")
    assert done.returncode != 0 and "no architecture left to build for" in done.stderr
