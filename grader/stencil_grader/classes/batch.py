"""A class grading run by a batch system: the run folder, its tasks, and the merge.

A batch back end (slurm.py; any other engine the same way) grades a class in three
steps that pass state through a run folder, which therefore must be on a filesystem
that every node sees (as must the submissions and the kit):

    OUT/slurm/run-N/
        run.json            the plan: the gradings of this run (items), their shards, the
                            build architecture, the time limits, the engine's job ids
        build.sbatch, gpu.sbatch, merge.sbatch      the engine's batch scripts (slurm.py)
        logs/               the engine's output files, one per task
        tasks/<stage>-<i>.json   what each task did: started, node, the grading it is on,
                            "done" at the end ("terminated" when the engine signalled it)
        pending/<i>.json, .log   a build waiting for its GPU stages (i: the grading's place in
                            run.json's items: no student's name is part of a path here)
        builds/<i>/              that build, and the copy of its kernel.cu it was built from
                            (removed once graded)

Since make builds in the run folder, OUT must be a path make can take (check_out).

1. build task i (no GPU): `grade.py lab --stage build --arch ARCH` for each item of shard
   i.  A final verdict there (compile_error, forbidden, kit_error) goes straight to
   OUT (outdir.save); a build that needs its GPU stages goes to pending/.
2. gpu task i (one GPU): probes its GPU first (gpupool.py: a GPU the node lists that
   fails the probe ends the task, with a message, before any lab is sent to it; a node
   without any GPU grades on and every GPU stage ends not_measured), then runs
   `grade.py lab --stage gpu` for each pending item of shard i on that GPU and saves its
   report in OUT (outdir.save: a grade there is never replaced by what is not one).
3. merge: every item of run.json whose report this run did not write becomes a
   "grader_error" naming the task that should have written it (never started, or ended
   while grading it: a time limit, preemption, a node failure, scancel), then the class
   files from every report in OUT (merge.class_files): class.csv, gradings.csv, Gradescope
   files, class.html, summary.txt.

Every file is written by rename (outdir.py), so a task killed at any moment leaves no
half-written result, and the same command run again grades only what has no final
verdict (outdir.is_final).
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import __version__
from ..base import gpus as gpulist
from ..base import labspec
from ..grading import build
from . import gpupool, merge as classfiles, outdir, worker
from .plan import ClassPlan, Task
from .submissions import ClassError, shown

TASK_STAGES = ("build", "gpu", "merge")
RUN_FILE = "run.json"
RUNS = outdir.RUNS
#: Exit status of a gpu task whose GPU failed its probe (nothing graded; the merge says so).
EXIT_GPU_FAILED = 3


@dataclass
class Item:
    """One grading of a run: student, lab, the lab's folder and the kernel.cu to grade."""

    student: str
    lab: str
    lab_dir: str
    source: str

    def task(self) -> Task:
        return Task(self.student, labspec.load(Path(self.lab_dir) / "lab.json"), Path(self.source))

    @property
    def key(self) -> str:
        """student/lab, as printed (submissions.shown)."""
        return f"{shown(self.student)}/{self.lab}"


def shards(count: int, array_max: int) -> tuple[int, int]:
    """(gradings per task, tasks) for `count` gradings in arrays of at most `array_max` tasks."""
    if count == 0:
        return 0, 0
    size = math.ceil(count / max(1, min(count, array_max)))
    return size, math.ceil(count / size)


def runs_dir(out: Path) -> Path:
    return out / RUNS


def check_out(out: Path) -> None:
    """ClassError when OUT is a path make cannot take (a space: build.make_path_problem): a batch
    run builds in OUT/slurm/run-N/builds/, which every node sees."""
    if why := build.make_path_problem(out):
        raise ClassError(f"--out {out} {why}, which make cannot take, and the batch jobs build under --out "
                         "(a folder every node sees): choose an --out without it")


def next_run_dir(out: Path) -> Path:
    """OUT/slurm/run-N for the first N not taken."""
    taken = [int(p.name[4:]) for p in runs_dir(out).glob("run-*") if p.name[4:].isdigit()]
    return runs_dir(out) / f"run-{max(taken, default=0) + 1}"


def earlier_runs(out: Path) -> list[tuple[Path, dict]]:
    """(run folder, run.json) of every earlier run in OUT whose merge has not run."""
    found = []
    for path in sorted(runs_dir(out).glob("run-*")):
        data = outdir.read_json(path / RUN_FILE)
        if data and not data.get("merged"):
            found.append((path, data))
    return found


class RunDir:
    """A run folder (module docstring) and its run.json."""

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        data = outdir.read_json(self.path / RUN_FILE)
        if data is None:
            raise ClassError(f"{self.path / RUN_FILE}: no run here (is OUT on a filesystem this node sees?)")
        if data.get("kit_version") != __version__:
            raise ClassError(f"{self.path} was planned by kit version {data.get('kit_version')}, this is "
                             f"{__version__}: run the grade.py slurm command again")
        self.data = data
        self.items = [Item(**i) for i in data["items"]]
        self.out = Path(data["out"])
        self.submissions = Path(data["submissions"])

    @property
    def name(self) -> str:
        return self.path.name

    def shard(self, stage: str, index: int) -> list[tuple[int, Item]]:
        size = self.data["shard_size"]
        if not 0 <= index < self.data["tasks"]:
            raise ClassError(f"{stage} task {index}: this run has tasks 0 to {self.data['tasks'] - 1}")
        return [(i, self.items[i]) for i in range(index * size, min(len(self.items), (index + 1) * size))]

    def status_path(self, stage: str, index: int) -> Path:
        return self.path / "tasks" / f"{stage}-{index}.json"

    def pending_path(self, position: int) -> Path:
        """pending/<i>.json of the grading at `position` in run.json's items."""
        return self.path / "pending" / f"{position}.json"

    def build_dir(self, position: int) -> Path:
        """builds/<i>/ of the grading at `position` in run.json's items."""
        return self.path / "builds" / str(position)

    def job(self, stage: str) -> str | None:
        return (self.data.get("jobs") or {}).get(stage)

    def log_path(self, stage: str, job: str | None, index: int | None) -> str:
        pattern = self.data.get("log_pattern", "logs/{stage}-{job}_{task}.out")
        return str(self.path / pattern.format(stage=stage, job=job or "JOB", task=index if index is not None else 0))

    def done_here(self, item: Item) -> outdir.Saved | None:
        """What this run saved of item in OUT (outdir.save: its report, or its attempt beside the
        grade that stood), when this run saved it."""
        report = outdir.read_json(outdir.report_path(self.out, item.student, item.lab))
        if report and (report.get("class") or {}).get("run") == self.name:
            return outdir.Saved(item.student, item.lab, report)
        attempt = outdir.read_json(outdir.attempt_path(self.out, item.student, item.lab))
        if attempt and (attempt.get("class") or {}).get("run") == self.name:
            return outdir.Saved(item.student, item.lab, attempt, report)
        return None

    def save(self, item: Item, report: dict, log: str) -> outdir.Saved:
        """Save item's report in OUT (outdir.save, with the run's --regrade or --student)."""
        return outdir.save(self.out, item.student, item.lab, report, log, bool(self.data.get("asked")))


def create_run(plan: ClassPlan, items: list[Item], missing: list[tuple[str, str]], arch: str | None,
               array_max: int, limits: dict[str, float], engine: str, log_pattern: str,
               notes: list[str]) -> RunDir:
    """Write OUT/slurm/run-N/run.json (and its folders) for these items; returns the run."""
    path = next_run_dir(plan.out)
    size, count = shards(len(items), array_max)
    for sub in ("logs", "tasks", "pending", "builds"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    data = {"what": "stencil lab kit class grading run", "engine": engine, "kit_version": __version__,
            "created": outdir.now(), "submissions": str(plan.submissions), "out": str(plan.out), "arch": arch,
            "students": plan.students, "labs": {s.lab: str(s.lab_dir) for s in plan.specs},
            "lab_order": plan.lab_order,
            "missing_as_zero": plan.missing_as_zero, "notes": notes, "asked": plan.asked,
            "kept": len(plan.kept),
            "items": [vars(i) for i in items], "missing": [list(m) for m in missing],
            "shard_size": size, "tasks": count, "limits": limits, "log_pattern": log_pattern, "jobs": {}}
    outdir.write_json(path / RUN_FILE, data)
    return RunDir(path)


def record_jobs(run: RunDir, jobs: dict[str, str]) -> None:
    """Add the engine's job ids to run.json (the merge names them)."""
    run.data["jobs"] = dict(run.data.get("jobs") or {}, **jobs)
    outdir.write_json(run.path / RUN_FILE, run.data)


# ------------------------------------------------------------------------------- tasks

class _Status:
    """A task's status file, rewritten (by rename) as the task goes; on SIGTERM (the engine's
    time limit, preemption, scancel) it records what was being graded before the task ends."""

    def __init__(self, run: RunDir, stage: str, index: int):
        self.path = run.status_path(stage, index)
        job = os.environ.get("SLURM_ARRAY_JOB_ID") or os.environ.get("SLURM_JOB_ID") or run.job(stage)
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
                    message=f"ended by {signal.Signals(signum).name} (a time limit, preemption or scancel)")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def close(self, state: str, message: str = "") -> None:
        try:
            signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)
        except ValueError:
            pass
        self.update(state=state, ended=outdir.now(), ended_epoch=time.time(), current=None, message=message)


def _task_index(index: int | None) -> int:
    if index is not None:
        return index
    env = os.environ.get("SLURM_ARRAY_TASK_ID")
    if env is None or not env.isdigit():
        raise ClassError("no --task given and no SLURM_ARRAY_TASK_ID in the environment")
    return int(env)


def _limit(run: RunDir, stage: str, task: Task) -> float:
    own = worker.time_limit_s(task.spec, 1, stage=stage)
    chosen = (run.data.get("limits") or {}).get("per_lab")
    return min(own, chosen) if chosen else own


def _gpu_for_task(say: Callable[[str], None]) -> tuple[gpulist.Gpu | None, str | None]:
    """(the GPU this task was given, None), (None, None) on a node without any GPU (grade on:
    not_measured), or (None, why) when the node lists GPUs and this task's cannot be used."""
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


def _stamp(run: RunDir, task: Task, report: dict, stage: str, job_task: str | None) -> dict:
    report["class"] = outdir.stamp(task.source, task.spec, run.data.get("engine", "batch"), run.name, job_task,
                                   stage=stage)
    return report


def run_task(run_dir: Path, stage: str, index: int | None = None, say: Callable[[str], None] = print) -> int:
    """Run one task of a run folder: "build" or "gpu" for shard `index` (default: the engine's
    array index).  Returns the exit status: 0, or EXIT_GPU_FAILED when a gpu task's GPU
    failed its probe (it grades nothing; the merge names it)."""
    run = RunDir(run_dir)
    index = _task_index(index)
    shard = run.shard(stage, index)
    status = _Status(run, stage, index)
    say(f"{stage} task {index} of {run.path}: {len(shard)} grading(s) on {socket.gethostname()}")
    gpu, lock_dir = None, None
    if stage == "gpu":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
        status.update(cuda_visible_devices=visible)
        say(f"CUDA_VISIBLE_DEVICES={visible}")
        gpu, why = _gpu_for_task(say)
        if why:
            say(why)
            status.close("failed", why)
            return EXIT_GPU_FAILED
        if gpu is not None:
            say(f"GPU: {gpupool.describe(gpu)}")
            if gpu.index >= 0:
                lock_dir = Path(tempfile.mkdtemp(prefix="stencil-gpu-locks-"))
    if stage == "build" and shard:
        note = worker.prepare_harness(Path(shard[0][1].lab_dir), run.data.get("arch"), run.path / "harness.lock")
        if note:
            say(note)
    try:
        for position, item in shard:
            status.update(current=item.key)
            task = item.task()
            job_task = status.data.get("job_task")
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
            else:
                settled = run.done_here(item)
                if settled is not None:
                    say(f"{item.key}: {settled.report.get('verdict')} (settled by its build stage)")
                    continue
                if not pending.is_file():
                    say(f"{item.key}: no build (its build task did not finish it): left to the merge")
                    continue
                build_log = pending.with_suffix(".log").read_text() if pending.with_suffix(".log").is_file() else ""
                report, log = worker.grade(task, run.submissions, _limit(run, "gpu", task), "gpu", build_dir,
                                           gpu_locks=lock_dir, gpus=str(gpu.index) if lock_dir else None)
                run.save(item, _stamp(run, task, report, "gpu", job_task), build_log + log)
                pending.unlink(missing_ok=True)
                pending.with_suffix(".log").unlink(missing_ok=True)
                shutil.rmtree(build_dir, ignore_errors=True)
            status.update(graded=status.data["graded"] + 1)
            say(f"{item.key}: {report.get('verdict')}")
    finally:
        if lock_dir is not None:
            shutil.rmtree(lock_dir, ignore_errors=True)
    status.close("done")
    return 0


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
                f"(killed: a time limit, preemption, a node failure or scancel); its log: {log}")
    if state in ("terminated", "failed"):
        return f"{name}{where}: {status.get('message')}; its log: {log}"
    return f"{name}{where} ended ({state}) without grading it; its log: {log}"


def merge(run_dir: Path, say: Callable[[str], None] = print) -> classfiles.ClassResult:
    """The merge step (module docstring); returns the class result (merge.class_files)."""
    run = RunDir(run_dir)
    status = _Status(run, "merge", 0)
    say(f"merging {run.path}: {len(run.items)} grading(s)")
    saved: list[outdir.Saved] = []
    for position, item in enumerate(run.items):
        done = run.done_here(item)
        if done is None:
            task = item.task()
            data = outdir.placeholder(task.spec, item.student, outdir.GRADER_ERROR,
                                      f"not graded: {why_not_graded(run, position, item)}")
            done = run.save(item, _stamp(run, task, data, "merge", None), data["messages"][0] + "\n")
        saved.append(done)
    for student, lab in run.data.get("missing", []):
        data = outdir.read_json(outdir.report_path(run.out, student, lab))
        if data is not None:
            saved.append(outdir.Saved(student, lab, data))
    order = {lab: i for i, lab in enumerate(run.data["lab_order"])}
    saved.sort(key=lambda s: (s.student, order.get(s.lab, 0)))
    notes = list(run.data.get("notes", [])) + [f"run: {run.path} (jobs: " + ", ".join(
        f"{k} {v}" for k, v in (run.data.get("jobs") or {}).items()) + ")"]
    result = classfiles.class_files(run.out, run.data["lab_order"], run.data.get("missing_as_zero", False), notes,
                                    saved, run.data.get("kept", 0))
    for leftover in ("pending", "builds"):
        shutil.rmtree(run.path / leftover, ignore_errors=True)
    run.data["merged"] = outdir.now()
    outdir.write_json(run.path / RUN_FILE, run.data)
    status.close("done")
    return result
