"""base/preflight.py's refusals through grade.py (exit 2, one line, no build), on a fake driver and smi."""

import os
import re
import subprocess
import sys

import pytest

from conftest import GRADE_PY, KIT_ROOT, build_fake_libcuda, write_script
from stencil_grader.base import gpuprobe, gpus, labspec, preflight, toolkit

UUID = "GPU-00112233-4455-6677-8899-aabbccddeeff"       # the fake driver's UUID

FAKE_SMI = f'''
import os, sys
args = " ".join(sys.argv[1:])
if "--query-gpu=uuid,memory.free" in args:
    print("{UUID}, " + os.environ.get("FAKE_SMI_FREE", "81000") + ", 81559, "
          + os.environ.get("FAKE_SMI_MIG", "Disabled"))
elif "--query-compute-apps" in args:
    for app in filter(None, os.environ.get("FAKE_SMI_APPS", "").split(";")):
        print("{UUID}, " + app)
elif "--query-gpu=name,driver_version" in args:
    print("Fake GPU 80GB, " + os.environ.get("FAKE_SMI_DRIVER", "580.159.04") + ", 1980")
elif "--query-gpu=index" in args:
    print(os.environ.get("FAKE_SMI_LIST", "0, {UUID}, 9.0, Fake GPU").replace(";", "\\n"))
elif "--query-gpu=compute_cap" in args:
    print("9.0")
else:
    sys.exit(9)
'''


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    folder = build_fake_libcuda(tmp_path_factory.mktemp("fakecuda"))
    write_script(folder / "bin" / "nvidia-smi", FAKE_SMI)
    return folder


@pytest.fixture
def machine(fake_driver, monkeypatch):
    """This process and its children see the fake driver and nvidia-smi; the toolkit is CUDA 13.0."""
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_driver))
    monkeypatch.setenv("PATH", f"{fake_driver / 'bin'}{os.pathsep}{os.environ['PATH']}")
    for name in ("FAKE_CUDA", "FAKE_CUDA_DRIVER", "FAKE_CUDA_CC", "FAKE_CUDA_NAME", "FAKE_SMI_FREE",
                 "FAKE_SMI_MIG", "FAKE_SMI_APPS", "FAKE_SMI_DRIVER", "FAKE_SMI_LIST", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(toolkit, "release", lambda nvcc=None, home=None: "13.0")
    return monkeypatch


def lab(name="01-naive-5pt"):
    return labspec.load(KIT_ROOT / "labs" / name / "lab.json")


def findings(**kw):
    return [(f.level, f.message) for f in preflight.check(**kw)]


def test_the_quick_probe_reads_the_driver_without_a_context(machine):
    machine.setenv("FAKE_CUDA_DRIVER", "12040")
    machine.setenv("FAKE_CUDA", "2")                 # a kernel would fault: quick never runs one
    found = gpuprobe.probe(quick=True)
    assert found.ok and found.driver == 12040 and found.cc == "9.0" and found.uuid == UUID
    assert found.memory_total == 80 << 30 and found.l2_bytes == 50 << 20
    assert gpuprobe.probe().status == "failed"       # the full probe runs the kernel


def test_a_good_machine_has_nothing_to_say(machine, tmp_path):
    assert findings(labs=[lab()], osrelease=tmp_path / "none") == []


def test_a_driver_older_than_the_toolkit_is_refused_naming_both(machine, tmp_path):
    machine.setenv("FAKE_CUDA_DRIVER", "12020")
    machine.setenv("FAKE_SMI_DRIVER", "535.104.05")
    ((level, message),) = findings(osrelease=tmp_path / "none")
    assert level == "refuse"
    assert "driver 535.104.05, CUDA 12.2" in message and "CUDA 13.0" in message
    assert "580.65.06" in message and "CUDA_HOME=/path/to/cuda-12.x" in message


def test_an_older_minor_release_only_warns(machine, tmp_path):
    machine.setenv("FAKE_CUDA_DRIVER", "12020")
    machine.setattr(toolkit, "release", lambda nvcc=None, home=None: "12.9")
    ((level, message),) = findings(osrelease=tmp_path / "none")
    assert level == "warn" and "minor-version compatibility" in message


def test_a_gpu_below_the_toolkit_s_architectures_is_refused(machine, tmp_path):
    machine.setenv("FAKE_CUDA_CC", "70")
    machine.setenv("FAKE_CUDA_NAME", "Tesla V100-SXM2-16GB")
    ((level, message),) = findings(osrelease=tmp_path / "none")
    assert level == "refuse" and message.startswith("Tesla V100-SXM2-16GB is compute capability 7.0")
    assert "CUDA 13.0 builds for 7.5 and later" in message and "build with CUDA 12" in message
    machine.setenv("FAKE_CUDA_CC", "61")
    ((level, message),) = findings(osrelease=tmp_path / "none")
    assert level == "refuse" and "no CUDA toolkit the kit supports builds for it" in message


def test_too_little_free_memory_warns_that_the_grid_is_scaled(machine, tmp_path):
    machine.setenv("FAKE_SMI_FREE", "2000")          # MiB: lab 1's 16384 x 8192 grid needs about 2.8 GB
    ((level, message),) = findings(labs=[lab(), lab("05-z-coarsening")], osrelease=tmp_path / "none")
    assert level == "warn" and "2.1 GB free" in message and "scales the grid down" in message
    assert "01-naive-5pt needs 2.8 GB" in message and "05-z-coarsening" in message


def test_other_processes_on_the_gpu_warn_of_unreliable_timings(machine, tmp_path):
    machine.setenv("FAKE_SMI_APPS", "4242, python3, 30000;4343, ./train, 1000")
    ((level, message),) = findings(osrelease=tmp_path / "none")
    assert level == "warn" and "python3 (pid 4242, 30000 MiB)" in message and "unreliable" in message


def test_mig_and_wsl2_say_what_works(machine, tmp_path):
    machine.setenv("FAKE_SMI_MIG", "Enabled")
    osrelease = tmp_path / "osrelease"
    osrelease.write_text("5.15.167.4-microsoft-standard-WSL2\n")
    messages = [m for level, m in findings(osrelease=osrelease) if level == "warn"]
    assert len(messages) == 2
    assert messages[0].startswith("a MIG slice") and "generic targets" in messages[0]
    assert messages[1].startswith("WSL2") and "/usr/lib/wsl/lib/nvidia-smi" in messages[1]


def test_no_gpu_is_no_refusal(machine, tmp_path):
    machine.setenv("FAKE_CUDA", "1")
    assert findings(osrelease=tmp_path / "none") == []


@pytest.mark.parametrize("env,words", [
    ({"FAKE_CUDA_DRIVER": "12020"}, "is older than the toolkit"),
    ({"FAKE_CUDA_CC": "70"}, "is compute capability 7.0")])
def test_grade_py_refuses_before_any_build(fake_driver, tmp_path, env, words):
    """Through the command line a student runs (make check's grade.py lab), with the real toolkit."""
    if not toolkit.find_nvcc() or not toolkit.release(toolkit.find_nvcc()).startswith("13."):
        pytest.skip("needs the CUDA 13 toolkit the refusals are written against")
    build_dir = tmp_path / "build"
    done = subprocess.run([sys.executable, str(GRADE_PY), "lab", "labs/01-naive-5pt", "--impl", "reference",
                           "--build-dir", str(build_dir)], cwd=KIT_ROOT, capture_output=True, text=True,
                          env={**os.environ, **env, "LD_LIBRARY_PATH": str(fake_driver),
                               "PATH": f"{fake_driver / 'bin'}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("grade.py: error: this GPU cannot grade the labs: ")
    assert words in lines[0]
    assert not build_dir.exists() and "building" not in done.stdout


def test_the_memory_rule_is_bench_c_s():
    """preflight's estimate mirrors bench.c's fit_grid: the same reserve and arrays per kind."""
    bench = (KIT_ROOT / "grader" / "harness" / "bench.c").read_text()
    assert re.search(r"HEADROOM_BYTES = \(size_t\)512 << 20;", bench)
    assert re.search(r"reserve = 2 \* dev->l2_bytes \+ HEADROOM_BYTES;", bench)
    assert preflight.BENCH_RESERVE_BYTES == 512 << 20
    grid = (KIT_ROOT / "grader" / "include" / "grid_kind.h").read_text()
    assert re.search(rf"GRID_BENCH_ARRAYS = {preflight.BENCH_ARRAYS_DEFAULT} ", grid)
    jacobi = (KIT_ROOT / "grader" / "harness" / "kinds" / "jacobi_residual.c").read_text()
    assert f".bench_arrays = {preflight.BENCH_ARRAYS['jacobi_residual']}," in jacobi


def test_gpu_state_from_nvidia_smi(machine):
    machine.setenv("FAKE_SMI_APPS", "17, a b, c, 12")
    state = gpus.gpu_state(UUID)
    assert state == gpus.GpuState(81000, 81559, False, ((17, "a b, c", 12),))
    assert gpus.gpu_state("GPU-other") is None
    assert gpus.smi_facts()["driver"] == "580.159.04"


def test_the_visible_gpu_is_the_one_cuda_picks(machine):
    machine.setenv("FAKE_SMI_LIST", "0, GPU-a1, 8.0, A100;1, GPU-b2, 9.0, H100, 80GB")
    assert gpus.visible_gpu().name == "A100"                          # unset: the first listed
    for visible, name in (("1", "H100, 80GB"), ("GPU-b2", "H100, 80GB"), ("GPU-b", "H100, 80GB"),
                          ("0,1", "A100"), ("", None), ("2", None), ("GPU-c", None)):
        machine.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert getattr(gpus.visible_gpu(), "name", None) == name, visible
    machine.setenv("FAKE_SMI_LIST", "")
    machine.delenv("CUDA_VISIBLE_DEVICES")
    assert gpus.visible_gpu() is None


def test_an_architecture_from_a_compute_capability():
    assert [gpus.arch(cc) for cc in ("9.0", "12.0", "7.5", "9", "", None, "9.0a")] == [90, 120, 75, None, None, None, None]


def pairs(found):
    return [(f.level, f.message) for f in found]


def test_the_refusal_names_the_release_that_builds_for_the_gpu():
    """The toolkits.mk row of the toolkit's release, not its major: CUDA 12.4 has no Blackwell."""
    ((level, message),) = pairs(preflight.architecture_findings("NVIDIA RTX PRO 6000", "12.0", "12.4"))
    assert level == "refuse" and "newer than CUDA 12.4 builds for (7.0 to 9.0)" in message
    assert "build with CUDA 12.8 or later: CUDA_HOME=/path/to/cuda-12.8" in message and "compute_90" in message
    assert preflight.architecture_findings("NVIDIA RTX PRO 6000", "12.0", "12.4", cuda_arch="compute_90") == []
    assert preflight.architecture_findings("NVIDIA RTX PRO 6000", "12.0", "12.8") == []
    ((level, message),) = pairs(preflight.architecture_findings("Tesla V100", "7.0", "13.0"))
    assert "build with CUDA 12.0 to 12.9" in message
    ((level, message),) = pairs(preflight.architecture_findings("Tesla T4", "7.5", "11.8"))
    assert level == "refuse" and "CUDA 11.8 is older than the kit supports (CUDA 12.0 and later" in message
