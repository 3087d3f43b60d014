"""What a batch run's jobs run (grader/README.md, section 9, "A batch system"):

    grade.py class-task build|gpu RUN_DIR --task I [--job ID]    one array task: its shard
    grade.py class-task merge RUN_DIR [--job ID]                  the merge

The engine's job script hands in the task index and its job id; nothing here reads an engine's
environment.  A build task builds each grading of its shard (a final verdict goes to OUT, a
build waiting for its GPU stages to pending/); a gpu task probes its GPU ("engine" locks: the
GPU the engine gave it; "node": every GPU of the node, shared under NODE_LOCKS) and runs the
GPU stages; the merge turns every grading without a report from this run into grader_error
naming the task that should have written it, then writes the class files.  Each task keeps a
status file (tasks/<stage>-<i>.json), "terminated" when SIGTERM came.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Callable

from ..base import gpus as gpulist
from . import classfiles, gpupool, grades, outdir, resume, worker
from .batch import RUN_FILE, Item, RunDir
from .plan import Task
from .resume import Saved

#: Exit status of a gpu task whose GPU failed its probe (nothing graded; the merge says so).
EXIT_GPU_FAILED = 3
#: The lock files of the node's GPUs that every "node" gpu task of this user shares.
NODE_LOCKS = Path("/tmp") / f"stencil-gpu-locks-{os.getuid()}"


class _Status:
    """A task's status file, rewritten (by rename) as the task goes; on SIGTERM (the engine's
    time limit, preemption, a cancel) it records what was being graded before the task ends."""

    def __init__(self, run: RunDir, stage: str, index: int, job: str | None):
        self.path = run.status_path(stage, index)
        job = job or run.job(stage)
        self.data = {"stage": stage, "task": index, "job": job,
                     "job_task": f"{job}_{index}" if job else None, "node": socket.gethostname(),
                     "pid": os.getpid(), "started": outdir.now(), "started_epoch": time.time(),
                     "state": "running", "current": None, "graded": 0, "message": ""}
        self.write()
        try:
            self._previous = signal.signal(signal.SIGTERM, self._terminated)
        except ValueError:                # not the main thread: no handler (the status still says "running")
            self._previous = None

    def write(self) -> None:
        outdir.write_json(self.path, self.data)

    def update(self, **changes) -> None:
        self.data.update(changes)
        self.write()

    def _terminated(self, signum, frame) -> None:
        self.update(state="terminated", ended=outdir.now(), ended_epoch=time.time(),
                    message=f"ended by {signal.Signals(signum).name} (a time limit, preemption or a cancel)")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def close(self, state: str, message: str = "") -> None:
        try:
            signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)
        except ValueError:
            pass
        self.update(state=state, ended=outdir.now(), ended_epoch=time.time(), current=None, message=message)


def _limit(run: RunDir, stage: str, task: Task) -> float:
    own = worker.time_limit_s(task.spec, 1, stage=stage)
    chosen = (run.data.get("limits") or {}).get("per_lab")
    return min(own, chosen) if chosen else own


def _gpu_for_task(say: Callable[[str], None]) -> tuple[gpulist.Gpu | None, str | None]:
    """(the GPU the engine gave this task, None), (None, None) on a node without any GPU (grade
    on: not_measured), or (None, why) when the node lists GPUs and this task's cannot be used."""
    listed, why_none = gpulist.list_gpus()
    found = gpupool.probe()
    if found.ok:
        gpu = gpupool.identify(found, listed)
        if gpu is None:
            gpu = gpulist.Gpu(-1, found.uuid, found.name, found.cc)
            say(f"GPU {found.name} ({found.uuid}) is not in nvidia-smi's list here: graded without the pool")
        return gpu, None
    if listed or found.status == "failed":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
        return None, (f"the GPU of this task (CUDA_VISIBLE_DEVICES={visible}) on {socket.gethostname()} failed "
                      f"its probe: {found.message}")
    say(f"no GPU on {socket.gethostname()} ({why_none or found.message}): the GPU stages will be not_measured")
    return None, None


def _node_gpus(say: Callable[[str], None]) -> tuple[str | None, str | None]:
    """("0,1,..." usable GPUs of this node, None), (None, None) without any GPU (not_measured),
    or (None, why) when the node lists GPUs and none passes its probe ("node" locks)."""
    chosen, why = gpupool.choose("all")
    if why:
        say(f"no GPU on {socket.gethostname()} ({why}): the GPU stages will be not_measured")
        return None, None
    pool = gpupool.GpuSet(chosen, say=say)
    pool.check()
    if pool.exhausted:
        return None, f"no GPU of {socket.gethostname()} passed its probe: " + "; ".join(pool.notes)
    say(f"GPUs of this node, shared with its other tasks under the locks in {NODE_LOCKS}: "
        + ", ".join(gpupool.describe(g) for g in pool.usable))
    return pool.indices(), None


def _stamp(run: RunDir, task: Task, report: dict, stage: str, job_task: str | None) -> dict:
    report["class"] = resume.stamp(task.source, task.spec, run.data.get("engine", "batch"), run.name, job_task,
                                   stage=stage)
    return report


def _gpu_setup(run: RunDir, status: _Status, say) -> tuple[Path | None, str | None, str | None]:
    """(lock folder, GPU indices for the gradings, why the task cannot grade) of a gpu task."""
    if run.data.get("gpu_locks") == "node":
        indices, why = _node_gpus(say)
        return (NODE_LOCKS if indices else None), indices, why
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
    status.update(cuda_visible_devices=visible)
    say(f"CUDA_VISIBLE_DEVICES={visible}")
    gpu, why = _gpu_for_task(say)
    if gpu is None or why:
        return None, None, why
    say(f"GPU: {gpupool.describe(gpu)}")
    if gpu.index < 0:
        return None, None, None
    return Path(tempfile.mkdtemp(prefix="stencil-gpu-locks-")), str(gpu.index), None


def run_task(run_dir: Path, stage: str, index: int, job: str | None = None,
             say: Callable[[str], None] = print) -> int:
    """Run task `index` of a run folder's "build" or "gpu" stage (module docstring); job: the
    engine's job id.  Returns the exit status: 0, or EXIT_GPU_FAILED when a gpu task cannot
    use its GPU(s) (it grades nothing; the merge names it)."""
    run = RunDir(run_dir)
    shard = run.shard(stage, index)
    status = _Status(run, stage, index, job)
    say(f"{stage} task {index} of {run.path}: {len(shard)} grading(s) on {socket.gethostname()}")
    lock_dir, gpus = None, None
    if stage == "gpu":
        lock_dir, gpus, why = _gpu_setup(run, status, say)
        if why:
            say(why)
            status.close("failed", why)
            return EXIT_GPU_FAILED
    if stage == "build" and shard:
        note = worker.prepare_harness(Path(shard[0][1].lab_dir), run.data.get("arch"), run.path / "harness.lock")
        if note:
            say(note)
    try:
        for position, item in shard:
            status.update(current=item.key)
            report = _grade_one(run, stage, position, item, status.data.get("job_task"), lock_dir, gpus, say)
            if report is None:
                continue
            status.update(graded=status.data["graded"] + 1)
            say(f"{item.key}: {report.get('verdict')}")
    finally:
        if lock_dir is not None and lock_dir != NODE_LOCKS:
            shutil.rmtree(lock_dir, ignore_errors=True)
    status.close("done")
    return 0


def _grade_one(run: RunDir, stage: str, position: int, item: Item, job_task: str | None, lock_dir: Path | None,
               gpus: str | None, say) -> dict | None:
    """One grading of a task's shard; its report, or None when there was nothing to grade."""
    task = item.task()
    pending, build_dir = run.pending_path(position), run.build_dir(position)
    if stage == "build":
        report, log = worker.grade(task, run.submissions, _limit(run, "build", task), "build", build_dir,
                                   arch=run.data.get("arch"))
        _stamp(run, task, report, "build", job_task)
        if report.get("verdict") == "pending":
            outdir.write_atomic(pending.with_suffix(".log"), log)
            outdir.write_json(pending, report)
        else:
            run.save(item, report, log)
            shutil.rmtree(build_dir, ignore_errors=True)
        return report
    settled = run.done_here(item)
    if settled is not None:
        say(f"{item.key}: {settled.report.get('verdict')} (settled by its build stage)")
        return None
    if not pending.is_file():
        say(f"{item.key}: no build (its build task did not finish it): left to the merge")
        return None
    build_log = pending.with_suffix(".log").read_text() if pending.with_suffix(".log").is_file() else ""
    report, log = worker.grade(task, run.submissions, _limit(run, "gpu", task), "gpu", build_dir,
                               gpu_locks=lock_dir, gpus=gpus if lock_dir else None)
    run.save(item, _stamp(run, task, report, "gpu", job_task), build_log + log)
    pending.unlink(missing_ok=True)
    pending.with_suffix(".log").unlink(missing_ok=True)
    shutil.rmtree(build_dir, ignore_errors=True)
    return report


# ------------------------------------------------------------------------------- merge

def why_not_graded(run: RunDir, position: int, item: Item) -> str:
    """Which task should have graded item, and what is known of its end (its status file)."""
    stage = "gpu" if run.pending_path(position).is_file() else "build"
    index = position // run.data["shard_size"]
    status = outdir.read_json(run.status_path(stage, index)) or {}
    job = status.get("job") or run.job(stage)
    name = f"{stage} task {index} of {run.data.get('engine', 'batch')} job {job or '(unknown)'}"
    log = run.log_path(stage, job, index)
    if not status:
        return (f"{name} never started, or wrote where the merge cannot see (OUT must be on a filesystem "
                f"every node sees); its log: {log}")
    where = f" on {status.get('node')}" if status.get("node") else ""
    state = status.get("state")
    if state == "running":
        return (f"{name}{where} ended while grading {status.get('current') or 'its shard'} without saying why "
                f"(killed: a time limit, preemption, a node failure or a cancel); its log: {log}")
    if state in ("terminated", "failed"):
        return f"{name}{where}: {status.get('message')}; its log: {log}"
    return f"{name}{where} ended ({state}) without grading it; its log: {log}"


def merge(run_dir: Path, job: str | None = None, say: Callable[[str], None] = print) -> classfiles.ClassResult:
    """The merge step (module docstring); returns the class result (classfiles.class_files)."""
    run = RunDir(run_dir)
    status = _Status(run, "merge", 0, job)
    say(f"merging {run.path}: {len(run.items)} grading(s)")
    saved: list[Saved] = []
    for position, item in enumerate(run.items):
        done = run.done_here(item)
        if done is None:
            task = item.task()
            data = grades.placeholder(task.spec, item.student, grades.GRADER_ERROR,
                                      f"not graded: {why_not_graded(run, position, item)}")
            done = run.save(item, _stamp(run, task, data, "merge", None), data["messages"][0] + "\n")
        saved.append(done)
    for student, lab in run.data.get("missing", []):
        data = outdir.read_json(outdir.report_path(run.out, student, lab))
        if data is not None:
            saved.append(Saved(student, lab, data))
    order = {lab: i for i, lab in enumerate(run.data["lab_order"])}
    saved.sort(key=lambda s: (s.student, order.get(s.lab, 0)))
    notes = list(run.data.get("notes", [])) + [f"run: {run.path} (jobs: " + ", ".join(
        f"{k} {v}" for k, v in (run.data.get("jobs") or {}).items()) + ")"]
    result = classfiles.class_files(run.out, run.data["lab_order"], run.data.get("missing_as_zero", False), notes,
                                    saved, run.data.get("kept", 0), run.data.get("lab_facts"))
    for leftover in ("pending", "builds"):
        shutil.rmtree(run.path / leftover, ignore_errors=True)
    run.data["merged"] = outdir.now()
    outdir.write_json(run.path / RUN_FILE, run.data)
    status.close("done")
    return result

