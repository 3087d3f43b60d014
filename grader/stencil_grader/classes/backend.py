"""Who runs a class's gradings, and where: the back ends, behind one small interface.

    backend.check()                     refuse early (ClassError) what this engine cannot do
    gradings = backend.run(plan, say)   grade plan.tasks; the gradings, or None when they
                                        finish later (a batch system: its merge job writes
                                        the class files)

Every back end runs the same worker (worker.grade: one `grade.py lab` process per
grading) and leaves the same files (outdir.py); only the scheduling differs:

    LocalBackend   this host: `jobs` gradings at once in threads (builds in parallel on the
                   CPUs), each grading's GPU stages on one GPU of the pool at a time
                   (base/locks.py GpuPool: one lock file per GPU), every GPU probed first
                   (gpupool.py)
    SlurmBackend   a cluster (slurm.py): a CPU job array builds, a GPU job array runs the GPU
                   stages, a merge job writes the class files (batch.py: the run folder and
                   the tasks, which another batch engine would reuse as they are)

Another engine (HTCondor, PBS, a cloud queue) is one module: a Backend whose run()
submits batch.py's tasks to it.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from . import gpupool, outdir, worker
from .classgrade import ClassPlan, Grading
from .submissions import ClassError


class Backend(ABC):
    """A way to run a class's gradings (module docstring).  notes: lines for the class summary."""

    name = "backend"

    def __init__(self) -> None:
        self.notes: list[str] = []

    def check(self) -> None:
        """Raise ClassError for what makes this engine unusable here, before anything is written."""

    @abstractmethod
    def run(self, plan: ClassPlan, say: Callable[[str], None]) -> list[Grading] | None:
        """Grade plan.tasks (or submit them); the gradings in plan order, or None when they end later."""


def progress_line(g: Grading, show_gpu: bool = False) -> str:
    """One console row: student, lab, verdict, points, seconds (and the GPU, with several)."""
    gpu = ""
    if show_gpu and g.gpu and g.gpu.get("index") is not None:
        gpu = f"  GPU {g.gpu['index']}"
    return (f"{g.student:<20} {g.lab:<24} {g.verdict:<14} {g.points:6.2f}/{g.max_points:g}"
            f"  ({g.seconds:.0f} s){gpu}")


def _unusable_gpu(report: dict) -> int | None:
    """The index of the GPU a grading was handed when its GPU stages found it unusable (no GPU
    seen through it, or a crash that a broken GPU also causes), else None."""
    section = report.get("gpu") or {}
    assigned = section.get("assigned") or {}
    if assigned.get("index") is None:
        return None
    if section.get("status") == "no_gpu" or report.get("verdict") == "crash":
        return assigned["index"]
    return None


class LocalBackend(Backend):
    """Every CPU and GPU of this host (module docstring).

    jobs: gradings at once (builds run in parallel up to this; GPU stages one per GPU).
    gpus: `--gpus` ("all" or "0,2"); gpu_set: a ready gpupool.GpuSet instead (tests).
    """

    name = "local"

    def __init__(self, jobs: int, gpus: str | None = None, gpu_set: gpupool.GpuSet | None = None,
                 say: Callable[[str], None] = print):
        super().__init__()
        if jobs < 1:
            raise ClassError("--jobs must be at least 1")
        self.jobs = jobs
        self.spec = gpus
        self.gpus = gpu_set
        self.say = say

    def check(self) -> None:
        """Choose the GPUs (--gpus) and probe each; ClassError when GPUs were there but none works."""
        if self.gpus is None:
            try:
                chosen, why = gpupool.choose(self.spec)
            except ValueError as err:
                raise ClassError(str(err)) from None
            if why:
                self.notes.append(f"no GPU on this machine ({why}): every GPU stage will be not_measured")
            self.gpus = gpupool.GpuSet(chosen, say=self.say)
        self.gpus.check()
        if self.gpus.exhausted:
            raise ClassError("no usable GPU: " + "; ".join(self.gpus.notes)
                             + " (fix the GPU, or choose others with --gpus)")
        models = self.gpus.models()
        if len(models) > 1:
            self.notes.append(f"the GPUs of this host are of {len(models)} models ({', '.join(models)}): "
                              "scores compare within one model; --gpus picks one")

    def _grade(self, task: worker.Task, plan: ClassPlan, lock_dir: Path) -> Grading:
        report, log = None, ""
        if task.source is None:
            report, _ = worker.grade(task, plan.submissions, 0)
            log = report["messages"][0] + "\n"
        while report is None:
            usable = self.gpus.indices()          # "0,2"; "" when every GPU has been taken out
            if usable == "":
                report = outdir.placeholder(task.spec, task.student, "not_measured",
                                            "not measured: no usable GPU left (" + "; ".join(self.gpus.notes) + ")")
                break
            limit = worker.time_limit_s(task.spec, self.jobs, max(1, len(self.gpus.usable)))
            report, log = worker.grade(task, plan.submissions, limit, gpu_locks=lock_dir, gpus=usable)
            bad = _unusable_gpu(report)
            if bad is not None and self.gpus.suspect(bad):
                report = None                  # that GPU is out of the pool now: grade again elsewhere
        report["class"] = outdir.stamp(task.source, task.spec, "local", "local")
        outdir.save(plan.out, task.student, task.lab, report, log)
        return Grading.from_report(task.student, report)

    def run(self, plan: ClassPlan, say: Callable[[str], None]) -> list[Grading]:
        gpus = len(self.gpus.usable)
        say(f"grading {len(plan.students)} student(s) x {len(plan.specs)} lab(s), {self.jobs} at a time, "
            + (f"on {gpus} GPU(s): " + ", ".join(gpupool.describe(g) for g in self.gpus.usable) if gpus
               else "without a GPU"))
        first = next((t for t in plan.tasks if t.source is not None), None)
        if first is not None and self.jobs > 1:
            note = worker.prepare_harness(first.spec.lab_dir)
            if note:
                self.notes.append(note)
        # The GPU locks of this run's gradings: a temporary folder, never the output folder.
        lock_dir = Path(tempfile.mkdtemp(prefix="stencil-gpu-locks-"))
        lock = threading.Lock()
        gradings: list[Grading] = []
        try:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                # map() yields in the plan's order: the rows come out by student and lab.
                for g in pool.map(lambda t: self._grade(t, plan, lock_dir), plan.tasks):
                    with lock:
                        gradings.append(g)
                    say(progress_line(g, show_gpu=gpus > 1))
        finally:
            shutil.rmtree(lock_dir, ignore_errors=True)
        self.notes += [n for n in self.gpus.notes if n not in self.notes]
        return gradings
