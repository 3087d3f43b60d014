"""A class grading run by a batch system, whatever the engine (grader/README.md, section 9, "A batch
system"): the run folder OUT/batch/run-N/ (RunDir: run.json, the job scripts, logs/, tasks/,
pending/, builds/; on a filesystem every node sees), what an engine module of engines/ must do
(BatchEngine) and `grade.py <engine>` (submit: plan, check, then --dry-run or the three jobs:
a build array, a GPU array, the merge; what they run is tasks.py)."""

from __future__ import annotations

import argparse
import math
import re
import shlex
import shutil
from abc import abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import __version__
from ..base import gpus as gpulist
from ..base import labspec
from ..grading import build
from . import classfiles, grades, outdir, plan as planning, resources, resume, worker
from .backend import Backend
from .plan import ClassPlan, Task
from .resume import Saved
from .submissions import ClassError, shown

TASK_STAGES = ("build", "gpu", "merge")
PYTHON_MIN = (3, 11)          # the oldest Python the kit runs on (README); the job scripts check it
RUN_FILE = "run.json"
RUNS = outdir.RUNS
SETUP_FILE = "setup.sh"
#: The most bytes --setup FILE may hold (module loads and a virtual environment are a few lines).
SETUP_MAX_BYTES = 64 * 1024
#: Filesystems that only the node that mounts them can see.
LOCAL_FILESYSTEMS = {"tmpfs": "a tmpfs (memory of this node)", "ramfs": "a ramfs (memory of this node)",
                     "overlay": "an overlay (a container's own filesystem)", "ext4": "a local ext4 disk",
                     "xfs": "a local xfs disk", "btrfs": "a local btrfs disk"}
_ARCH = re.compile(r"^\d{2,3}([ ,]\d{2,3})*$")


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


def shards(count: int, per_task: int, max_tasks: int | None = None) -> tuple[int, int]:
    """(gradings per task, tasks) for `count` gradings, per_task a task, in at most max_tasks tasks."""
    if count == 0:
        return 0, 0
    size = max(1, per_task, math.ceil(count / max_tasks) if max_tasks else 1)
    return size, math.ceil(count / size)


def check_out(out: Path) -> None:
    """ClassError when OUT is a path make cannot take (a space: build.make_path_problem): a batch
    run builds in OUT/batch/run-N/builds/, which every node sees."""
    if why := build.make_path_problem(out):
        raise ClassError(f"--out {out} {why}, which make cannot take, and the batch jobs build under --out "
                         "(a folder every node sees): choose an --out without it")


def next_run_dir(out: Path) -> Path:
    """OUT/batch/run-N for the first N taken by no run of OUT (outdir.run_folders)."""
    taken = [int(p.name[4:]) for p in outdir.run_folders(out) if p.name[4:].isdigit()]
    return out / RUNS / f"run-{max(taken, default=0) + 1}"


class RunDir:
    """A run folder (module docstring) and its run.json."""

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        data = outdir.read_json(self.path / RUN_FILE)
        if data is None:
            raise ClassError(f"{self.path / RUN_FILE}: no run here (is OUT on a filesystem this node sees?)")
        if data.get("kit_version") != __version__:
            raise ClassError(f"{self.path} was planned by kit version {data.get('kit_version')}, this is "
                             f"{__version__}: submit the class again")
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

    def done_here(self, item: Item) -> Saved | None:
        """What this run saved of item in OUT (outdir.save: its report, or its attempt beside the
        grade that stood), when this run saved it."""
        report = outdir.read_json(outdir.report_path(self.out, item.student, item.lab))
        if report and (report.get("class") or {}).get("run") == self.name:
            return Saved(item.student, item.lab, report)
        attempt = outdir.read_json(outdir.attempt_path(self.out, item.student, item.lab))
        if attempt and (attempt.get("class") or {}).get("run") == self.name:
            return Saved(item.student, item.lab, attempt, report)
        return None

    def save(self, item: Item, report: dict, log: str) -> Saved:
        """Save item's report in OUT (outdir.save, with the run's --regrade or --student)."""
        return resume.save(self.out, item.student, item.lab, report, log, bool(self.data.get("asked")))


def record_jobs(run: RunDir, jobs: dict[str, str]) -> None:
    """Add the engine's job ids to run.json (the merge names them)."""
    run.data["jobs"] = dict(run.data.get("jobs") or {}, **jobs)
    outdir.write_json(run.path / RUN_FILE, run.data)


# ------------------------------------------------------------------------------- options

def add_options(p: argparse.ArgumentParser) -> None:
    """The options of every batch engine's command, beside the class options."""
    p.add_argument("--arch", help="CUDA architecture(s) to build for, e.g. 90 or '80 90' (required when no GPU "
                                  "is visible here; default: this node's GPUs)")
    p.add_argument("--per-task", type=int, metavar="N",
                   help="gradings per task (default: about ten minutes of the recorded GPU stages, "
                        f"{resources.NOT_MEASURED_PER_TASK} without a recording)")
    p.add_argument("--max-running", type=int, metavar="N", help="at most N tasks of each array at once")
    p.add_argument("--time-per-lab", type=float, metavar="S",
                   help="seconds one grading may take in each stage, instead of the recorded medians")
    p.add_argument("--recording", type=Path, action="append", metavar="FILE",
                   help=f"what the labs' stages use (default: every {resources.RECORDINGS} of the kit; repeatable)")
    p.add_argument("--setup", type=Path, metavar="FILE",
                   help="shell lines that open every job script (module loads, a virtual environment)")
    p.add_argument("--dry-run", action="store_true",
                   help="check what can be checked, print the scripts and commands; submit and write nothing")


@dataclass
class BatchOptions:
    """The options of add_options, checked (checked())."""

    arch: str | None = None
    per_task: int | None = None
    max_running: int | None = None
    time_per_lab: float | None = None
    recording: list[Path] | None = None
    setup: list[str] = field(default_factory=list)
    dry_run: bool = False

    @classmethod
    def checked(cls, arch: str | None = None, per_task: int | None = None, max_running: int | None = None,
                time_per_lab: float | None = None, recording: list[Path] | None = None, setup: Path | None = None,
                dry_run: bool = False) -> "BatchOptions":
        """add_options' options (setup: the FILE, read here); ClassError naming one out of range."""
        for name, value in (("per-task", per_task), ("max-running", max_running)):
            if value is not None and value < 1:
                raise ClassError(f"--{name} must be at least 1")
        if time_per_lab is not None and time_per_lab <= 0:
            raise ClassError("--time-per-lab must be a positive number of seconds")
        if arch is not None and not _ARCH.match(arch.strip()):
            raise ClassError(f"--arch {arch!r}: give compute capabilities without the dot, e.g. 90 or '80 90'")
        return cls(arch.replace(",", " ").strip() if arch else None, per_task, max_running, time_per_lab, recording,
                   read_setup(setup) if setup else [], dry_run)


def read_setup(path: Path) -> list[str]:
    """The lines of --setup FILE (ClassError: unreadable, not UTF-8 text, over SETUP_MAX_BYTES)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise ClassError(f"--setup {path}: cannot read it ({err.strerror}); give a file of shell lines such as "
                         "'module load cuda/12.4'") from None
    if len(data) > SETUP_MAX_BYTES or b"\0" in data:
        raise ClassError(f"--setup {path} is not a short text file of shell lines (module loads, a virtual "
                         f"environment; at most {SETUP_MAX_BYTES} bytes)")
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise ClassError(f"--setup {path} is not UTF-8 text") from None


def detect_arch() -> tuple[str | None, str]:
    """(the CUDA architecture of this node's GPUs, e.g. "90", "") or (None, why not)."""
    found, why = gpulist.list_gpus()
    if why:
        return None, why
    caps = sorted({g.compute_cap.replace(".", "") for g in found if g.compute_cap})
    if not caps:
        return None, "nvidia-smi does not say the GPUs' compute capability"
    if len(caps) > 1:
        return None, f"this node has GPUs of several architectures ({', '.join('sm_' + c for c in caps)})"
    return caps[0], ""


def filesystem_of(path: Path) -> str | None:
    """The filesystem type of the mount holding path (/proc/mounts), or None when unknown."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return None
    target = str(Path(path).resolve())
    best = ("", None)
    for fields in mounts:
        if len(fields) >= 3:
            point = fields[1].replace("\\040", " ")
            if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
                best = (point, fields[2])
    return best[1]


# ------------------------------------------------------------------------------- the engine

@dataclass
class Shape:
    """What an engine needs to write a run's jobs: its folder, name ("run-3"), the class's
    name (the submissions folder's, for job names), the tasks per array, each stage's request
    (resources.Request), at most how many tasks of an array run at once, the setup lines."""

    path: Path
    name: str
    class_name: str
    tasks: int
    shard_size: int
    requests: dict[str, resources.Request]
    max_running: int | None
    setup: list[str]


def task_command(shape: Shape, stage: str, task_expr: str | None, job_expr: str | None) -> list[str]:
    """The shell lines that end a job script of a shape: the setup lines, then the interpreter
    found on the node (after them: a module or a virtual environment may provide it) and its
    version checked (PYTHON_MIN: an older one fails in one line, not in a SyntaxError), then
    `exec python3 grade.py class-task STAGE RUN --task TASK --job JOB`.  task_expr, job_expr:
    the engine's shell words for its array index and job id (shell variables its jobs have),
    written in double quotes; every other word is quoted (shlex): only the kit's and OUT's
    paths, never a student's name (the tasks read their gradings from run.json)."""
    lines = []
    if shape.setup:
        lines += [f"# the lines of --setup (a copy: {shape.path / SETUP_FILE})"] + shape.setup
    need, fix = ".".join(map(str, PYTHON_MIN)), "add a module load or a virtual environment to --setup"
    lines += [f'PYTHON=$(command -v python3) || {{ echo "no python3 on $(hostname): {fix}" >&2; exit 2; }}',
              f'"$PYTHON" -c \'import sys; sys.exit(sys.version_info < {PYTHON_MIN})\' || {{ echo "$("$PYTHON" -V 2>&1) '
              f'at $PYTHON on $(hostname): the kit needs Python {need} or later; {fix}" >&2; exit 2; }}']
    words = " ".join(shlex.quote(str(a)) for a in (worker.GRADE_PY, "class-task", stage, shape.path))
    if task_expr:
        words += f' --task "{task_expr}"'
    if job_expr:
        words += f' --job "{job_expr}"'
    return lines + [f'exec "$PYTHON" {words}']


class BatchEngine(Backend):
    """A batch system: one module of classes/engines/ defines one subclass (and nothing else
    changes: engines/__init__.py finds it, commands.py makes it `grade.py <name>`).

    name: the command and the run's "engine"; summary: its help line; log_pattern: where its
    tasks write their output, in the run folder ({stage}, {job}, {task}); max_tasks: the
    most tasks of one array (None: no limit); gpu_locks: "engine" when it gives each gpu task
    its own GPU, "node" when the tasks of a node share its GPUs under locks (tasks.py)."""

    name = "batch"
    summary = "a batch system"
    log_pattern = "logs/{stage}-{job}_{task}.out"
    max_tasks: int | None = None
    gpu_locks = "engine"

    def __init__(self, options: BatchOptions, say: Callable[[str], None] = print):
        """options: the batch layer's; an engine with options of its own takes them as keywords."""
        super().__init__()
        self.options, self.say = options, say
        self.jobs: dict[str, str] = {}
        self.run_dir: RunDir | None = None

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        """The engine's own options, each with a default."""

    def validate(self, shape: Shape) -> list[str]:
        """What --dry-run can check here of the engine's options and of the scripts it would
        submit for shape (ClassError when wrong); lines saying what was checked and what not."""
        return []

    def still_queued(self, jobs: list[str]) -> list[str]:
        """Which of an earlier run's job ids the engine still has queued or running."""
        return []

    @abstractmethod
    def scripts(self, shape: Shape) -> dict[str, str]:
        """{file name: text} of the job scripts, written into the run folder."""

    @abstractmethod
    def commands(self, shape: Shape) -> list[str]:
        """The shell lines that would submit them (--dry-run)."""

    @abstractmethod
    def submit_jobs(self, shape: Shape, say: Callable[[str], None]) -> dict[str, str]:
        """Submit the scripts (module docstring: build, gpu, merge and their order); returns
        {stage: job id}.  ClassError when one is refused, after cancelling those submitted."""

    def follow(self, jobs: dict[str, str]) -> str:
        """A line saying how to follow the jobs."""
        return ""

    def run(self, plan: ClassPlan, say: Callable[[str], None]) -> None:
        """Create the run folder for plan's gradings, write the scripts, submit them."""
        items, missing = _items(plan)
        shape = self.shape(plan, items)
        path = shape.path
        for sub in ("logs", "tasks", "pending", "builds"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        data = {"what": "stencil lab kit class grading run", "engine": self.name, "kit_version": __version__,
                "created": outdir.now(), "submissions": str(plan.submissions), "out": str(plan.out),
                "arch": self.options.arch, "students": plan.students, "labs": {s.lab: str(s.lab_dir) for s in plan.specs},
                "lab_order": plan.lab_order, "lab_facts": plan.lab_facts, "missing_as_zero": plan.missing_as_zero,
                "notes": plan.notes + self.notes, "asked": plan.asked, "kept": len(plan.kept),
                "items": [vars(i) for i in items], "missing": [list(m) for m in missing],
                "shard_size": shape.shard_size, "tasks": shape.tasks, "gpu_locks": self.gpu_locks,
                "limits": {"per_lab": self.options.time_per_lab},
                "requests": {k: vars(v) for k, v in shape.requests.items()},
                "log_pattern": self.log_pattern, "jobs": {}}
        outdir.write_json(path / RUN_FILE, data)
        if shape.setup:
            outdir.write_atomic(path / SETUP_FILE, "\n".join(shape.setup) + "\n")
        for name, text in self.scripts(shape).items():
            outdir.write_atomic(path / name, text).chmod(0o755)
        try:
            self.jobs = self.submit_jobs(shape, say)
        except ClassError:
            shutil.rmtree(path, ignore_errors=True)     # nothing of it runs: no trace of it
            raise
        self.run_dir = RunDir(path)                     # read again: an engine's jobs may have run already
        record_jobs(self.run_dir, self.jobs)

    def shape(self, plan: ClassPlan, items: list[Item]) -> Shape:
        """The shape of a run of these items (the next run folder of OUT)."""
        o = self.options
        try:
            recording = resources.load(o.recording) if o.recording else resources.load(kit=planning.kit_root())
        except ValueError as err:
            raise ClassError(f"{err}; give another --recording, or remove the file") from None
        specs = {s.lab: s for s in plan.specs}
        per_task = o.per_task or resources.default_per_task(recording, list(specs.values()))
        size, count = shards(len(items), per_task, self.max_tasks)
        if o.per_task and size != o.per_task:           # said, never silently
            self.notes.append(f"--per-task {o.per_task} raised to {size}: {len(items)} grading(s) must fit in at "
                              f"most {self.max_tasks} task(s) per array (the engine's limit: --array-max)")
            self.say(self.notes[-1])
        parts = [[specs[i.lab] for i in items[k * size:(k + 1) * size]] for k in range(count)]
        requests = {stage: resources.task_request(stage, parts, recording, o.time_per_lab) for stage in ("build", "gpu")}
        requests["merge"] = resources.merge_request(len(items) + len(plan.kept))
        path = next_run_dir(plan.out)
        return Shape(path, path.name, plan.submissions.name, count, size, requests, o.max_running, o.setup)


def _items(plan: ClassPlan) -> tuple[list[Item], list[tuple[str, str]]]:
    """(the gradings of plan whose kernel.cu is there, the (student, lab) missing)."""
    items = [Item(t.student, t.lab, str(t.spec.lab_dir), str(t.source)) for t in plan.tasks if t.source]
    return items, [(t.student, t.lab) for t in plan.tasks if t.source is None]


def refuse_queued_runs(engine: BatchEngine, out: Path) -> None:
    """ClassError when an earlier run of OUT still has jobs queued or running (the engine says)."""
    for path, data in outdir.unmerged_runs(out):
        queued = engine.still_queued([str(j) for j in (data.get("jobs") or {}).values()])
        if queued:
            raise ClassError(f"{path.name} of {out} still has jobs queued or running ({', '.join(queued)}): "
                             f"wait for its merge, or cancel them, then run this again")


def submit(engine: BatchEngine, submissions: Path, out: Path, labs: list[str] | None = None,
           students: list[str] | None = None, missing_as_zero: bool = False, regrade: bool = False,
           kit_root: Path | None = None) -> int:
    """`grade.py <engine>` (module docstring): check, plan (labs, students: None for all), then
    --dry-run or submit; the exit status.  ClassError for a refusal (before anything is written)."""
    say = engine.say
    plan = planning.make_plan(submissions, out, labs, students, kit_root, missing_as_zero, regrade)
    check_out(plan.out)
    if engine.options.arch is None:
        engine.options.arch, why = detect_arch()
        if engine.options.arch is None:
            raise ClassError(f"--arch is required here: {why}; the build tasks need to know the GPUs' "
                             "architecture (e.g. --arch 90 for H100, 80 for A100, '80 90' for both)")
        say(f"building for sm_{engine.options.arch} (the GPUs of this node; --arch to choose)")
    if not engine.options.dry_run:
        engine.check()
        refuse_queued_runs(engine, plan.out)
    items, missing = _items(plan)
    say(f"{len(plan.students)} student(s) x {len(plan.specs)} lab(s): {len(items)} to grade, {len(plan.kept)} "
        f"already graded (final for the same kernel.cu, kit version and lab.json), {len(missing)} missing")
    for note in plan.notes:
        say(note)
    fs = filesystem_of(plan.out if plan.out.exists() else plan.out.parent)
    if fs in LOCAL_FILESYSTEMS:
        warning = (f"warning: {plan.out} is on {LOCAL_FILESYSTEMS[fs]}; the jobs pass builds through it, so it "
                   "must be on a filesystem every node sees (unless the whole cluster is this one node)")
        engine.notes.append(warning)
        say(warning)
    if engine.options.dry_run and not items:
        say("nothing to grade: every submitted lab already has a final grade (--dry-run: nothing written)")
        return 0
    if engine.options.dry_run:
        shape = engine.shape(plan, items)
        for name, text in engine.scripts(shape).items():
            say(f"---- {shape.path / name}")
            say(text)
        say("---- the commands, as shell lines (--dry-run: nothing submitted, nothing written)")
        for line in engine.commands(shape):
            say(line)
        say("---- what was checked here")
        for line in engine.validate(shape):
            say(line)
        return 0
    outdir.claim(plan.out, plan.submissions)
    for task in plan.tasks:
        if task.source is None:
            report = grades.placeholder(task.spec, task.student, grades.MISSING, task.why_missing)
            report["class"] = resume.stamp(None, task.spec, engine.name, "submit")
            resume.save(plan.out, task.student, task.lab, report, task.why_missing + "\n", plan.asked)
    if not items:
        say("nothing to grade: every submitted lab already has a final grade; class files rewritten")
        result = classfiles.class_files(plan.out, plan.lab_order, plan.missing_as_zero, plan.notes + engine.notes,
                                        [], len(plan.kept), plan.lab_facts, plan.roster)
        for line in result.summary:
            say(line)
        return 0
    engine.run(plan, say)
    run = engine.run_dir
    say(f"\nsubmitted {run.path}: {len(items)} grading(s) in {run.data['tasks']} task(s) of "
        f"{run.data['shard_size']} per array; jobs " + ", ".join(f"{k} {v}" for k, v in engine.jobs.items()))
    if follow := engine.follow(engine.jobs):
        say(f"  follow with: {follow}")
    say(f"  the merge writes {plan.out / 'class.csv'} and {plan.out / 'summary.txt'}; "
        "run this same command again to grade whatever did not finish")
    return 0
