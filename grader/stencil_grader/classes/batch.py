"""A class grading run by a batch system, whatever the engine (grader/README.md, section 9, "A batch system"): the run
folder OUT/batch/run-N/ (RunDir; on a filesystem every node sees), what an engine module of engines/ must do
(BatchEngine), and `grade.py <engine>` (submit: plan, check, then --dry-run or the jobs, which run tasks.py)."""

import argparse
import math
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..base.files import write_atomic, write_json
from .. import __version__
from ..base import gpus as gpulist
from ..base import labspec
from ..grading import build, score
from . import classfiles, grades, outdir, plan as planning, resources, resume, worker
from .plan import Task
from .resume import Saved
from .submissions import ClassError

TASK_STAGES = ("build", "gpu", "merge")
PYTHON_MIN = (3, 11)          # the oldest Python the kit runs on (README); the job scripts check it
RUN_FILE = "run.json"
SETUP_FILE = "setup.sh"
#: The most bytes --setup FILE may hold (module loads and a virtual environment are a few lines).
SETUP_MAX_BYTES = 64 * 1024
#: Filesystems that only the node that mounts them can see.
LOCAL_FILESYSTEMS = {"tmpfs": "a tmpfs (memory of this node)", "ramfs": "a ramfs (memory of this node)",
                     "overlay": "an overlay (a container's own filesystem)", "ext4": "a local ext4 disk",
                     "xfs": "a local xfs disk", "btrfs": "a local btrfs disk"}
_ARCH = re.compile(r"^\d{2,3}([ ,]\d{2,3})*$")


class RunDir:
    """A run folder: its run.json (data), its gradings (items; a grading's position names its files), their shards."""

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self.name, data = self.path.name, outdir.read_json(self.path / RUN_FILE)
        if data is None:
            raise ClassError(f"{self.path / RUN_FILE}: no run here (is OUT on a filesystem this node sees?)")
        if data.get("kit_version") != __version__:
            raise ClassError(f"{self.path} was planned by kit version {data.get('kit_version')}, this is "
                             f"{__version__}: submit the class again")
        self.data, self.out, self.submissions = data, Path(data["out"]), Path(data["submissions"])
        specs = {lab: labspec.load(Path(lab_dir) / "lab.json") for lab, lab_dir in
                 {i["lab"]: i["lab_dir"] for i in data["items"]}.items()}
        self.items = [Task(i["student"], specs[i["lab"]], Path(i["source"])) for i in data["items"]]

    def shard(self, stage: str, index: int) -> list[tuple[int, Task]]:
        """(position, grading) of task `index` of an array; ClassError for an index out of range."""
        if not 0 <= index < self.data["tasks"]:
            raise ClassError(f"{stage} task {index}: this run has tasks 0 to {self.data['tasks'] - 1}")
        return list(enumerate(self.items))[index * self.data["shard_size"]:(index + 1) * self.data["shard_size"]]

    def status_path(self, stage: str, index: int) -> Path:
        return self.path / "tasks" / f"{stage}-{index}.json"

    def pending_path(self, position: int) -> Path:          # a build waiting for its GPU stages
        return self.path / "pending" / f"{position}.json"

    def done_here(self, task: Task) -> Saved | None:
        """What this run saved of task in OUT (its report, or its attempt beside the grade that stood)."""
        report = outdir.read_json(outdir.report_path(self.out, task.student, task.lab))
        if report and (report.get("class") or {}).get("run") == self.name:
            return Saved(task.student, task.lab, report)
        attempt = outdir.read_json(outdir.attempt_path(self.out, task.student, task.lab))
        if attempt and (attempt.get("class") or {}).get("run") == self.name:
            return Saved(task.student, task.lab, attempt, report)
        return None


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
    """The options of add_options, checked; setup: the lines of --setup FILE."""
    arch: str | None
    per_task: int | None
    max_running: int | None
    time_per_lab: float | None
    recording: list[Path] | None
    setup: list[str]
    dry_run: bool

    @classmethod
    def checked(cls, args: argparse.Namespace) -> "BatchOptions":
        """ClassError naming an option out of range, or a --setup FILE unreadable, not UTF-8 or over SETUP_MAX_BYTES."""
        arch, setup, per_task, time_per_lab = args.arch, args.setup, args.per_task, args.time_per_lab
        for name, value in (("per-task", per_task), ("max-running", args.max_running)):
            if value is not None and value < 1:
                raise ClassError(f"--{name} must be at least 1")
        if time_per_lab is not None and time_per_lab <= 0:
            raise ClassError("--time-per-lab must be a positive number of seconds")
        if arch is not None and not _ARCH.match(arch.strip()):
            raise ClassError(f"--arch {arch!r}: give compute capabilities without the dot, e.g. 90 or '80 90'")
        try:
            data = Path(setup).read_bytes() if setup else b""
            if len(data) > SETUP_MAX_BYTES or b"\0" in data:
                raise ClassError(f"--setup {setup} is not a short text file of shell lines (module loads, a virtual "
                                 f"environment; at most {SETUP_MAX_BYTES} bytes)")
            lines = data.decode("utf-8").splitlines()
        except OSError as err:
            raise ClassError(f"--setup {setup}: cannot read it ({err.strerror}); give a file of shell lines such as "
                             "'module load cuda/12.4'") from None
        except UnicodeDecodeError:
            raise ClassError(f"--setup {setup} is not UTF-8 text") from None
        return cls(arch.replace(",", " ").strip() if arch else None, per_task, args.max_running, time_per_lab,
                   args.recording, lines, args.dry_run)


@dataclass
class Shape:
    """What an engine needs to write a run's jobs (class_name: the submissions folder's)."""
    path: Path
    class_name: str
    tasks: int
    shard_size: int
    requests: dict[str, resources.Request]
    max_running: int | None
    setup: list[str]


def task_command(shape: Shape, stage: str, task_expr: str | None, job_expr: str | None) -> list[str]:
    """The lines that end a job script: --setup's, the node's python3 checked against PYTHON_MIN, then `exec python3
    grade.py class-task STAGE RUN --task TASK --job JOB`; task_expr, job_expr: the engine's shell words for its array
    index and job id (double-quoted); every other word shlex-quoted, and never a student's name."""
    lines = [f"# the lines of --setup (a copy: {shape.path / SETUP_FILE})"] + shape.setup if shape.setup else []
    need, fix = ".".join(map(str, PYTHON_MIN)), "add a module load or a virtual environment to --setup"
    lines += [f'PYTHON=$(command -v python3) || {{ echo "no python3 on $(hostname): {fix}" >&2; exit 2; }}',
              f'"$PYTHON" -c \'import sys; sys.exit(sys.version_info < {PYTHON_MIN})\' || '
              f'{{ echo "$("$PYTHON" -V 2>&1) at $PYTHON on $(hostname): the kit needs Python {need} or later; '
              f'{fix}" >&2; exit 2; }}']
    words = " ".join(shlex.quote(str(a)) for a in (worker.GRADE_PY, "class-task", stage, shape.path))
    words += (f' --task "{task_expr}"' if task_expr else "") + (f' --job "{job_expr}"' if job_expr else "")
    return lines + [f'exec "$PYTHON" {words}']


class BatchEngine:
    """A batch system: one module of engines/ defines one subclass, made `grade.py <name>` by commands.py.  Class
    attributes: name, summary, log_pattern (its tasks' output in the run folder), max_tasks (of one array; None: any),
    gpu_locks ("engine": it gives each gpu task its own GPU; "node": a node's tasks share its GPUs under locks),
    follow (a command following {jobs}, or "").  A subclass defines scripts(shape) ({file name: text}),
    commands(shape) (the shell lines that would submit them) and submit_jobs(shape) (build array, GPU array after
    it, merge after every GPU task whatever their end: {stage: job id}; ClassError after cancelling what it
    submitted); it may override add_options(parser) (its own options: its __init__'s keywords), check() (ClassError
    when unusable here), validate(shape) (--dry-run's lines) and still_queued(jobs)."""

    name, summary, log_pattern = "batch", "a batch system", "logs/{stage}-{job}_{task}.out"
    max_tasks, gpu_locks, follow = None, "engine", ""

    def __init__(self, options: BatchOptions, say: Callable[[str], None] = print):
        self.options, self.say, self.notes = options, say, []

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        pass

    def check(self) -> None:
        pass

    def validate(self, shape: Shape) -> list[str]:
        return []

    def still_queued(self, jobs: list[str]) -> list[str]:
        return []


def _shape(engine: BatchEngine, plan: planning.ClassPlan, items: list[Task]) -> Shape:
    """The shape of a run of these gradings in the next run folder of OUT (resources.py's requests)."""
    o = engine.options
    try:
        recording = resources.load(o.recording, planning.KIT_ROOT)
    except ValueError as err:
        raise ClassError(f"{err}; give another --recording, or remove the file") from None
    per_task = o.per_task or resources.default_per_task(recording, plan.specs)
    size = max(1, per_task, math.ceil(len(items) / engine.max_tasks) if engine.max_tasks else 1)
    count = math.ceil(len(items) / size)
    if o.per_task and size != o.per_task:           # said, never silently
        engine.notes.append(f"--per-task {o.per_task} raised to {size}: {len(items)} grading(s) must fit in at "
                            f"most {engine.max_tasks} task(s) per array (the engine's limit: --array-max)")
        engine.say(engine.notes[-1])
    shards = [[t.spec for t in items[k * size:(k + 1) * size]] for k in range(count)]
    requests = {stage: resources.task_request(stage, shards, recording, o.time_per_lab) for stage in ("build", "gpu")}
    requests["merge"] = resources.merge_request(len(items) + len(plan.kept))
    taken = [int(p.name[4:]) for p in outdir.run_folders(plan.out) if p.name[4:].isdigit()]
    path = plan.out / outdir.RUNS / f"run-{max(taken, default=0) + 1}"
    return Shape(path, plan.submissions.name, count, size, requests, o.max_running, o.setup)


def submit(engine: BatchEngine, submissions: Path, out: Path, labs: list[str] | None = None,
           student: str | None = None, missing_as_zero: bool = False, regrade: bool = False) -> int:
    """`grade.py <engine>` (module docstring): check, plan (labs, student: None for all), then --dry-run or submit;
    the exit status.  ClassError for a refusal (before anything is written)."""
    say, o = engine.say, engine.options
    plan = planning.make_plan(submissions, out, labs, student, None, missing_as_zero, regrade)
    if why := build.make_path_problem(plan.out):      # a batch run builds in OUT/batch/run-N/builds/
        raise ClassError(f"--out {plan.out} {why}, which make cannot take, and the batch jobs build under --out "
                         "(a folder every node sees): choose an --out without it")
    if o.arch is None:
        found, why = gpulist.list_gpus()
        caps = sorted({g.compute_cap.replace(".", "") for g in found if g.compute_cap})
        if why or len(caps) != 1:
            why = why or (f"this node has GPUs of several architectures ({', '.join('sm_' + c for c in caps)})"
                          if caps else "nvidia-smi does not say the GPUs' compute capability")
            raise ClassError(f"--arch is required here: {why}; the build tasks need to know the GPUs' "
                             "architecture (e.g. --arch 90 for H100, 80 for A100, '80 90' for both)")
        o.arch = caps[0]
        say(f"building for sm_{o.arch} (the GPUs of this node; --arch to choose)")
    if not o.dry_run:
        engine.check()
        for path, data in outdir.unmerged_runs(plan.out):
            if queued := engine.still_queued([str(j) for j in data["jobs"].values()]):
                raise ClassError(f"{path.name} of {plan.out} still has jobs queued or running ({', '.join(queued)}): "
                                 f"wait for its merge, or cancel them, then run this again")
    items = [t for t in plan.tasks if t.source]
    missing = [t for t in plan.tasks if t.source is None]
    say(f"{len(plan.students)} student(s) x {len(plan.specs)} lab(s): {len(items)} to grade, {len(plan.kept)} "
        f"already graded (final for the same kernel.cu, kit version and lab.json), {len(missing)} missing")
    for note in plan.notes:
        say(note)
    target = str((plan.out if plan.out.exists() else plan.out.parent).resolve()) + "/"
    try:                                    # OUT's filesystem: the type of the longest mount point holding it
        held = [f for f in map(str.split, Path("/proc/mounts").read_text().splitlines())
                if len(f) >= 3 and target.startswith(f[1].replace("\\040", " ").rstrip("/") + "/")]
    except OSError:
        held = []
    if held and (fs := max(reversed(held), key=lambda f: len(f[1]))[2]) in LOCAL_FILESYSTEMS:
        engine.notes.append(f"warning: {plan.out} is on {LOCAL_FILESYSTEMS[fs]}; the jobs pass builds through it, "
                            "so it must be on a filesystem every node sees (unless the whole cluster is this one node)")
        say(engine.notes[-1])
    if o.dry_run and not items:
        say("nothing to grade: every submitted lab already has a final grade (--dry-run: nothing written)")
        return 0
    shape = _shape(engine, plan, items) if items else None
    if o.dry_run:
        for line in ([f"---- {shape.path / name}\n{text}" for name, text in engine.scripts(shape).items()]
                     + ["---- the commands, as shell lines (--dry-run: nothing submitted, nothing written)"]
                     + engine.commands(shape) + ["---- what was checked here"]):
            say(line)
        for line in engine.validate(shape):
            say(line)
        return 0
    outdir.claim(plan.out, plan.submissions)
    for task in missing:
        report = grades.placeholder(task.spec, task.student, score.MISSING, task.why_missing)
        report["class"] = resume.stamp(None, task.spec, engine.name, "submit")
        resume.save(plan.out, task.student, task.lab, report, task.why_missing + "\n", plan.asked)
    if shape is None:
        say("nothing to grade: every submitted lab already has a final grade; class files rewritten")
        for line in classfiles.class_files(plan.out, plan.lab_order, plan.missing_as_zero, plan.notes + engine.notes,
                                           [], len(plan.kept), plan.lab_facts, plan.roster).summary:
            say(line)
        return 0
    for sub in ("logs", "tasks", "pending", "builds"):
        (shape.path / sub).mkdir(parents=True, exist_ok=True)
    write_json(shape.path / RUN_FILE, {
        "what": "stencil lab kit class grading run", "engine": engine.name, "kit_version": __version__,
        "created": outdir.now(), "submissions": str(plan.submissions), "out": str(plan.out), "arch": o.arch,
        "students": plan.students, "labs": {s.lab: str(s.lab_dir) for s in plan.specs}, "lab_order": plan.lab_order,
        "lab_facts": plan.lab_facts, "missing_as_zero": plan.missing_as_zero, "notes": plan.notes + engine.notes,
        "asked": plan.asked, "kept": len(plan.kept),
        "items": [{"student": t.student, "lab": t.lab, "lab_dir": str(t.spec.lab_dir), "source": str(t.source)}
                  for t in items],
        "missing": [[t.student, t.lab] for t in missing], "shard_size": shape.shard_size, "tasks": shape.tasks,
        "gpu_locks": engine.gpu_locks, "limits": {"per_lab": o.time_per_lab},
        "requests": {k: vars(v) for k, v in shape.requests.items()}, "log_pattern": engine.log_pattern, "jobs": {}})
    if shape.setup:
        write_atomic(shape.path / SETUP_FILE, "\n".join(shape.setup) + "\n")
    for name, text in engine.scripts(shape).items():
        write_atomic(shape.path / name, text).chmod(0o755)
    try:
        jobs = engine.submit_jobs(shape)
    except ClassError:
        shutil.rmtree(shape.path, ignore_errors=True)     # nothing of it runs: no trace of it
        raise
    data = outdir.read_json(shape.path / RUN_FILE)        # read again: an engine's jobs may have run already
    write_json(shape.path / RUN_FILE, dict(data, jobs=dict(data["jobs"], **jobs)))
    say(f"\nsubmitted {shape.path}: {len(items)} grading(s) in {shape.tasks} task(s) of {shape.shard_size} per "
        "array; jobs " + ", ".join(f"{k} {v}" for k, v in jobs.items()))
    if engine.follow:
        say(f"  follow with: {engine.follow.format(jobs=','.join(jobs.values()))}")
    say(f"  the merge writes {plan.out / 'class.csv'} and {plan.out / 'summary.txt'}; "
        "run this same command again to grade whatever did not finish")
    return 0
