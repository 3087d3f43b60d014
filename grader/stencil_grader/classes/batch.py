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
        pending/<student>/<lab>.json, .log   a build waiting for its GPU stages
        builds/<student>/<lab>/              that build (removed once graded)

1. build task i (no GPU): `grade.py lab --stage build --arch ARCH` for each item of shard
   i.  A final verdict there (compile_error, forbidden, kit_error) goes straight to
   OUT/<student>/<lab>.json; a build that needs its GPU stages goes to pending/.
2. gpu task i (one GPU): probes its GPU first (gpupool.py: a GPU the node lists that
   fails the probe ends the task, with a message, before any lab is sent to it; a node
   without any GPU grades on and every GPU stage ends not_measured), then runs
   `grade.py lab --stage gpu` for each pending item of shard i on that GPU and writes
   OUT/<student>/<lab>.json.
3. merge: every item of run.json whose report this run did not write becomes a
   "grader_error" naming the task that should have written it (never started, or ended
   while grading it: a time limit, preemption, a node failure, scancel), then the class
   files (classgrade.finish): class.csv, gradings.csv, Gradescope files, summary.txt.

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
from . import classgrade, gpupool, outdir, worker
from .classgrade import ClassPlan, ClassResult, Grading
from .submissions import ClassError

TASK_STAGES = ("build", "gpu", "merge")
RUN_FILE = "run.json"
RUNS = "slurm"
#: Exit status of a gpu task whose GPU failed its probe (nothing graded; the merge says so).
EXIT_GPU_FAILED = 3


@dataclass
class Item:
    """One grading of a run: student, lab, the lab's folder and the kernel.cu to grade."""

    student: str
    lab: str
    lab_dir: str
    source: str

    @property
    def key(self) -> str:
        return f"{self.student}/{self.lab}"

    def task(self) -> worker.Task:
        return worker.Task(self.student, labspec.load(Path(self.lab_dir) / "lab.json"), Path(self.source))


def shards(count: int, array_max: int) -> tuple[int, int]:
    """(gradings per task, tasks) for `count` gradings in arrays of at most `array_max` tasks."""
    if count == 0:
        return 0, 0
    size = math.ceil(count / max(1, min(count, array_max)))
    return size, math.ceil(count / size)


def runs_dir(out: Path) -> Path:
    return out / RUNS


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

    def pending_path(self, item: Item) -> Path:
        return self.path / "pending" / item.student / f"{item.lab}.json"

    def build_dir(self, item: Item) -> Path:
        return self.path / "builds" / item.student / item.lab

    def job(self, stage: str) -> str | None:
        return (self.data.get("jobs") or {}).get(stage)

    def log_path(self, stage: str, job: str | None, index: int | None) -> str:
        pattern = self.data.get("log_pattern", "logs/{stage}-{job}_{task}.out")
        return str(self.path / pattern.format(stage=stage, job=job or "JOB", task=index if index is not None else 0))

    def done_here(self, item: Item) -> dict | None:
        """This run's report of item in OUT, when this run wrote one."""
        data = outdir.read_json(outdir.report_path(self.out, item.student, item.lab))
        return data if data and (data.get("class") or {}).get("run") == self.name else None


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
            "missing_as_zero": plan.missing_as_zero, "notes": notes,
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


def _limit(run: RunDir, stage: str, task: worker.Task) -> float:
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
        shown = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
        return None, (f"the GPU of this task (CUDA_VISIBLE_DEVICES={shown}) on {socket.gethostname()} failed "
                      f"its probe: {found.message}")
    say(f"no GPU on {socket.gethostname()} ({why_none or found.message}): the GPU stages will be not_measured")
    return None, None


def _stamp_and_save(run: RunDir, item: Item, task: worker.Task, report: dict, log: str, stage: str,
                    status: _Status) -> None:
    report["class"] = outdir.stamp(task.source, task.spec, run.data.get("engine", "batch"), run.name,
                                   status.data.get("job_task"), stage=stage)
    outdir.save(run.out, item.student, item.lab, report, log)


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
        shown = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
        status.update(cuda_visible_devices=shown)
        say(f"CUDA_VISIBLE_DEVICES={shown}")
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
            if stage == "build":
                build_dir = run.build_dir(item)
                report, log = worker.grade(task, run.submissions, _limit(run, "build", task), "build", build_dir,
                                           arch=run.data.get("arch"))
                if report.get("verdict") == "pending":
                    report["class"] = outdir.stamp(task.source, task.spec, run.data.get("engine", "batch"),
                                                   run.name, status.data.get("job_task"), stage="build")
                    outdir.write_atomic(run.pending_path(item).with_suffix(".log"), log)
                    outdir.write_json(run.pending_path(item), report)
                else:
                    _stamp_and_save(run, item, task, report, log, "build", status)
                    shutil.rmtree(build_dir, ignore_errors=True)
            else:
                settled = run.done_here(item)
                if settled is not None:
                    say(f"{item.key}: {settled.get('verdict')} (settled by its build stage)")
                    continue
                pending = run.pending_path(item)
                if not pending.is_file():
                    say(f"{item.key}: no build (its build task did not finish it): left to the merge")
                    continue
                build_log = pending.with_suffix(".log").read_text() if pending.with_suffix(".log").is_file() else ""
                report, log = worker.grade(task, run.submissions, _limit(run, "gpu", task), "gpu",
                                           run.build_dir(item), gpu_locks=lock_dir,
                                           gpus=str(gpu.index) if lock_dir else None)
                _stamp_and_save(run, item, task, report, build_log + log, "gpu", status)
                pending.unlink(missing_ok=True)
                pending.with_suffix(".log").unlink(missing_ok=True)
                shutil.rmtree(run.build_dir(item), ignore_errors=True)
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
    stage = "gpu" if run.pending_path(item).is_file() else "build"
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


def merge(run_dir: Path, say: Callable[[str], None] = print) -> ClassResult:
    """The merge step (module docstring); returns the class result (its exit status: 0 when
    every grading of the run produced a grade)."""
    run = RunDir(run_dir)
    status = _Status(run, "merge", 0)
    say(f"merging {run.path}: {len(run.items)} grading(s)")
    gradings: dict[tuple[str, str], Grading] = {}
    for position, item in enumerate(run.items):
        data = run.done_here(item)
        if data is None:
            task = item.task()
            data = outdir.placeholder(task.spec, item.student, outdir.GRADER_ERROR,
                                      f"not graded: {why_not_graded(run, position, item)}", final=False)
            data["class"] = outdir.stamp(task.source, task.spec, run.data.get("engine", "batch"), run.name,
                                         None, stage="merge")
            outdir.save(run.out, item.student, item.lab, data, data["messages"][0] + "\n")
        gradings[(item.student, item.lab)] = Grading.from_report(item.student, data)
    for student, lab in run.data.get("missing", []):
        data = outdir.read_json(outdir.report_path(run.out, student, lab))
        if data is not None:
            gradings[(student, lab)] = Grading.from_report(student, data)
    order = {lab: i for i, lab in enumerate(run.data["lab_order"])}
    ordered = [gradings[k] for k in sorted(gradings, key=lambda k: (k[0], order.get(k[1], 0)))]
    specs = [labspec.load(Path(d) / "lab.json") for d in run.data["labs"].values()]
    plan = ClassPlan(run.submissions, run.out, specs, run.data["students"], [], run.data["lab_order"],
                     run.data.get("missing_as_zero", False), list(run.data.get("notes", [])))
    result = classgrade.finish(plan, ordered, [f"run: {run.path} (jobs: " + ", ".join(
        f"{k} {v}" for k, v in (run.data.get("jobs") or {}).items()) + ")"])
    for leftover in ("pending", "builds"):
        shutil.rmtree(run.path / leftover, ignore_errors=True)
    run.data["merged"] = outdir.now()
    outdir.write_json(run.path / RUN_FILE, run.data)
    status.close("done")
    return result


def gradings_of(out: Path, keys: list[tuple[str, str]]) -> list[Grading]:
    """Gradings read back from OUT's reports for these (student, lab) keys, those that exist."""
    found = []
    for student, lab in keys:
        data = outdir.read_json(outdir.report_path(out, student, lab))
        if data is not None:
            found.append(Grading.from_report(student, data))
    return found
