"""What a batch run's jobs run (grader/README.md, section 9, "A batch system"), the task index and job id handed
in by the engine's job script (nothing here reads an engine's environment); each keeps tasks/<stage>-<i>.json:

    grade.py class-task build|gpu RUN_DIR --task I [--job ID]    one array task: its shard
    grade.py class-task merge RUN_DIR [--job ID]                  the merge
"""

import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Callable

from ..base.files import write_atomic, write_json
from ..base import gpus as gpulist
from ..grading import score
from . import classfiles, gpupool, grades, outdir, resume, worker
from .batch import RUN_FILE, RunDir
from .resume import Saved

#: Exit status of a gpu task whose GPU failed its probe (nothing graded; the merge says so).
EXIT_GPU_FAILED = 3
#: The lock files of the node's GPUs that every "node" gpu task of this user shares.
NODE_LOCKS = Path("/tmp") / f"stencil-gpu-locks-{os.getuid()}"


class _Status:
    """A task's status file, rewritten as it goes; "terminated" with what it was grading when SIGTERM came."""

    def __init__(self, run: RunDir, stage: str, index: int, job: str | None):
        self.path, job = run.status_path(stage, index), job or run.data["jobs"].get(stage)
        self.data = {"stage": stage, "task": index, "job": job, "job_task": f"{job}_{index}" if job else None,
                     "node": socket.gethostname(), "pid": os.getpid(), "started": outdir.now(),
                     "started_epoch": time.time(), "state": "running", "current": None, "graded": 0, "message": ""}
        self.update()
        signal.signal(signal.SIGTERM, self._terminated)

    def update(self, **changes) -> None:
        self.data.update(changes)
        write_json(self.path, self.data)

    def _terminated(self, signum, frame) -> None:
        self.update(state="terminated", ended=outdir.now(), ended_epoch=time.time(),
                    message=f"ended by {signal.Signals(signum).name} (a time limit, preemption or a cancel)")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def close(self, state: str, message: str = "") -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self.update(state=state, ended=outdir.now(), ended_epoch=time.time(), current=None, message=message)


def _task_gpus(run: RunDir, status: _Status, say: Callable[[str], None],
               held: list) -> tuple[Path | None, str | None, str]:
    """(lock folder, GPU indices, why the task cannot grade or "") of a gpu task: with "node" locks every GPU of the
    node that passes its probe, under NODE_LOCKS; else the GPU the engine gave it (nvidia-smi's by its UUID).  What
    holds a CUDA context open on the task's GPUs (gpupool.GpuSet, gpuprobe.ContextHold) is appended to `held`."""
    host = socket.gethostname()
    if run.data["gpu_locks"] == "node":
        chosen, why = gpulist.list_gpus()
        if why:
            say(f"no GPU on {host} ({why}): the GPU stages will be not_measured")
            return None, None, ""
        pool = gpupool.GpuSet(chosen, say=say)
        held.append(pool)
        pool.check()
        if not pool.usable:
            return None, None, f"no GPU of {host} passed its probe: " + "; ".join(pool.notes)
        say(f"GPUs of this node, shared with its other tasks under the locks in {NODE_LOCKS}: "
            + ", ".join(gpupool.describe(g) for g in pool.usable))
        return NODE_LOCKS, pool.indices(), ""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
    status.update(cuda_visible_devices=visible)
    say(f"CUDA_VISIBLE_DEVICES={visible}")
    listed, why_none = gpulist.list_gpus()
    holder = gpupool.ContextHold()
    held.append(holder)
    found = holder.result
    if not found.ok and (listed or found.status == "failed"):
        return None, None, f"the GPU of this task (CUDA_VISIBLE_DEVICES={visible}) on {host} failed its probe: " \
                           f"{found.message}"
    if not found.ok:
        say(f"no GPU on {host} ({why_none or found.message}): the GPU stages will be not_measured")
        return None, None, ""
    gpu = next((g for g in listed if g.uuid == found.uuid), None)
    if gpu is None:
        say(f"GPU {found.name} ({found.uuid}) is not in nvidia-smi's list here: graded without the pool")
        return None, None, ""
    say(f"GPU: {gpupool.describe(gpu)}")
    return Path(tempfile.mkdtemp(prefix="stencil-gpu-locks-")), str(gpu.index), ""


def run_task(run_dir: Path, stage: str, index: int, job: str | None = None,
             say: Callable[[str], None] = print) -> int:
    """Run task `index` of a run's "build" stage (each build of the shard: a final verdict goes to OUT, a build
    waiting for its GPU stages to pending/) or "gpu" stage (the GPU stages of each pending build).  The exit status: 0,
    or EXIT_GPU_FAILED when a gpu task cannot use its GPU(s): it grades nothing, and the merge names it."""
    run = RunDir(run_dir)
    shard = run.shard(stage, index)
    status = _Status(run, stage, index, job)
    say(f"{stage} task {index} of {run.path}: {len(shard)} grading(s) on {socket.gethostname()}")
    held: list = []                                     # contexts held open on the task's GPUs, closed at its end
    lock_dir, gpus, why = _task_gpus(run, status, say, held) if stage == "gpu" else (None, None, "")
    if why:
        for holder in held:
            holder.close()
        say(why)
        status.close("failed", why)
        return EXIT_GPU_FAILED
    if stage == "build":
        for note in worker.prepare_harness([task.spec.lab_dir for _, task in shard], run.data["arch"],
                                           run.path / "harness.lock"):
            say(note)
    job_task, limit = status.data["job_task"], run.data["limits"]["per_lab"]
    try:
        for position, task in shard:
            status.update(current=task.key)
            pending, build_dir = run.pending_path(position), run.path / "builds" / str(position)
            build_log = pending.with_suffix(".log")                     # what the build printed
            settled = run.done_here(task) if stage == "gpu" else None
            if stage == "gpu" and (settled or not pending.is_file()):
                say(f"{task.key}: {settled.report.get('verdict')} (settled by its build stage)" if settled else
                    f"{task.key}: no build (its build task did not finish it): left to the merge")
                continue
            own = worker.time_limit_s(task.spec, 1, stage=stage)
            report, log = worker.grade(task, run.submissions, min(own, limit) if limit else own, stage, build_dir,
                                       arch=run.data["arch"] if stage == "build" else None, gpu_locks=lock_dir,
                                       gpus=gpus)
            report["class"] = resume.stamp(task.source, task.spec, run.data["engine"], run.name, job_task, stage=stage)
            if report.get("verdict") == "pending":       # a build waiting for its GPU stages
                write_atomic(build_log, log)
                write_json(pending, report)
            else:
                resume.save(run.out, task.student, task.lab, report,
                            (build_log.read_text() if stage == "gpu" else "") + log, run.data["asked"])
                for done in (pending, build_log):
                    done.unlink(missing_ok=True)
                shutil.rmtree(build_dir, ignore_errors=True)
            status.update(graded=status.data["graded"] + 1)
            say(f"{task.key}: {report.get('verdict')}")
    finally:
        for holder in held:
            holder.close()
        if lock_dir is not None and lock_dir != NODE_LOCKS:
            shutil.rmtree(lock_dir, ignore_errors=True)
    status.close("done")
    return 0


def why_not_graded(run: RunDir, position: int) -> str:
    """Which task should have graded the grading at `position`, and how it ended (its status)."""
    stage = "gpu" if run.pending_path(position).is_file() else "build"
    index = position // run.data["shard_size"]
    status = outdir.read_json(run.status_path(stage, index)) or {}
    job = status.get("job") or run.data["jobs"].get(stage)
    name = f"{stage} task {index} of {run.data['engine']} job {job or '(unknown)'}"
    log = run.path / run.data["log_pattern"].format(stage=stage, job=job or "JOB", task=index)
    where = f" on {status.get('node')}" if status.get("node") else ""
    if not status:
        return (f"{name} never started, or wrote where the merge cannot see (OUT must be on a filesystem "
                f"every node sees); its log: {log}")
    if status.get("state") == "running":
        return (f"{name}{where} ended while grading {status.get('current') or 'its shard'} without saying why "
                f"(killed: a time limit, preemption, a node failure or a cancel); its log: {log}")
    if status.get("state") in ("terminated", "failed"):
        return f"{name}{where}: {status.get('message')}; its log: {log}"
    return f"{name}{where} ended ({status.get('state')}) without grading it; its log: {log}"


def merge(run_dir: Path, job: str | None = None, say: Callable[[str], None] = print) -> classfiles.ClassResult:
    """Turn every grading of the run without a report from it into grader_error naming the task
    that should have written it (why_not_graded), then write the class files (their result)."""
    run = RunDir(run_dir)
    status = _Status(run, "merge", 0, job)
    say(f"merging {run.path}: {len(run.items)} grading(s)")
    saved: list[Saved] = []
    for position, task in enumerate(run.items):
        done = run.done_here(task)
        if done is None:
            why = f"not graded: {why_not_graded(run, position)}"
            data = grades.placeholder(task.spec, task.student, score.GRADER_ERROR, why)
            data["class"] = resume.stamp(task.source, task.spec, run.data["engine"], run.name, None, stage="merge")
            done = resume.save(run.out, task.student, task.lab, data, why + "\n", run.data["asked"])
        saved.append(done)
    for student, lab in run.data["missing"]:
        if (data := outdir.read_json(outdir.report_path(run.out, student, lab))) is not None:
            saved.append(Saved(student, lab, data))
    saved.sort(key=lambda s: (s.student, run.data["lab_order"].index(s.lab)))
    notes = run.data["notes"] + [f"run: {run.path} (jobs: " + ", ".join(
        f"{k} {v}" for k, v in run.data["jobs"].items()) + ")"]
    result = classfiles.class_files(run.out, run.data["lab_order"], run.data["missing_as_zero"], notes, saved,
                                    run.data["kept"], run.data["lab_facts"])
    for leftover in ("pending", "builds"):
        shutil.rmtree(run.path / leftover, ignore_errors=True)
    write_json(run.path / RUN_FILE, dict(run.data, merged=outdir.now()))
    status.close("done")
    return result
