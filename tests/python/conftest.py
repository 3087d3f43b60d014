"""Shared fixtures and helpers: a fake lab whose `build` writes fake check and bench programs speaking the real
protocol (grader/README.md), with the submission's text baked in; they say on stderr what they saw (`ran: ...`),
and kernel.o (with a C compiler) defines the launcher for the symbol check.  No GPU, no real build.

Markers in the submission's kernel.cu:

    COMPILE_ERROR   make fails like nvcc does
    NO_CHECK_LIB    make fails with lab.mk's "kit error: the Check ... library is not installed"
    WRONG           check: the second case fails (incorrect result)
    CUDA_ERROR      check: the second case fails with "CUDA error: ..."
    HANG            check: hangs at the second case (the suite limit is 3 s)
    CASE_TIMEOUT    check: Check reports the second case as timed out, then hangs in the next
                    (in one-process mode, CK_FORK=no, it hangs in the second)
    CALLS=a,b       kernel.o calls the functions a and b
    NO_GPU          check (one-process mode) and bench --probe exit 2, as without a GPU
    PRINTF          check and bench print a line on stdout, as a kernel's printf does
    NO_THEN_BENCH   check ignores the grader's request to time the kernel after its cases (the bench
                    program times it), as a check program of an earlier kit would
    OTHER_STREAM    bench: the audit saw the kernel on another stream than the launcher's
    NO_AUDIT        bench: the launch audit could not run (no CUPTI)
    SMEM=N          bench: the audited kernel had N bytes of static shared memory per block
    KERNEL=NAME     bench: the audited kernel's (mangled) name, else _Z8stencil5PKfPfii
    BENCH_BAD_OUTPUT bench: output_ok false
    BENCH_CUDA      bench: exits 3 (CUDA error)
    RATIO=0.45      bench: ratio (default 0.85: full points) with copy bandwidth 3000 GB/s
The bench markers hold for the timed run however it runs: asked to (STENCIL_THEN_BENCH=1), the fake
check runs the fake bench's code itself after its cases pass in one-process mode, as the real one does.
    DIVREM          kernel.ptx holds integer div instructions, and the machine code an I2F.RP
    SHARED          kernel.ptx declares shared memory

The machine code of the fake bench is what fake/cuobjdump prints (the CUOBJDUMP variable names it
to the grader): kernels stencil5 (LDG), tiled (STS, LDS) and plain, as `cuobjdump -sass` lays them out.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

KIT_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
GRADE_PY = KIT_ROOT / "grader" / "grade.py"
sys.path.insert(0, str(KIT_ROOT / "grader"))
#: copydetect, for test_similarity.py: tests/install-deps.sh installs it here (pip --target), its
#: dependencies from Debian's packages.  Last on the path: an installed copy wins.
SIMILARITY_DEPS = KIT_ROOT / "build" / "similarity-deps"
if SIMILARITY_DEPS.is_dir():
    sys.path.append(str(SIMILARITY_DEPS))

FAKE_LAB = "01-fake-5pt"
#: nvcc on PATH or in /usr/local/cuda, else None.
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None)
#: Whether pkg-config finds the Check library (the real lab builds need it).
HAVE_CHECK = bool(shutil.which("pkg-config")) and subprocess.run(["pkg-config", "--exists", "check"]).returncode == 0
#: A GPU the driver lists (nvidia-smi -L): the tests that run a real lab's programs on it need one.
HAVE_GPU = bool(shutil.which("nvidia-smi")) and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0

BASE_LAB_JSON = {
    "lab": FAKE_LAB,
    "number": 1,
    "title": "Fake 5-point sweep",
    "api": "stencil2d_sweep",
    "tolerance": {"rtol": 1e-5, "atol": 1e-6},
    "check": {"case_timeout_s": 2, "suite_timeout_s": 3},
    "bench": {"nx": 1024, "ny": 512, "nz": 1, "steps": 1, "repetitions": 20, "timeout_s": 10},
    "constraints": {"shared_memory": False, "no_div_rem": False, "forbidden_calls": []},
    "points": {"correctness": 60, "performance": 40},
    "targets": {"generic": {"floor": 0.30, "target": 0.60},
                "Fake GPU 80GB": {"floor": 0.40, "target": 0.80, "calibrated": "test table"}},
}

FAKE_CHECK = r'''
import os, sys, time
src = SRC
CASES = [("basic", 0, "nx=1 ny=1"), ("basic", 1, "nx=33 ny=9"), ("edges", 2, "nx=1 ny=64")]
if sys.argv[1:] == ["--list"]:
    for tcase, it, label in CASES:
        print(f"{tcase}\t{it}\t{label}")
    sys.exit(0)
nofork = os.environ.get("CK_FORK") == "no"
chosen = os.environ.get("STENCIL_CASES")
print("ran: check SEED=" + os.environ.get("SEED", ""), "CK_FORK=" + os.environ.get("CK_FORK", ""),
      "STENCIL_CASES=" + (chosen or ""), "uid=" + str(os.getuid()), file=sys.stderr, flush=True)
fd = os.environ.get("STENCIL_CHANNEL_FD")
log = os.fdopen(int(fd), "w") if fd else sys.stdout
log.write("seed: " + os.environ.get("SEED", "777") + "\n")
if nofork:
    if "NO_GPU" in src:
        print("no NVIDIA GPU or driver found on this machine (CUDA says: no CUDA-capable device is detected)",
              file=sys.stderr)
        sys.exit(2)
    log.write('device: {"name": "Fake GPU 80GB", "cc": "9.0", "sm_count": 132}\n')
    log.flush()
    if os.environ.get("STENCIL_GO_FD"):     # a class grading: the cases start at the grader's go
        if os.read(int(os.environ["STENCIL_GO_FD"]), 1) != b"g":
            sys.exit(65)
# the cases start here
if "PRINTF" in src:
    print("hello from the kernel: x = 3")
log.write('<?xml version="1.0"?>\n<testsuites xmlns="http://check.sourceforge.net/ns">\n'
          '  <datetime>2026-01-01 00:00:00</datetime>\n  <suite>\n    <title>fake</title>\n')
log.flush()
failed = 0
for i, (tcase, it, label) in enumerate(CASES):
    if chosen is not None and str(it) not in chosen.split(","):
        continue
    result, message = "success", "Passed"
    if i == 1 and "HANG" in src:
        time.sleep(3600)
    if i == 2 and "CASE_TIMEOUT" in src:
        time.sleep(3600)
    if i == 1 and "CASE_TIMEOUT" in src:
        if nofork:
            time.sleep(3600)            # no timeouts without fork: the grader stops it
        result, message = "error", "Test timeout expired"
    if i == 1 and "WRONG" in src:
        result, message = "failure", label + ": 2 mismatches; first at (x=3, y=4): got 1 want 2"
    if i == 1 and "CUDA_ERROR" in src:
        result, message = "failure", "CUDA error: an illegal memory access was encountered"
    failed += result != "success"
    log.write(f'    <test result="{result}">\n      <path>.</path>\n      <fn>check_01.c:10</fn>\n'
              f'      <id>t_case</id>\n      <iteration>{it}</iteration>\n'
              f'      <duration>0.01</duration>\n      <description>{tcase}</description>\n'
              f'      <message>{message}</message>\n    </test>\n')
    log.flush()
log.write("  </suite>\n  <duration>0.1</duration>\n</testsuites>\n")
log.flush()
if nofork and not failed and os.environ.get("STENCIL_THEN_BENCH") == "1" and "NO_THEN_BENCH" not in src:
    log.write("bench:\n")                    # the timed run in this process, as check_runner.c does
    log.flush()
    sys.argv = [sys.argv[0], "--json", "-", "--seed", os.environ.get("SEED", "777")]
    exec(BENCH)                             # the fake bench, baked in by bake.py
    sys.exit(0)
sys.exit(1 if failed else 0)
'''

FAKE_BENCH = r'''
import json, os, re, sys
src = SRC
fd = os.environ.get("STENCIL_CHANNEL_FD")
channel = os.fdopen(int(fd), "w", closefd=False) if fd else sys.stdout
if sys.argv[1:2] == ["--probe"]:
    if "NO_GPU" in src:
        print("no NVIDIA GPU or driver found on this machine", file=sys.stderr)
        sys.exit(2)
    json.dump({"device": "Fake GPU 80GB", "cc": "9.0", "sm_count": 132, "l2_bytes": 52428800,
               "global_mem_bytes": 85e9, "mem_free_bytes": 80e9}, channel)
    sys.exit(0)
print("ran: bench " + " ".join(sys.argv[1:]), file=sys.stderr, flush=True)
if "PRINTF" in src:
    print("hello from the kernel: x = 3", flush=True)
if "BENCH_CUDA" in src:
    print("CUDA error: too many resources requested for launch (kernel.cu:12)", file=sys.stderr)
    sys.exit(3)
m = re.search(r"RATIO=([0-9.]+)", src)
ratio = float(m.group(1)) if m else 0.85
out = sys.argv[sys.argv.index("--json") + 1]
seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 1
launches = [{"launcher": "stencil2d_sweep", "kind": "kernel",
             "name": re.search(r"KERNEL=(\S+)", src).group(1) if "KERNEL=" in src else "_Z8stencil5PKfPfii",
             "on_launcher_stream": "OTHER_STREAM" not in src, "stream": 14 if "OTHER_STREAM" in src else 13,
             "count": 3, "grid": [4, 37, 1], "block": [32, 16, 1],
             "static_smem": int(re.search(r"SMEM=(\d+)", src).group(1)) if "SMEM=" in src else 0,
             "dynamic_smem": 0, "registers": 32, "ms": 0.3}]
audit = {"status": "unavailable" if "NO_AUDIT" in src else "ok",
         "message": "CUPTI's activity API is not usable here: fake" if "NO_AUDIT" in src else "",
         "calls": 3, "lost": 0, "launches": [] if "NO_AUDIT" in src else launches}
json.dump({"device": "Fake GPU 80GB", "cc": "9.0", "sm_count": 132, "nx": 1024, "ny": 512, "nz": 1,
           "steps": 1, "scaled_down": False, "note": "", "array_bytes": 2097152, "repetitions": 20,
           "precision": 0.004,
           "ms_median": 0.002, "ms_min": 0.0019, "ms_max": 0.0021, "bytes_compulsory": 4194304,
           "gbps": 3000.0 * ratio, "copy_gbps": 3000.0, "copy_memcpy_gbps": 2900.0,
           "copy_kernel_gbps": 3000.0, "ratio": ratio, "output_ok": "BENCH_BAD_OUTPUT" not in src,
           "output_message": "cell (5, 7): got nan want 0.25" if "BENCH_BAD_OUTPUT" in src else "",
           "audit": audit, "seconds": {"context": 0.3, "copy_probe": 0.01, "calls": 0.1, "total": 0.41},
           "seed": seed}, channel if out == "-" else open(out, "w"))
channel.flush()
'''

PLAIN_PTX = """//
// Generated by NVIDIA NVVM Compiler (trimmed)
.version 9.0
.target sm_90
.address_size 64

.visible .entry stencil5(
\t.param .u64 stencil5_param_0,
\t.param .u32 stencil5_param_1
)
{
\t.reg .b32 \t%r<4>;
\tmul.hi.s32 \t%r2, %r1, 1840700270;
\tret;
}
"""

FAKE_MAKEFILE = """\
LAB := $(notdir $(CURDIR))
KERNEL := $(if $(wildcard $(IMPL)/$(LAB)/kernel.cu),$(IMPL)/$(LAB)/kernel.cu,$(IMPL)/kernel.cu)
build:
\t@mkdir -p $(BUILD_DIR)
\t@if grep -q COMPILE_ERROR $(KERNEL); then echo "$(KERNEL)(3): error: identifier \\"oops\\" is undefined"; \\
\t  echo "1 error detected in the compilation of \\"kernel.cu\\"."; exit 1; fi
\t@if grep -q NO_CHECK_LIB $(KERNEL); then echo "kit error: the Check unit-testing library is not installed" >&2; \\
\t  exit 2; fi
\t@PYTHON@ fake/bake.py $(KERNEL) $(BUILD_DIR)
\t@cp fake/ptxas.log $(BUILD_DIR)/
\t@if grep -q DIVREM $(KERNEL); then cp fake/div.ptx $(BUILD_DIR)/kernel.ptx; \\
\t elif grep -q SHARED $(KERNEL); then cp fake/shared.ptx $(BUILD_DIR)/kernel.ptx; \\
\t else cp fake/plain.ptx $(BUILD_DIR)/kernel.ptx; fi
\t@echo "IMPL=$(IMPL) CUDA_ARCH=$(CUDA_ARCH)" > $(BUILD_DIR)/make.args
\t@nice > $(BUILD_DIR)/niceness
"""

#: fake/bake.py KERNEL BUILD_DIR: the fake programs with the submission baked in, and kernel.o.
FAKE_BAKE = r'''
import os, re, shutil, subprocess, sys
kernel, build = sys.argv[1], sys.argv[2]
src = open(kernel).read()
here = os.path.dirname(os.path.abspath(__file__))
bench = open(os.path.join(here, "bench")).read().split("\n", 1)[1]
for name in ("check", "bench"):
    body = open(os.path.join(here, name)).read()
    shebang, rest = body.split("\n", 1)
    path = os.path.join(build, name)
    open(path, "w").write(f"{shebang}\nSRC = {src!r}\nBENCH = {bench!r}\n{rest}")
    os.chmod(path, 0o755)
cc = shutil.which("cc") or shutil.which("gcc")
obj = os.path.join(build, "kernel.o")
if os.path.exists(obj):
    os.unlink(obj)
if cc:
    m = re.search(r"CALLS=([\w,]+)", src)
    calls = [c for c in (m.group(1).split(",") if m else []) if c]
    c_src = "".join(f"extern void {c}(void);\n" for c in calls) + "extern int cudaLaunchKernel(void);\n"
    c_src += "void stencil2d_sweep(void) { cudaLaunchKernel(); " + "".join(f"{c}(); " for c in calls) + "}\n"
    c_file = os.path.join(build, "kernel_stub.c")
    open(c_file, "w").write(c_src)
    subprocess.run([cc, "-c", "-fno-builtin", c_file, "-o", obj], check=True)
'''

#: fake/cuobjdump -sass BENCH: the student's machine code, with an integer division when BENCH's
#: baked source says DIVREM, and the shared-memory kernel `tiled` when it says SHARED or names it.
FAKE_CUOBJDUMP = r'''
import sys
src = open(sys.argv[-1]).read()
print("\nFatbin elf code:\n================\narch = sm_90\ncode version = [1,8]\nhost = linux\n"
      "compile_size = 64bit\nidentifier = kernel.cu\n\n\tcode for sm_90")
def function(name, *ops):
    print(f"\t\tFunction : {name}")
    for i, op in enumerate(ops + ("EXIT ;",)):
        print(f"        /*{16 * i:04x}*/                   {op}")
function("_Z8stencil5PKfPfii", "LDG.E R2, desc[UR4][R2.64] ;", *(["I2F.RP R0, R7 ;"] if "DIVREM" in src else []))
if "SHARED" in src or "_Z5tiled" in src:
    function("_Z5tiledPKfPfi", "STS [R7+UR4], R0 ;", "LDS R9, [R6+UR4] ;")
function("_Z5plainPKfPfi", "LDG.E R2, desc[UR4][R2.64] ;")
'''

GOOD_KERNEL = """\
#include "stencil_lab.h"
__global__ void stencil5(const float *in, float *out, int nx, int ny) { /* ... */ }
extern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,
                                stencil2d_coeffs c, cudaStream_t stream)
{
    stencil5<<<1, 1, 0, stream>>>(d_in, d_out, nx, ny);
}
"""


def lab_json(**changes) -> dict:
    """BASE_LAB_JSON with keys replaced, nested ones named a__b (check__suite_timeout_s=5); KeyError deletes."""
    data = json.loads(json.dumps(BASE_LAB_JSON))
    for key, value in changes.items():
        *path, last = key.split("__")
        node = functools.reduce(dict.__getitem__, path, data)
        if value is KeyError:
            del node[last]
        else:
            node[last] = value
    return data


def fake_spec(folder: Path, **changes):
    """labspec.load of lab_json(**changes), written as folder/FAKE_LAB/lab.json."""
    from stencil_grader.base import labspec
    path = folder / FAKE_LAB / "lab.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(lab_json(**changes)))
    return labspec.load(path)


def _runnable_by_all(path: str) -> bool:
    """True when every folder on the way to path can be entered by anyone and path run by anyone."""
    p = Path(path).resolve()
    return all(os.stat(d).st_mode & stat.S_IXOTH for d in [p, *p.parents])


#: The interpreter of fake programs: it must run as the sandbox user (nobody) too.
FAKE_PYTHON = sys.executable if _runnable_by_all(sys.executable) else shutil.which("python3", path="/usr/bin:/bin") \
    or sys.executable


def write_script(path: Path, code: str) -> Path:
    """Write an executable Python program at path (an interpreter anyone may run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{FAKE_PYTHON}\n{code}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class FakeKit:
    """A kit directory with one fake lab, and helpers to make submissions."""

    def __init__(self, root: Path):
        self.root = root
        self.lab_dir = root / "labs" / FAKE_LAB
        self.fake = self.lab_dir / "fake"
        self.fake.mkdir(parents=True)
        (self.lab_dir / "Makefile").write_text(FAKE_MAKEFILE.replace("@PYTHON@", sys.executable))
        (self.fake / "bake.py").write_text(FAKE_BAKE)
        write_script(self.fake / "check", FAKE_CHECK)
        write_script(self.fake / "bench", FAKE_BENCH)
        write_script(self.fake / "cuobjdump", FAKE_CUOBJDUMP)
        (self.fake / "ptxas.log").write_text((DATA / "ptxas_two_arch.log").read_text())
        (self.fake / "plain.ptx").write_text(PLAIN_PTX)
        (self.fake / "div.ptx").write_text((DATA / "kernels_div.ptx").read_text())
        (self.fake / "shared.ptx").write_text((DATA / "kernels_shared.ptx").read_text())
        self.set_lab_json()

    def set_lab_json(self, **changes) -> dict:
        """Write lab.json: lab_json(**changes)."""
        data = lab_json(**changes)
        (self.lab_dir / "lab.json").write_text(json.dumps(data, indent=2))
        return data

    def submission(self, name: str, text: str = GOOD_KERNEL, nested: bool = False) -> Path:
        """A submission folder holding kernel.cu (or <lab>/kernel.cu when nested)."""
        folder = self.root / "submissions" / name
        target = folder / FAKE_LAB if nested else folder
        target.mkdir(parents=True, exist_ok=True)
        (target / "kernel.cu").write_text(text)
        return folder


@pytest.fixture
def fake_kit(tmp_path, monkeypatch) -> FakeKit:
    kit = FakeKit(tmp_path / "kit")
    monkeypatch.setenv("CUOBJDUMP", str(kit.fake / "cuobjdump"))
    return kit


def put(subs: Path, student: str, lab: str = FAKE_LAB, text: str = GOOD_KERNEL, name: str = "kernel.cu") -> None:
    """subs/student/lab/name holding text: a class folder's layout."""
    (subs / student / lab).mkdir(parents=True, exist_ok=True)
    (subs / student / lab / name).write_text(text)


def grade_class(subs: Path, out: Path, kit: FakeKit | None = None, **kw):
    """backend.grade_class of the class folder subs into out (on kit, else plan.kit_root()): quiet, without GPUs."""
    from stencil_grader.classes import backend, gpupool
    kw.setdefault("progress", lambda line: None)
    kw.setdefault("gpu_set", gpupool.GpuSet([]))
    return backend.grade_class(subs, out, kit_root=kit.root if kit else None, **kw)


def recording_row(lab: str, stage: str, wall: float = 2.0, cpu: float = 1.0, rss: float = 300.0, n: int = 5) -> dict:
    """A row of a class recording (classes/resources.py): median wall and CPU seconds, peak MiB."""
    return {"id": f"{lab[:2]}/{stage}", "lab": lab, "stage": stage, "n": n, "wall_s_median": wall,
            "wall_s_max": 2 * wall, "cpu_s_median": cpu, "peak_rss_mib_max": rss}


def write_recording(path: Path, rows: list[dict], device: str = "Fake GPU 80GB", grader: float = 80.0) -> Path:
    """A class recording (instructor/records.py kind "class") of these rows."""
    path.write_text(json.dumps({"record": "class", "format": 1, "provisional": False, "source": "test",
                                "date": "2026-01-01", "device": {"name": device}, "grader_peak_rss_mib": grader,
                                "rows": rows}))
    return path


def run_grade(*args, timeout=120, env=None) -> subprocess.CompletedProcess:
    """Run grader/grade.py as a student would; NO_COLOR set, output captured."""
    full_env = dict(os.environ, NO_COLOR="1")
    full_env.pop("SEED", None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, str(GRADE_PY), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=full_env)


def build_fake_libcuda(folder: Path) -> Path:
    """data/fake_libcuda.c built as folder/libcuda.so.1 (the probe's fake driver, shared by
    test_gpupool.py and test_preflight.py); pytest.skip without a C compiler.  Returns folder."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake libcuda.so.1")
    subprocess.run([cc, "-shared", "-fPIC", "-o", folder / "libcuda.so.1", DATA / "fake_libcuda.c"], check=True)
    return folder
