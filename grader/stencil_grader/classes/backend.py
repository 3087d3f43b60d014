"""A class graded on this host (grade_class): plan.make_plan, the gradings in threads, their builds `jobs` at once and
each one's GPU stages on one GPU of the pool (every GPU probed first: gpupool.py), then classfiles.class_files.
Batch: batch.py."""

import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from ..base import sandbox
from ..grading import score
from . import classfiles, gpupool, grades, outdir, plan, resume, worker
from . import similarity as similar
from .plan import ClassPlan, Task
from .resume import Saved
from .submissions import ClassError, shown

#: Gradings of one (student, lab) in one class run when the grader's machinery fails (grader_error).
GRADER_ERROR_TRIES = 2


class _Stages:
    """How a class run's gradings share this host: at most `jobs` builds at once and at most `jobs` gradings in their
    GPU stage's process (its own start, its wait for a GPU, its GPU work, its launch audit and report after the GPU is
    given back), so that a built grading waiting for a GPU never holds up the next build."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self.builds = threading.BoundedSemaphore(jobs)      # builds at once
        self.gpu = threading.BoundedSemaphore(jobs)         # GPU stages' processes at once


def _grade(task: Task, plan: ClassPlan, pool: gpupool.GpuSet, stages: _Stages, lock_dir: Path,
           say: Callable[[str], None]) -> Saved:
    """One grading on the pool's GPUs, saved: its build (worker.grade's stage "build"), then, when it may run, its GPU
    stages in the same build folder.  A GPU found unusable (no GPU through it, or a crash, which a broken GPU also
    causes) is probed again, and when it fails the GPU stages run on another (no GPU left: not_measured)."""
    with tempfile.TemporaryDirectory(prefix=f"grading-{task.lab}-", dir=worker.temp_root()) as tmp:
        os.chmod(tmp, 0o711)            # the sandbox user must reach its own directory inside (sandbox.SandboxDir)
        build_dir = Path(tmp) / "build"
        report, log, tries = None, "", 0
        while report is None:
            with stages.builds:
                report, log = worker.grade(task, plan.submissions, worker.time_limit_s(task.spec, 1, stage="build"),
                                           stage="build", build_dir=build_dir)
            tries += 1
            if report.get("verdict") == score.GRADER_ERROR and tries < GRADER_ERROR_TRIES:
                say(f"{shown(task.student)} {task.lab}: grader_error ({grades.reason(report)}): building again")
                report = None
        tries = 0
        while report.get("verdict") == "pending":        # built, and allowed to run: its GPU stages
            usable = pool.indices()      # "0,2"; "" when every GPU has been taken out; None: no GPU here
            if usable == "":
                report = grades.placeholder(task.spec, task.student, "not_measured",
                                            "not measured: no usable GPU left (" + "; ".join(pool.notes) + ")")
                break
            gpus = max(1, len(pool.usable))
            with stages.gpu:
                gpu_report, gpu_log = worker.grade(
                    task, plan.submissions, worker.time_limit_s(task.spec, stages.jobs, gpus, stage="gpu"),
                    stage="gpu", build_dir=build_dir, gpu_locks=lock_dir, gpus=usable,
                    env={sandbox.THREADS_ENV: str(max(1, sandbox.usable_cpus() // gpus))})
            tries += 1
            section = gpu_report.get("gpu") or {}
            bad = (section.get("assigned") or {}).get("index")
            if bad is not None and (section.get("status") == "no_gpu" or gpu_report.get("verdict") in
                                    ("crash", score.GRADER_ERROR)) and pool.suspect(bad):
                continue                 # that GPU is out of the pool now: its GPU stages again elsewhere
            if gpu_report.get("verdict") == score.GRADER_ERROR and tries < GRADER_ERROR_TRIES:
                say(f"{shown(task.student)} {task.lab}: grader_error ({grades.reason(gpu_report)}): grading again")
                continue
            report, log = gpu_report, log + gpu_log
    report["class"] = resume.stamp(task.source, task.spec, "local", "local")
    return resume.save(plan.out, task.student, task.lab, report, log, plan.asked)


def grade_class(submissions_dir: str | Path, out: str | Path, labs: list[str] | None = None,
                student: str | None = None, jobs: int | None = None,
                progress: Callable[[str], None] = print, kit_root: Path | None = None,
                gpus: str | None = None, missing_as_zero: bool = False, gpu_set=None,
                regrade: bool = False, similarity: bool = False, against: Path | None = None) -> classfiles.ClassResult:
    """Grade a class on this host (module docstring; the options are grade.py class's); the class result.  jobs:
    builds at once (default: the CPU count); gpu_set: a ready gpupool.GpuSet instead of --gpus (tests); progress: one
    line per grading, in the plan's order.  ClassError (usage; OUT owned by a batch run whose merge has not run; no
    usable GPU; copydetect missing with similarity) or labspec.LabSpecError before grading anything."""
    the_plan = plan.make_plan(submissions_dir, out, labs, student, kit_root, missing_as_zero, regrade)
    for path, data in outdir.unmerged_runs(the_plan.out):    # its merge will rewrite the class files
        raise ClassError(f"--out {the_plan.out} belongs to the batch run {path} (jobs "
                         f"{', '.join(str(j) for j in data['jobs'].values())}), whose merge has not run: wait for "
                         f"it, or, if those jobs are gone, close it with grade.py class-task merge {path}; then "
                         "grade here")
    if similarity:
        similar.check(against)
    jobs = jobs or os.cpu_count() or 1                  # commands.py refuses a --jobs below 1
    notes: list[str] = []
    if the_plan.tasks:
        worker.temp_root()                   # a temporary folder make can build in
        if gpu_set is None:
            chosen, why = gpupool.choose(gpus)
            if why:
                notes.append(f"no GPU on this machine ({why}): every GPU stage will be not_measured")
            gpu_set = gpupool.GpuSet(chosen, say=progress)
        gpu_set.check()
        if gpu_set.chosen and not gpu_set.usable:
            raise ClassError(f"no usable GPU: {'; '.join(gpu_set.notes)} (fix the GPU, or choose others with --gpus)")
        if len(models := sorted({g.name for g in gpu_set.usable})) > 1:
            notes.append(f"the GPUs of this host are of {len(models)} models ({', '.join(models)}): "
                         "scores compare within one model; --gpus picks one")
    outdir.claim(the_plan.out, the_plan.submissions)
    if the_plan.kept:
        progress(f"{len(the_plan.kept)} lab(s) kept: final for the same kernel.cu, kit version and lab.json "
                 "(--regrade grades them again)")
    saved: list[Saved] = []
    if the_plan.tasks:
        usable = gpu_set.usable
        progress(f"grading {len(the_plan.tasks)} lab(s) of {len(the_plan.students)} student(s), "
                 f"{jobs} build(s) at a time, "
                 + (f"on {len(usable)} GPU(s): " + ", ".join(map(gpupool.describe, usable)) if usable
                    else "without a GPU"))
        notes += worker.prepare_harness([t.spec.lab_dir for t in the_plan.tasks if t.source is not None])
        lock_dir = Path(tempfile.mkdtemp(prefix="stencil-gpu-locks-"))     # never in the output folder
        try:
            stages = _Stages(jobs)
            with ThreadPoolExecutor(max_workers=2 * jobs) as threads:     # jobs building, jobs in GPU stages
                # map() yields in the plan's order: the rows come out by student and lab.
                for done in threads.map(lambda t: _grade(t, the_plan, gpu_set, stages, lock_dir, progress),
                                        the_plan.tasks):
                    saved.append(done)
                    # its row: points "-" for no grade (never a 0); the grade that stays when this one measured nothing
                    r, kept = done.report, done.kept
                    gpu = ((r.get("gpu") or {}).get("assigned") or {}).get("index")
                    points = f"{float(r.get('points') or 0.0):6.2f}" if score.is_grade(r) else "     -"
                    progress(f"{shown(done.student):<20} {done.lab:<24} {r.get('verdict'):<14} "
                             f"{points}/{float(r.get('max_points') or 0.0):g}"
                             f"  ({float((r.get('seconds') or {}).get('total', 0.0)):.0f} s)"
                             + (f"  GPU {gpu}" if len(usable) > 1 and gpu is not None else "")
                             + (f"  (the earlier grade stays: {kept.get('verdict')}, "
                                f"{float(kept.get('points') or 0):.2f})" if kept else ""))
        finally:
            shutil.rmtree(lock_dir, ignore_errors=True)
            gpu_set.close()
        notes += [n for n in gpu_set.notes if n not in notes]
    if similarity:
        notes += similar.class_step(the_plan.submissions, the_plan.out, [s.lab for s in the_plan.specs], against,
                                    progress, kit_root)
    return classfiles.class_files(the_plan.out, the_plan.lab_order, the_plan.missing_as_zero, the_plan.notes + notes,
                                  saved, len(the_plan.kept), the_plan.lab_facts, the_plan.roster)
