"""Who runs a class's gradings: the back ends, behind one small interface, and grade_class (plan,
run, class files on this host).

    backend.check()              refuse early (ClassError) what this engine cannot do
    backend.run(plan, say)       grade plan.tasks, saving each report (resume.save): what was
                                 saved, or None when the gradings end later (a batch merge)

LocalBackend: this host, `jobs` gradings at once in threads, each grading's GPU stages on one GPU
of the pool (every GPU probed first); BatchEngine (batch.py): a batch system.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from ..base import sandbox
from . import classfiles, gpupool, grades, outdir, plan, resume, worker
from . import similarity as similar
from .plan import ClassPlan, Task
from .resume import Saved
from .submissions import ClassError, shown


class Backend(ABC):
    """A way to run a class's gradings (module docstring).  notes: lines for the class summary."""

    name = "backend"

    def __init__(self) -> None:
        self.notes: list[str] = []

    def check(self) -> None:
        """Raise ClassError for what makes this engine unusable here, before anything is written."""

    @abstractmethod
    def run(self, plan: ClassPlan, say: Callable[[str], None]) -> list[Saved] | None:
        """Grade plan.tasks (or submit them); what was saved, in plan order, or None when they end later."""


def progress_line(saved: Saved, show_gpu: bool = False) -> str:
    """One console row of a grading: student, lab, verdict, points ("-" when the verdict is no
    grade), seconds (and the GPU, with several), and the grade that stays when this grading
    measured nothing."""
    r = saved.report
    gpu = ((r.get("gpu") or {}).get("assigned") or {}).get("index")
    points = f"{float(r.get('points') or 0.0):6.2f}" if grades.is_grade(r) else "     -"     # no grade: no 0
    line = (f"{shown(saved.student):<20} {saved.lab:<24} {r.get('verdict'):<14} "
            f"{points}/{float(r.get('max_points') or 0.0):g}"
            f"  ({float((r.get('seconds') or {}).get('total', 0.0)):.0f} s)"
            + (f"  GPU {gpu}" if show_gpu and gpu is not None else ""))
    if saved.kept:
        line += f"  (the earlier grade stays: {saved.kept.get('verdict')}, {float(saved.kept.get('points') or 0):.2f})"
    return line


def _unusable_gpu(report: dict) -> int | None:
    """The index of the GPU a grading was handed when its GPU stages found it unusable (no GPU
    seen through it, or a crash that a broken GPU also causes), else None."""
    section = report.get("gpu") or {}
    assigned = section.get("assigned") or {}
    if assigned.get("index") is None:
        return None
    if section.get("status") == "no_gpu" or report.get("verdict") in ("crash", grades.GRADER_ERROR):
        return assigned["index"]
    return None


#: Gradings of one (student, lab) in one class run when the grader's machinery fails
#: (grader_error): the first, and one more.
GRADER_ERROR_TRIES = 2


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
        """A temporary folder make can build in; the GPUs (--gpus), each probed; ClassError when
        GPUs were there but none works."""
        worker.temp_root()
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

    def _grade(self, task: Task, plan: ClassPlan, lock_dir: Path) -> Saved:
        report, log = None, ""
        if task.source is None:
            report, _ = worker.grade(task, plan.submissions, 0)
            log = report["messages"][0] + "\n"
        tries = 0
        while report is None:
            usable = self.gpus.indices()          # "0,2"; "" when every GPU has been taken out
            if usable == "":
                report = grades.placeholder(task.spec, task.student, "not_measured",
                                            "not measured: no usable GPU left (" + "; ".join(self.gpus.notes) + ")")
                break
            gpus = max(1, len(self.gpus.usable))
            limit = worker.time_limit_s(task.spec, self.jobs, gpus)
            threads = {sandbox.THREADS_ENV: str(worker.threads_per_grading(gpus))}
            report, log = worker.grade(task, plan.submissions, limit, gpu_locks=lock_dir, gpus=usable, env=threads)
            tries += 1
            bad = _unusable_gpu(report)
            if bad is not None and self.gpus.suspect(bad):
                report = None                  # that GPU is out of the pool now: grade again elsewhere
            elif report.get("verdict") == grades.GRADER_ERROR and tries < GRADER_ERROR_TRIES:
                self.say(f"{shown(task.student)} {task.lab}: grader_error ({grades.reason(report)}): grading again")
                report = None
        report["class"] = resume.stamp(task.source, task.spec, "local", "local")
        return resume.save(plan.out, task.student, task.lab, report, log, plan.asked)

    def run(self, plan: ClassPlan, say: Callable[[str], None]) -> list[Saved]:
        gpus = len(self.gpus.usable)
        say(f"grading {len(plan.tasks)} lab(s) of {len(plan.students)} student(s), {self.jobs} at a time, "
            + (f"on {gpus} GPU(s): " + ", ".join(gpupool.describe(g) for g in self.gpus.usable) if gpus
               else "without a GPU"))
        first = next((t for t in plan.tasks if t.source is not None), None)
        if first is not None and self.jobs > 1:
            note = worker.prepare_harness(first.spec.lab_dir)
            if note:
                self.notes.append(note)
        # The GPU locks of this run's gradings: a temporary folder, never the output folder.
        lock_dir = Path(tempfile.mkdtemp(prefix="stencil-gpu-locks-"))
        saved: list[Saved] = []
        try:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                # map() yields in the plan's order: the rows come out by student and lab.
                for done in pool.map(lambda t: self._grade(t, plan, lock_dir), plan.tasks):
                    saved.append(done)
                    say(progress_line(done, show_gpu=gpus > 1))
        finally:
            shutil.rmtree(lock_dir, ignore_errors=True)
        self.notes += [n for n in self.gpus.notes if n not in self.notes]
        return saved


def check_no_batch_run(out: Path) -> None:
    """ClassError when a batch run (grade.py <engine>) owns OUT: its jobs were submitted and its
    merge, which rewrites the class files, has not run (outdir.unmerged_runs)."""
    for path, data in outdir.unmerged_runs(out):
        jobs = ", ".join(str(j) for j in (data.get("jobs") or {}).values())
        raise ClassError(f"--out {out} belongs to the batch run {path} (jobs {jobs}), whose merge has not run: "
                         f"wait for it, or, if those jobs are gone, close it with "
                         f"grade.py class-task merge {path}; then grade here")


def grade_class(submissions_dir: str | Path, out: str | Path, labs: list[str] | None = None,
                student: str | None = None, jobs: int | None = None,
                progress: Callable[[str], None] = print, kit_root: Path | None = None,
                gpus: str | None = None, missing_as_zero: bool = False, gpu_set=None,
                regrade: bool = False, similarity: bool = False, against: Path | None = None) -> classfiles.ClassResult:
    """Grade a class on this host: plan (plan.make_plan: what to grade, what is kept), run the
    gradings (LocalBackend), merge (classfiles.class_files: the class files from every report).

    gpus: "all" (default: every GPU nvidia-smi lists) or indices "0,2"; each is probed first
        and a GPU that fails is left out with a message.  gpu_set: a ready gpupool.GpuSet
        (tests give fake GPUs and probes).  Nothing to grade (every lab kept): no GPU is
        probed and the class files are rewritten.
    progress: called with one line per grading, in the plan's order (students, then labs).
    regrade: grade every selected lab again (a grade is still never replaced by no grade).
    similarity: compare the selected labs' kernel.cu files (similarity.run, with `against`)
        after the gradings and before the class files, which show it; it changes no grade.
    Raises ClassError (usage; copydetect missing with similarity) or labspec.LabSpecError (a
    broken lab.json) before grading anything.
    """
    the_plan = plan.make_plan(submissions_dir, out, labs, student, kit_root, missing_as_zero, regrade)
    check_no_batch_run(the_plan.out)
    if similarity:
        similar.check(against)
    backend = LocalBackend(jobs or os.cpu_count() or 1, gpus=gpus, gpu_set=gpu_set, say=progress)
    saved: list[Saved] = []
    if the_plan.tasks:
        backend.check()
    outdir.claim(the_plan.out, the_plan.submissions)
    if the_plan.kept:
        progress(f"{len(the_plan.kept)} lab(s) kept: final for the same kernel.cu, kit version and lab.json "
                 "(--regrade grades them again)")
    if the_plan.tasks:
        saved = backend.run(the_plan, progress)
    if similarity:
        backend.notes += similar.class_step(the_plan.submissions, the_plan.out, [s.lab for s in the_plan.specs],
                                            against, progress, kit_root)
    return classfiles.class_files(the_plan.out, the_plan.lab_order, the_plan.missing_as_zero,
                                  the_plan.notes + backend.notes, saved, len(the_plan.kept), the_plan.lab_facts,
                                  the_plan.roster)
