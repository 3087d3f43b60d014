"""build.py: make's outcome (ok / compile_error / timeout) and the ptxas -v report."""

import os
import shutil
import subprocess

import pytest

from conftest import DATA
from stencil_grader.grading import build

needs_make = pytest.mark.skipif(not shutil.which("make"), reason="make not installed")
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK)
                                else None)


def by_key(kernels):
    return {(k.short_name, k.arch): k for k in kernels}


def test_ptxas_log_two_architectures():
    kernels = by_key(build.parse_ptxas_log((DATA / "ptxas_two_arch.log").read_text()))
    assert set(kernels) == {(n, a) for n in ("plain", "tiled", "dyn", "spill") for a in ("sm_90", "sm_80")}
    tiled90 = kernels[("tiled", "sm_90")]
    assert (tiled90.name, tiled90.entry, tiled90.registers, tiled90.smem_bytes) == \
        ("_Z5tiledPKfPfi", True, 16, 1040)
    assert kernels[("tiled", "sm_80")].registers == 14
    assert kernels[("tiled", "sm_80")].smem_bytes == 1040       # smem before cmem on that line
    assert kernels[("plain", "sm_90")].smem_bytes == 0
    assert kernels[("dyn", "sm_90")].smem_bytes == 0           # dynamic shared memory is not in the report
    assert all(k.spill_stores == k.spill_loads == 0 for k in kernels.values())


def test_ptxas_log_spills_warnings_and_device_function():
    kernels = build.parse_ptxas_log((DATA / "ptxas_spills.log").read_text())
    named = {k.short_name: k for k in kernels}
    spill = named["spill"]
    assert (spill.registers, spill.stack_bytes, spill.spill_stores, spill.spill_loads) == (24, 472, 588, 756)
    assert named["divk"].registers == 18
    helper = named["helper"]                                  # a non-inlined __device__ function
    assert helper.entry is False and helper.registers is None
    assert [k.short_name for k in kernels if k.entry] == ["spill", "fdiv", "divk"]


def test_ptxas_log_older_format_without_barriers():
    text = ("ptxas info    : Compiling entry function 'stencil5' for 'sm_70'\n"
            "ptxas info    : Function properties for stencil5\n"
            "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
            "ptxas info    : Used 32 registers, 2048 bytes smem, 380 bytes cmem[0]\n")
    (k,) = build.parse_ptxas_log(text)
    assert (k.name, k.arch, k.registers, k.smem_bytes, k.spill_stores) == ("stencil5", "sm_70", 32, 2048, 4)
    assert k.short_name == "stencil5"                          # extern "C" names stay as they are


def test_short_names():
    assert build.short_name("_Z5tiledPKfPfi") == "tiled"
    assert build.short_name("_ZN3foo3barEv") == "_ZN3foo3barEv"
    assert build.short_name("_Z99x") == "_Z99x"


def test_make_command(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    cmd = build.make_command(tmp_path / "lab", str(sub), tmp_path / "b", "90")
    assert cmd == ["make", "--no-print-directory", "-C", str(tmp_path / "lab"), "build", f"IMPL={sub.resolve()}",
                   f"BUILD_DIR={(tmp_path / 'b').resolve()}", "CUDA_ARCH=90"]
    assert build.make_command(tmp_path, "starter", tmp_path / "b")[4:6] == ["build", "IMPL=starter"]


def test_impl_source(tmp_path):
    assert build.impl_source("01-x", "starter", tmp_path) == tmp_path / "starter" / "01-x" / "kernel.cu"
    flat = tmp_path / "flat"
    assert build.impl_source("01-x", str(flat)) == flat / "kernel.cu"
    (tmp_path / "nested" / "01-x").mkdir(parents=True)
    (tmp_path / "nested" / "01-x" / "kernel.cu").write_text("")
    assert build.impl_source("01-x", str(tmp_path / "nested")) == tmp_path / "nested" / "01-x" / "kernel.cu"


def make_lab(tmp_path, recipe: str):
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "Makefile").write_text("build:\n" + "".join(f"\t{line}\n" for line in recipe.splitlines()))
    return lab


@needs_make
def test_compile_error_keeps_the_last_lines(tmp_path):
    lines = "; ".join(f"echo line{i}" for i in range(40))
    lab = make_lab(tmp_path, f"@{lines}; echo 'kernel.cu(7): error: expected a \";\"' >&2; exit 1")
    result = build.build(lab, "starter", tmp_path / "b")
    assert result.outcome == "compile_error" and not result.ok
    message = result.message.splitlines()
    assert len(message) <= build.MESSAGE_LINES
    assert 'kernel.cu(7): error: expected a ";"' in result.message
    assert "line39" in message and "line0" not in message


@needs_make
def test_build_timeout_is_its_own_outcome(tmp_path):
    lab = make_lab(tmp_path, "@echo compiling; sleep 30")
    result = build.build(lab, "starter", tmp_path / "b", timeout_s=1)
    assert result.outcome == "timeout"
    assert "timed out after 1 s" in result.message
    assert result.seconds < 10


@needs_make
def test_good_build_reads_ptxas_log(tmp_path):
    lab = make_lab(tmp_path, f"@cp {DATA / 'ptxas_two_arch.log'} $(BUILD_DIR)/ptxas.log\n"
                             "@echo $(IMPL) $(CUDA_ARCH) > $(BUILD_DIR)/args")
    result = build.build(lab, "reference", tmp_path / "b", arch="80")
    assert result.outcome == "ok", result.message
    assert len(result.kernels) == 8
    assert (tmp_path / "b" / "args").read_text().split() == ["reference", "80"]


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_parser_reads_what_this_nvcc_writes(tmp_path):
    """The format check against the nvcc installed here (no GPU needed)."""
    shutil.copy(DATA / "kernels_shared.cu", tmp_path / "k.cu")
    done = subprocess.run([NVCC, "-Xptxas", "-v", "-c", "k.cu", "-o", "k.o", "-arch=sm_90"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    kernels = {k.short_name: k for k in build.parse_ptxas_log(done.stderr + done.stdout)}
    assert {"plain", "tiled", "dyn", "spill"} <= set(kernels)
    assert kernels["tiled"].smem_bytes == 1040 and kernels["tiled"].registers > 0
    assert kernels["plain"].smem_bytes == 0
