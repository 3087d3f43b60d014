"""`grade.py slurm`: a class graded by Slurm job arrays, the engine university clusters run.

    grade.py slurm SUBMISSIONS --out DIR [--partition P] [--cpu-partition P] [--account A]
                   [--gres gpu:1] [--array-max N] [--time-per-lab S] [--arch ARCH]
                   [--sbatch-option OPT ...] [--student NAME] [--labs ...] [--dry-run]

run on a login node, writes three batch scripts under DIR/slurm/run-N/ and submits them
with sbatch (batch.py describes the run folder and what each task does):

    build.sbatch   a CPU job array: build and static checks of every grading, for --arch
    gpu.sbatch     a GPU job array (--gres=gpu:1 per task), --dependency=afterany on the
                   first: each task runs the GPU stages of its shard on the GPU Slurm gave it
    merge.sbatch   one job, --dependency=afterany on the second: class.csv, gradings.csv,
                   the Gradescope files, summary.txt

afterany, not afterok: a build task that Slurm kills (or that fails) must not keep every
GPU task, and the merge, pending forever; the later steps see what is missing and say so.

The run folder passes builds from node to node: DIR (and SUBMISSIONS, and the kit) must be
on a filesystem that every node sees.  Where that can be checked it is: the submitting
node warns when DIR is on a filesystem of its own (tmpfs, a local disk), and the merge
names every task whose results it cannot see.

Resumable: a (student, lab) whose report is final for the same kernel.cu, kit version and
lab.json (outdir.is_final) is not graded again (plan.py); --student NAME regrades that
student whatever is there, --regrade every selected lab.  A second submission while an
earlier run of DIR is still queued is refused (its gradings would be graded twice).
DIR must be a path make can take (batch.check_out: the builds are made under it).
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..base import gpus as gpulist
from ..base.cliargs import lab_list
from . import batch, merge, outdir, plan as planning, worker
from .backend import Backend
from .plan import ClassPlan
from .submissions import ClassError

DEFAULT_ARRAY_MAX = 1000          # Slurm's default MaxArraySize is 1001 (indices 0 to 1000)
LOG_PATTERN = "logs/{stage}-{job}_{task}.out"
#: Seconds a task needs beyond its gradings (start-up, the GPU probe, Python).
TASK_SLACK_S = 120
SLURM_TIMEOUT_S = 60.0
#: Filesystems that only the node that mounts them can see.
LOCAL_FILESYSTEMS = {"tmpfs": "a tmpfs (memory of this node)", "ramfs": "a ramfs (memory of this node)",
                     "overlay": "an overlay (a container's own filesystem)", "ext4": "a local ext4 disk",
                     "xfs": "a local xfs disk", "btrfs": "a local btrfs disk"}
_ARCH = re.compile(r"^\d{2,3}([ ,]\d{2,3})*$")


def add_options(p: argparse.ArgumentParser) -> None:
    """The options of `grade.py slurm` beside the class options."""
    p.add_argument("--partition", help="Slurm partition of the GPU tasks (and the others, unless "
                                       "--cpu-partition); default: the cluster's default partition")
    p.add_argument("--cpu-partition", help="Slurm partition of the build tasks and the merge (default: --partition)")
    p.add_argument("--account", help="Slurm account to charge (sbatch --account)")
    p.add_argument("--gres", default="gpu:1",
                   help="what each GPU task asks for (default gpu:1; 'none' on a partition whose nodes give "
                        "GPUs without gres)")
    p.add_argument("--array-max", type=int, default=DEFAULT_ARRAY_MAX, metavar="N",
                   help=f"at most N tasks per job array; gradings are split into that many shards "
                        f"(default {DEFAULT_ARRAY_MAX}, within Slurm's default MaxArraySize)")
    p.add_argument("--time-per-lab", type=float, metavar="S",
                   help="seconds one lab may take in each stage; a task's --time is its shard times this "
                        "(default: the labs' own stage limits)")
    p.add_argument("--arch", help="CUDA architecture(s) to build for, e.g. 90 or '80 90' (required when no GPU "
                                  "is visible here; default: this node's GPUs)")
    p.add_argument("--sbatch-option", action="append", default=[], metavar="OPT",
                   help="an extra sbatch option for every job, e.g. --sbatch-option=--qos=short (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the scripts and sbatch commands; submit nothing")


@dataclass
class SlurmOptions:
    """What `grade.py slurm` was told (add_options)."""

    partition: str | None = None
    cpu_partition: str | None = None
    account: str | None = None
    gres: str = "gpu:1"
    array_max: int = DEFAULT_ARRAY_MAX
    time_per_lab: float | None = None
    arch: str | None = None
    sbatch_options: list[str] = field(default_factory=list)
    dry_run: bool = False
    python: str = sys.executable

    @classmethod
    def from_args(cls, args) -> "SlurmOptions":
        if args.array_max < 1:
            raise ClassError("--array-max must be at least 1")
        if args.time_per_lab is not None and args.time_per_lab <= 0:
            raise ClassError("--time-per-lab must be a positive number of seconds")
        if args.arch is not None and not _ARCH.match(args.arch.strip()):
            raise ClassError(f"--arch {args.arch!r}: give compute capabilities without the dot, e.g. 90 or '80 90'")
        return cls(args.partition, args.cpu_partition, args.account, args.gres, args.array_max, args.time_per_lab,
                   args.arch.replace(",", " ").strip() if args.arch else None, list(args.sbatch_option),
                   args.dry_run)


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


def _minutes(seconds: float) -> int:
    return max(1, math.ceil(seconds / 60))


class SlurmBackend(Backend):
    """Submits a class to Slurm (module docstring)."""

    name = "slurm"

    def __init__(self, options: SlurmOptions, say: Callable[[str], None] = print):
        super().__init__()
        self.options = options
        self.say = say
        self.run_dir: batch.RunDir | None = None
        self.jobs: dict[str, str] = {}

    # ---------------------------------------------------------------- checks
    def _slurm(self, *argv: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(list(argv), capture_output=True, text=True, timeout=SLURM_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            return None

    def check(self) -> None:
        """sbatch on PATH; the partitions known to the cluster (sinfo)."""
        if shutil.which("sbatch") is None:
            raise ClassError("sbatch not found on PATH: run grade.py slurm on a login node of a Slurm cluster "
                             "(--dry-run prints the scripts without it; grade.py class grades on one machine)")
        wanted = [p for p in (self.options.partition, self.options.cpu_partition) if p]
        if wanted and shutil.which("sinfo"):
            done = self._slurm("sinfo", "-h", "-o", "%R")
            if done is not None and done.returncode == 0:
                known = sorted(set(done.stdout.split()))
                for p in wanted:
                    if p not in known:
                        raise ClassError(f"unknown partition {p!r}: this cluster's partitions are "
                                         f"{', '.join(known) or 'none'} (sinfo)")

    def check_earlier_runs(self, out: Path) -> None:
        """ClassError when an earlier run of OUT still has jobs queued or running (squeue)."""
        if not shutil.which("squeue"):
            return
        for path, data in batch.earlier_runs(out):
            queued = []
            for job in (data.get("jobs") or {}).values():
                done = self._slurm("squeue", "-h", "-o", "%i", "-j", str(job))
                if done is not None and done.returncode == 0 and done.stdout.strip():
                    queued.append(str(job))
            if queued:
                raise ClassError(f"{path.name} of {out} still has jobs queued or running ({', '.join(queued)}): "
                                 f"wait for its merge, or scancel {' '.join(queued)}, then run this again")

    # ---------------------------------------------------------------- scripts
    def script(self, stage: str, run_path: Path, tasks: int, task_seconds: float) -> str:
        """The batch script of one stage (build, gpu, merge)."""
        o = self.options
        partition = o.partition if stage == "gpu" else (o.cpu_partition or o.partition)
        lines = ["#!/bin/bash", f"#SBATCH --job-name=stencil-{stage}"]
        if stage != "merge":
            lines.append(f"#SBATCH --array=0-{tasks - 1}")
        if partition:
            lines.append(f"#SBATCH --partition={partition}")
        if o.account:
            lines.append(f"#SBATCH --account={o.account}")
        if stage == "gpu" and o.gres and o.gres != "none":
            lines.append(f"#SBATCH --gres={o.gres}")
        pattern = LOG_PATTERN.format(stage=stage, job="%A", task="%a") if stage != "merge" else "logs/merge-%j.out"
        lines += [f"#SBATCH --time={_minutes(task_seconds)}", "#SBATCH --cpus-per-task=1",
                  "#SBATCH --open-mode=append", f"#SBATCH --output={run_path / pattern}"]
        lines += [f"#SBATCH {opt}" for opt in o.sbatch_options]
        what = {"build": "builds and static checks of this task's shard (no GPU)",
                "gpu": "GPU stages of this task's shard, on the GPU Slurm gives it",
                "merge": "class.csv, gradings.csv, Gradescope files and summary.txt of the run"}[stage]
        lines += ["#", f"# {what}.", "# Written by grade.py slurm (stencil lab kit); the run folder must be on a "
                  "filesystem every node sees.", ""]
        # A shell script: every word quoted (shlex), and only the kit's and OUT's paths in it,
        # never a student's name (the tasks read their gradings from run.json).
        call = [o.python, str(worker.GRADE_PY), "class-task", stage, str(run_path)]
        command = " ".join(shlex.quote(a) for a in call)
        if stage != "merge":
            command += ' --task "$SLURM_ARRAY_TASK_ID"'
        lines.append(f"exec {command}")
        return "\n".join(lines) + "\n"

    def sbatch_command(self, stage: str, run_path: Path, after: str | None) -> list[str]:
        argv = ["sbatch", "--parsable"]
        if after:
            argv += [f"--dependency=afterany:{after}", "--kill-on-invalid-dep=yes"]
        return argv + [str(run_path / f"{stage}.sbatch")]

    def limits(self, plan: ClassPlan, shard_size: int) -> dict:
        """Seconds per lab in each stage, and per task (its shard)."""
        per_lab = self.options.time_per_lab
        build = per_lab or max(worker.time_limit_s(s, 1, stage="build") for s in plan.specs)
        gpu = per_lab or max(worker.time_limit_s(s, 1, stage="gpu") for s in plan.specs)
        return {"per_lab": per_lab, "build_task_s": shard_size * build + TASK_SLACK_S,
                "gpu_task_s": shard_size * gpu + TASK_SLACK_S,
                "merge_s": 0.05 * len(plan.tasks) + TASK_SLACK_S * 5}

    def preview(self, plan: ClassPlan, items: list[batch.Item], say: Callable[[str], None]) -> None:
        """--dry-run: the scripts and sbatch commands this run would submit."""
        run_path = batch.next_run_dir(plan.out)
        size, count = batch.shards(len(items), self.options.array_max)
        limits = self.limits(plan, size)
        for stage in ("build", "gpu", "merge"):
            say(f"---- {run_path / (stage + '.sbatch')}")
            say(self.script(stage, run_path, count, limits[f"{stage}_task_s" if stage != "merge" else "merge_s"]))
        say("---- the sbatch commands, as shell lines (--dry-run: nothing submitted, nothing written)")
        previous = None
        for stage in ("build", "gpu", "merge"):
            argv = self.sbatch_command(stage, run_path, previous)
            line = " ".join(a if a.startswith("--dependency=") else shlex.quote(a) for a in argv)
            say(f"{stage.upper()}_JOB=$({line})" if stage != "merge" else line)
            previous = f"${stage.upper()}_JOB"

    # ---------------------------------------------------------------- submission
    def _submit_one(self, stage: str, after: str | None) -> str:
        argv = self.sbatch_command(stage, self.run_dir.path, after)
        done = self._slurm(*argv)
        if done is None or done.returncode != 0:
            why = (done.stderr or done.stdout).strip() if done is not None else "sbatch could not be run"
            started = list(self.jobs.values())
            if started:
                self._slurm("scancel", *started)
            raise ClassError(f"sbatch refused the {stage} job: {why}"
                             + (f" (the jobs already submitted, {', '.join(started)}, were cancelled)" if started
                                else ""))
        job = done.stdout.strip().split(";")[0]
        self.say(" ".join(shlex.quote(a) for a in argv) + f"   -> job {job}")
        return job

    def run(self, plan: ClassPlan, say: Callable[[str], None]) -> None:
        """Create the run folder for plan.tasks (sources present), write the scripts, submit."""
        items = [batch.Item(t.student, t.lab, str(t.spec.lab_dir), str(t.source)) for t in plan.tasks if t.source]
        missing = [(t.student, t.lab) for t in plan.tasks if t.source is None]
        size, count = batch.shards(len(items), self.options.array_max)
        limits = self.limits(plan, size)
        self.run_dir = batch.create_run(plan, items, missing, self.options.arch, self.options.array_max, limits,
                                        "slurm", LOG_PATTERN, plan.notes + self.notes)
        for stage in ("build", "gpu", "merge"):
            seconds = limits[f"{stage}_task_s"] if stage != "merge" else limits["merge_s"]
            path = self.run_dir.path / f"{stage}.sbatch"
            outdir.write_atomic(path, self.script(stage, self.run_dir.path, count, seconds))
            path.chmod(0o755)
        previous = None
        try:
            for stage in ("build", "gpu", "merge"):
                previous = self.jobs[stage] = self._submit_one(stage, previous)
                batch.record_jobs(self.run_dir, {stage: previous})
        except ClassError:
            shutil.rmtree(self.run_dir.path, ignore_errors=True)     # nothing of it runs: no trace of it
            raise
        return None


def submit(args, say: Callable[[str], None] = print, kit_root: Path | None = None) -> int:
    """`grade.py slurm`: check, plan (resuming: plan.py), then --dry-run or submit; the exit status."""
    options = SlurmOptions.from_args(args)
    plan = planning.make_plan(args.submissions, args.out, lab_list(args.labs), args.student, kit_root,
                              args.missing_as_zero, args.regrade)
    batch.check_out(plan.out)
    if options.arch is None:
        options.arch, why = detect_arch()
        if options.arch is None:
            raise ClassError(f"--arch is required here: {why}; the build tasks need to know the GPUs' "
                             "architecture (e.g. --arch 90 for H100, 80 for A100, '80 90' for both)")
        say(f"building for sm_{options.arch} (the GPUs of this node; --arch to choose)")
    backend = SlurmBackend(options, say)
    if not options.dry_run:
        backend.check()
        backend.check_earlier_runs(plan.out)
    grading = [t for t in plan.tasks if t.source is not None]
    missing = [t for t in plan.tasks if t.source is None]
    say(f"{len(plan.students)} student(s) x {len(plan.specs)} lab(s): {len(grading)} to grade, {len(plan.kept)} "
        f"already graded (final for the same kernel.cu, kit version and lab.json), {len(missing)} missing")
    for note in plan.notes:
        say(note)
    fs = filesystem_of(plan.out if plan.out.exists() else plan.out.parent)
    if fs in LOCAL_FILESYSTEMS:
        warning = (f"warning: {plan.out} is on {LOCAL_FILESYSTEMS[fs]}; the jobs pass builds through it, so it "
                   "must be on a filesystem every node sees (unless the whole cluster is this one node)")
        backend.notes.append(warning)
        say(warning)
    if options.dry_run:
        items = [batch.Item(t.student, t.lab, str(t.spec.lab_dir), str(t.source)) for t in grading]
        backend.preview(plan, items, say)
        return 0
    outdir.claim(plan.out, plan.submissions)
    for task in missing:
        report = outdir.placeholder(task.spec, task.student, outdir.MISSING, task.why_missing)
        report["class"] = outdir.stamp(None, task.spec, "slurm", "submit")
        outdir.save(plan.out, task.student, task.lab, report, task.why_missing + "\n", plan.asked)
    if not grading:
        say("nothing to grade: every submitted lab already has a final grade; class files rewritten")
        result = merge.class_files(plan.out, plan.lab_order, plan.missing_as_zero, plan.notes + backend.notes,
                                   [], len(plan.kept))
        for line in result.summary:
            say(line)
        return 0
    backend.run(plan, say)
    run = backend.run_dir
    say(f"\nsubmitted {run.path}: {len(grading)} grading(s) in {run.data['tasks']} task(s) of "
        f"{run.data['shard_size']} per array")
    say(f"  build array {backend.jobs['build']}, GPU array {backend.jobs['gpu']} (after it), "
        f"merge {backend.jobs['merge']} (after that)")
    say(f"  follow with: squeue -j {','.join(backend.jobs.values())}")
    say(f"  the merge writes {plan.out / 'class.csv'} and {plan.out / 'summary.txt'}; "
        "run this same command again to grade whatever did not finish")
    return 0


__all__ = ["SlurmBackend", "SlurmOptions", "add_options", "submit"]
