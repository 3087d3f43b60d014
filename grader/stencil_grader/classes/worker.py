"""One grading of one (student, lab) in a process of its own, what every back end runs:

    grade.py lab LABDIR --impl SUBMISSIONS/<student> --build-dir DIR --json FILE
                 [--stage build|gpu] [--arch ARCH] [--gpu-locks LOCKS --gpus 0,2]

an argument list (no shell; the build copies kernel.cu under a name of its own, so a folder name
reaches no make), a clean environment (clean_env), its own TMPDIR under temp_root and a time
limit (time_limit_s).  A process that writes no report, dies or runs past its limit gives a
"grader_error" report saying what happened.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec, process, sandbox
from ..grading import build, pipeline
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
STAGES = pipeline.STAGES


def clean_env() -> dict[str, str]:
    """The grading process's environment: ENV_KEEP of ours, and NO_COLOR."""
    env = {k: v for k, v in os.environ.items() if k in ENV_KEEP}
    env["NO_COLOR"] = "1"
    env.setdefault("PATH", os.defpath)
    return env


def threads_per_grading(gpus: int) -> int:
    """The CPU threads each grading's programs get (sandbox.THREADS_ENV) when `gpus` GPUs grade at
    once on this host: its usable CPUs shared evenly, at least one each.  The GPU stages, one per
    GPU, are the gradings that use more than one thread (the CPU reference of the cases); a build
    is one nvcc at a time."""
    return max(1, sandbox.usable_cpus() // max(1, gpus))


def time_limit_s(spec: labspec.LabSpec, jobs: int, gpus: int = 1, stage: str = "all") -> float:
    """Seconds one grading process of `spec` may take.

    stage "build" or "gpu": that half of the pipeline's stages (pipeline.stage_seconds);
    "all": the build, then the GPU stages after waiting for a free GPU behind at most
    ceil(jobs / gpus) - 1 other gradings' GPU stages on each GPU (jobs gradings at once
    share `gpus` GPUs).  SLACK_S more for the process itself.
    """
    if stage != "all":
        return pipeline.stage_seconds(spec, stage) + SLACK_S
    waits = math.ceil(max(1, jobs) / max(1, gpus)) - 1
    return (pipeline.stage_seconds(spec, "build") + pipeline.stage_seconds(spec, "gpu") * (1 + waits)
            + SLACK_S)


def temp_root() -> str:
    """The folder under which gradings make their temporary folders: the system's (TMPDIR), or
    /tmp or /var/tmp when that one is a path make cannot take (a space); ClassError when
    none is usable."""
    for folder in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK) \
                and build.make_path_problem(Path(folder)) is None:
            return folder
    raise ClassError(f"no temporary folder make can build in: TMPDIR {tempfile.gettempdir()!r} "
                     f"{build.make_path_problem(Path(tempfile.gettempdir()))}; set TMPDIR to a folder without it")


def prepare_harness(lab_dir: Path, arch: str | None = None, lock: Path | None = None) -> str:
    """Build the kit's harness library for `arch` (lab.mk's `harness` target) once, before builds
    run in parallel; returns "" or a note saying why it could not (the builds then make it
    themselves).

    Every lab build links KIT/build/harness/<arch>/libharness.a and makes it when it is missing:
    several builds starting at once (a class's --jobs, a batch array's tasks) would all write it
    at the same time, and a build could link a half-written library.  lock: a file whose POSIX
    lock (fcntl.lockf, which NFS passes between nodes) the batch tasks take around this, so that
    one builds it and the others find it made."""
    argv = ["make", "--no-print-directory", "-s", "-C", str(lab_dir), "harness"]
    if arch:
        argv.append(f"CUDA_ARCH={arch}")
    handle = None
    if lock is not None:
        import fcntl
        try:
            handle = open(lock, "a")
            fcntl.lockf(handle, fcntl.LOCK_EX)
        except OSError:                       # a filesystem without locks: build unlocked
            pass
    try:
        run = process.run(argv, build.DEFAULT_TIMEOUT_S)
    finally:
        if handle is not None:
            handle.close()
    if run.returncode == 0:
        return ""
    text = (run.stdout + run.stderr).strip()
    if "No rule to make target" in text:      # a lab without lab.mk's harness (the tests' fake labs)
        return ""
    return f"the harness library could not be built first ({run.describe()}): each build makes it"


def command(task: Task, submissions: Path, build_dir: Path, json_path: Path, stage: str = "all",
            arch: str | None = None, gpu_locks: Path | None = None, gpus: str | None = None) -> list:
    """The `grade.py lab` command line of one grading (module docstring)."""
    argv = [sys.executable, GRADE_PY, "lab", task.spec.lab_dir, "--impl", submissions / task.student,
            "--build-dir", build_dir, "--json", json_path]
    if stage != "all":
        argv += ["--stage", stage]
    if arch:
        argv += ["--arch", arch]
    if gpu_locks is not None:
        argv += ["--gpu-locks", gpu_locks]
        if gpus is not None:
            argv += ["--gpus", gpus]
    return argv


def grade(task: Task, submissions: Path, limit_s: float, stage: str = "all", build_dir: Path | None = None,
          arch: str | None = None, gpu_locks: Path | None = None, gpus: str | None = None,
          env: dict[str, str] | None = None) -> tuple[dict, str]:
    """Grade one task in its own process; returns (report, what the process printed).

    stage: "all" (build and GPU stages), "build" or "gpu" (pipeline.py's halves).
    build_dir: where the build goes (required for "build" and "gpu", which share it);
        None: a temporary folder, removed afterwards.
    env: extra environment variables for the grading process.
    The report is the process's JSON report, or a "grader_error" placeholder when it wrote
    none, died or ran past limit_s; a missing kernel.cu gives a "missing" placeholder and
    runs nothing, and so does a kernel.cu over build.MAX_SOURCE_BYTES ("compile_error",
    saying so).  Never raises for what the student's code does; ClassError when no
    temporary folder is usable (temp_root).
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    if task.source is None:
        return grades.placeholder(task.spec, task.student, grades.MISSING, task.why_missing), ""
    if why := build.size_problem(task.source):
        return grades.placeholder(task.spec, task.student, "compile_error", why), why + "\n"
    if stage != "all" and build_dir is None:
        raise ValueError(f"stage {stage!r} needs a build_dir shared by both halves")
    with tempfile.TemporaryDirectory(prefix=f"grade-{task.lab}-", dir=temp_root()) as tmp:
        # 0711: the sandbox user must reach its own directory inside (sandbox.SandboxDir).
        os.chmod(tmp, 0o711)
        json_path = Path(tmp) / "report.json"
        argv = command(task, submissions, build_dir or Path(tmp) / "build", json_path, stage, arch, gpu_locks,
                       gpus)
        run = process.run(argv, limit_s, env=dict(clean_env(), TMPDIR=tmp, **(env or {})), cwd=tmp)
        log = run.stdout + run.stderr
        report = None
        if json_path.is_file():
            try:
                report = json.loads(json_path.read_text())
            except json.JSONDecodeError:
                report = None
        if report is None or run.timed_out or run.returncode not in (0, 1):
            last = [line for line in (run.stderr or run.stdout).strip().splitlines() if line.strip()]
            why = f"the grading process {run.describe()}" + (f": {last[-1].strip()}" if last else "")
            report = grades.placeholder(task.spec, task.student, grades.GRADER_ERROR, why)
    return report, log
