"""One grading of one (student, lab) in a process of its own, what every back end runs (grader/README.md, section 9,
`worker.py`): an argument list (no shell; the build copies kernel.cu under a name of its own, so a folder name reaches
no make), a clean environment (clean_env), its own TMPDIR under temp_root and a time limit (time_limit_s)."""

import contextlib
import fcntl
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec, process, sandbox
from ..grading import build, pipeline, score
from . import grades
from .plan import Task
from .submissions import ClassError

GRADE_PY = KIT_ROOT / "grader" / "grade.py"
#: Environment variables a grading process keeps; everything else is dropped.
ENV_KEEP = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH",
            "CUDA_HOME", "CUDA_PATH", "CUOBJDUMP", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
            sandbox.SANDBOX_UIDS_ENV, sandbox.THREADS_ENV) + sandbox.CUDA_ENV_KEEP
#: Seconds a grading process may take beyond its stages' own limits (Python start-up, the report).
SLACK_S = 120.0
#: The CPU priority of a build stage's process (nice(1): 19, the lowest): builds run beside other gradings' GPU
#: stages, whose work on the CPU (the check program's host side, its CUDA calls) then holds the GPU the longer the
#: less CPU it gets.  A build is never slower for it on an idle CPU (grader/README.md, section 9).
BUILD_NICENESS = 19


def clean_env() -> dict[str, str]:
    """The grading process's environment: ENV_KEEP of ours, and NO_COLOR."""
    return {"PATH": os.defpath, **{k: v for k, v in os.environ.items() if k in ENV_KEEP}, "NO_COLOR": "1"}


def time_limit_s(spec: labspec.LabSpec, jobs: int, gpus: int = 1, stage: str = "all") -> float:
    """Seconds one grading process of `spec` may take: stage "build", that half of the pipeline's stages
    (pipeline.stage_seconds); "gpu", the other half after waiting behind at most ceil(jobs / gpus) - 1 other gradings'
    on each GPU (jobs gradings' GPU stages at once share `gpus` GPUs); "all", both.  SLACK_S more for the process."""
    build_s = pipeline.stage_seconds(spec, "build")
    if stage == "build":
        return build_s + SLACK_S
    waits = math.ceil(max(1, jobs) / max(1, gpus)) - 1
    gpu_s = pipeline.stage_seconds(spec, "gpu") * (1 + waits)
    return gpu_s + SLACK_S if stage == "gpu" else build_s + gpu_s + SLACK_S


def temp_root() -> str:
    """Where gradings make their temporary folders: TMPDIR, else /tmp or /var/tmp when TMPDIR is a
    path make cannot take (a space); ClassError when none is usable."""
    for folder in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK) \
                and build.make_path_problem(Path(folder)) is None:
            return folder
    raise ClassError(f"no temporary folder make can build in: TMPDIR {tempfile.gettempdir()!r} "
                     f"{build.make_path_problem(Path(tempfile.gettempdir()))}; set TMPDIR to a folder without it")


def prepare_harness(lab_dirs: list[Path], arch: str | None = None, lock: Path | None = None) -> list[str]:
    """Build the kit's harness library for `arch` and each lab's part of it (lab.mk's `harness` target, once per lab
    of lab_dirs, the same lab named once) before builds run in parallel, which would each build them; why not, a
    line per lab that failed (each build then makes them).  lock: a file whose POSIX lock (fcntl.lockf, which NFS
    passes between nodes) the batch tasks take around this."""
    notes = []
    with open(lock, "a") if lock is not None else contextlib.nullcontext() as handle:
        try:
            if handle is not None:
                fcntl.lockf(handle, fcntl.LOCK_EX)
        except OSError:                       # a filesystem without locks: build unlocked
            pass
        for lab_dir in dict.fromkeys(lab_dirs):
            run = process.run(["make", "--no-print-directory", "-s", "-C", str(lab_dir), "harness"]
                              + ([f"CUDA_ARCH={arch}"] if arch else []), build.DEFAULT_TIMEOUT_S)
            # a lab without lab.mk's harness target (the tests' fake labs) has nothing to prepare
            if run.returncode != 0 and "No rule to make target" not in run.stdout + run.stderr:
                notes.append(f"the harness of {Path(lab_dir).name} could not be built first ({run.describe()}): "
                             "each build makes it")
    return notes


def grade(task: Task, submissions: Path, limit_s: float, stage: str = "all", build_dir: Path | None = None,
          arch: str | None = None, gpu_locks: Path | None = None, gpus: str | None = None,
          env: dict[str, str] | None = None) -> tuple[dict, str]:
    """(report, what the process printed) of one grading: "grader_error" when the process writes no report, dies or
    runs past limit_s.  stage: "all", or pipeline.py's halves "build" and "gpu", which share build_dir (None: a
    temporary folder); env: extra variables.  A missing kernel.cu gives a "missing" placeholder, one over
    build.MAX_SOURCE_BYTES "compile_error": neither runs anything."""
    if task.source is None:
        return grades.placeholder(task.spec, task.student, score.MISSING, task.why_missing), task.why_missing + "\n"
    if why := build.size_problem(task.source):
        return grades.placeholder(task.spec, task.student, "compile_error", why), why + "\n"
    with tempfile.TemporaryDirectory(prefix=f"grade-{task.lab}-", dir=temp_root()) as tmp:
        os.chmod(tmp, 0o711)            # the sandbox user must reach its own directory inside (sandbox.SandboxDir)
        json_path = Path(tmp) / "report.json"
        nice = shutil.which("nice") if stage == "build" else None       # coreutils; without it, at our priority
        argv = [nice, "-n", str(BUILD_NICENESS)] if nice else []
        argv += [sys.executable, GRADE_PY, "lab", task.spec.lab_dir, "--impl", submissions / task.student,
                "--build-dir", build_dir or Path(tmp) / "build", "--json", json_path]
        argv += (["--stage", stage] if stage != "all" else []) + (["--arch", arch] if arch else [])
        argv += (["--gpu-locks", gpu_locks] + (["--gpus", gpus] if gpus is not None else [])) if gpu_locks else []
        run = process.run(argv, limit_s, env=dict(clean_env(), TMPDIR=tmp, **(env or {})), cwd=tmp)
        try:
            report = json.loads(json_path.read_text())
        except (OSError, json.JSONDecodeError):
            report = None
        if report is None or run.timed_out or run.returncode not in (0, 1):
            last = [line for line in (run.stderr or run.stdout).strip().splitlines() if line.strip()]
            why = f"the grading process {run.describe()}" + (f": {last[-1].strip()}" if last else "")
            report = grades.placeholder(task.spec, task.student, score.GRADER_ERROR, why)
    return report, run.stdout + run.stderr
