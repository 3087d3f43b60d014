"""`grade.py slurm`: a class graded by Slurm job arrays; every Slurm word of the kit is here. build.sbatch (an array,
no GPU), gpu.sbatch (an array, --gres, task i after build task i: aftercorr) and merge.sbatch (afterany on the GPU
array), submitted with sbatch; what each asks for and what --dry-run checks: grader/README.md, section 9, "Slurm"."""

import argparse
import re
import shlex
import shutil
import subprocess
from typing import Callable

from ..batch import TASK_STAGES, BatchEngine, BatchOptions, Shape, task_command
from ..submissions import ClassError

DEFAULT_ARRAY_MAX = 1000          # Slurm's default MaxArraySize is 1001 (indices 0 to 1000)
SLURM_TIMEOUT_S = 60.0
#: Per stage: its task's array index and job id as shell words, its dependency on the stage before (sbatch's).
STAGE_VARS = {"build": ("$SLURM_ARRAY_TASK_ID", "$SLURM_ARRAY_JOB_ID", None),
              "gpu": ("$SLURM_ARRAY_TASK_ID", "$SLURM_ARRAY_JOB_ID", "aftercorr"),
              "merge": (None, "$SLURM_JOB_ID", "afterany")}
_GRES = re.compile(r"^[a-z][a-z0-9_-]*(:[A-Za-z0-9_.-]+)?:[1-9][0-9]*$")
#: A node's gres as sinfo prints it: gpu:4, gpu:a100:4, gpu:a100:4(S:0-1); several comma-separated.
_NODE_GRES = re.compile(r"([a-z][a-z0-9_-]*)(?::([A-Za-z0-9_.-]+))?:(\d+)")
#: Compute capability of the GPU types clusters name in their gres (gres.conf Type=): developer.nvidia.com/cuda-gpus.
GRES_ARCH = {"p100": "60", "v100": "70", "v100s": "70", "t4": "75", "rtx6000": "75", "rtx8000": "75",
             "a100": "80", "a30": "80", "a10": "86", "a40": "86", "a6000": "86", "rtxa6000": "86", "a5000": "86",
             "l4": "89", "l40": "89", "l40s": "89", "rtx4090": "89", "h100": "90", "h200": "90", "gh200": "90",
             "b200": "100", "gb200": "100"}
#: What sbatch or sinfo say when no controller answers (the dry run then says "not checked").
_NO_CONTROLLER = re.compile(r"contact slurm controller|connect(ion)? (failure|refused)|timed out|not responding|"
                            r"Unable to establish|slurm\.conf|configuration source|Zero Bytes were transmitted", re.I)


def _slurm(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess | None:
    """A Slurm command's result, or None when it could not be run or gave no answer in time."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=SLURM_TIMEOUT_S, input=stdin)
    except (OSError, subprocess.SubprocessError):
        return None


class SlurmEngine(BatchEngine):
    """Submits a class to Slurm (module docstring)."""

    name = "slurm"
    summary = ("instructor mode on a Slurm cluster: job arrays that build, run the GPU stages, and merge "
               "(run it on a login node)")
    follow = "squeue -j {jobs}"

    @classmethod
    def add_options(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--partition", help="partition of the GPU tasks (default: the cluster's default partition)")
        p.add_argument("--cpu-partition", help="partition of the build tasks and the merge (default: the cluster's "
                                               "default partition, not --partition)")
        p.add_argument("--account", help="Slurm account to charge (sbatch --account)")
        p.add_argument("--gres", default="gpu:1",
                       help="what each GPU task asks for (default gpu:1; 'none' on a partition whose nodes give GPUs "
                            "without gres: the tasks of a node then share its GPUs under a lock per GPU)")
        p.add_argument("--array-max", type=int, default=DEFAULT_ARRAY_MAX, metavar="N",
                       help=f"at most N tasks per job array (default {DEFAULT_ARRAY_MAX}, within Slurm's default "
                            "MaxArraySize)")
        p.add_argument("--requeue", action="store_true",
                       help="let Slurm requeue a preempted or failed task (default: --no-requeue; the next run "
                            "grades what did not finish)")
        p.add_argument("--sbatch-option", action="append", default=[], metavar="OPT",
                       help="an extra sbatch option for every job, e.g. --sbatch-option=--qos=short (repeatable; "
                            "written after the kit's own, so it wins over them)")

    def __init__(self, options: BatchOptions, say: Callable[[str], None] = print, *, partition: str | None = None,
                 cpu_partition: str | None = None, account: str | None = None, gres: str = "gpu:1",
                 array_max: int = DEFAULT_ARRAY_MAX, requeue: bool = False, sbatch_option: list[str] | None = None):
        """The options of add_options, by their names; ClassError for a bad --array-max or --gres."""
        super().__init__(options, say)
        if array_max < 1:
            raise ClassError("--array-max must be at least 1")
        if gres != "none" and not _GRES.match(gres):
            raise ClassError(f"--gres {gres!r}: give NAME[:TYPE]:COUNT, e.g. gpu:1 or gpu:a100:1, or none")
        self.partition, self.cpu_partition, self.account, self.gres = partition, cpu_partition, account, gres
        self.requeue, self.sbatch_options, self.max_tasks = requeue, list(sbatch_option or []), array_max
        self.gpu_locks = "node" if gres == "none" else "engine"

    def check(self) -> None:
        """sbatch on PATH; the partitions and the GPU partition's gres (sinfo, where it is)."""
        if shutil.which("sbatch") is None:
            raise ClassError("sbatch not found on PATH: run grade.py slurm on a login node of a Slurm cluster "
                             "(--dry-run prints the scripts without it; grade.py class grades on one machine)")
        for line in self._check_cluster():
            if line.startswith("warning:"):
                self.notes.append(line)
                self.say(line)

    def _check_cluster(self) -> list[str]:
        """ClassError for a partition sinfo does not list, or a --gres the GPU partition's nodes do not offer; else
        what was checked, or why not, a warning naming the GPU types --gres may get that cannot run the --arch build
        (SASS runs on its major version at or above it), and a note naming those of unknown architecture."""
        if not shutil.which("sinfo"):
            return ["not checked: the partitions and --gres (sinfo is not on PATH here)"]
        done = _slurm("sinfo", "-h", "-o", "%P %G")
        if done is None or done.returncode != 0:
            why = f"no answer in {SLURM_TIMEOUT_S:g} s" if done is None else \
                ((done.stderr or done.stdout).strip().splitlines() or [f"exit {done.returncode}"])[-1]
            return [f"not checked: the partitions and --gres (sinfo failed: {why})"]
        rows = [line.strip().partition(" ")[::2] for line in done.stdout.splitlines()]
        gres: dict[str, set[str]] = {}
        for name, node_gres in rows:
            gres.setdefault(name.rstrip("*"), set()).add(node_gres.strip())
        default = next((name[:-1] for name, _ in rows if name.endswith("*")), None)
        for p in (self.partition, self.cpu_partition):
            if p and p not in gres:
                raise ClassError(f"unknown partition {p!r}: this cluster's partitions are "
                                 f"{', '.join(sorted(gres)) or 'none'} (sinfo)")
        partition = self.partition or default
        if self.gres == "none" or not partition:
            return ["checked with sinfo: the partitions"]
        name, *rest = self.gres.split(":")
        kind, count = (rest[0], int(rest[1])) if len(rest) == 2 else (None, int(rest[0]))
        offered = [m for g in gres[partition] for m in _NODE_GRES.finditer(g) if m.group(1) == name
                   and kind in (None, m.group(2))]          # the node types --gres may land on
        if not any(int(m.group(3)) >= count for m in offered):
            raise ClassError(f"--gres {self.gres}: no node of partition {partition!r} offers it (sinfo: "
                             f"{', '.join(sorted(gres[partition])) or 'none'}); choose --partition, or --gres none "
                             "where the nodes give GPUs without gres")
        lines = ["checked with sinfo: the partitions and --gres"]
        archs = self.options.arch.split()           # batch.submit has set it
        types = sorted({m.group(2) for m in offered if m.group(2)})
        known = {t: GRES_ARCH[t.lower()] for t in types if t.lower() in GRES_ARCH}
        bad = [t for t, arch in known.items() if not any(a[:-1] == arch[:-1] and int(arch) >= int(a) for a in archs)]
        good = [t for t in known if t not in bad]
        if bad:
            ask = f"--gres {name}:{good[0]}:1" if good else "another --partition"
            lines.append(f"warning: --gres {self.gres} on partition {partition!r}, whose nodes hold "
                         + ", ".join(f"{t} (sm_{a})" for t, a in known.items())
                         + f": a task given {', '.join(bad)} cannot run the build for --arch {' '.join(archs)}; ask "
                           f"{ask}, or build for every type (--arch '{' '.join(sorted({*archs, *known.values()}))}')")
        if unknown := [t for t in types if t not in known]:
            lines.append(f"note: the kit does not know the architecture of GPU type(s) {', '.join(unknown)} of "
                         f"partition {partition!r}: make sure --arch {' '.join(archs)} runs there")
        return lines

    def validate(self, shape: Shape) -> list[str]:
        """--dry-run: _check_cluster and each script through `sbatch --test-only` (ClassError when refused)."""
        lines = self._check_cluster()
        never = ("never checked by sbatch --test-only: the scripts' own lines (--setup, python3 and its version, "
                 "the run folder on a filesystem every node sees), which run only on a node")
        if not shutil.which("sbatch"):
            return lines + [f"not checked: {', '.join(self.scripts(shape))} with sbatch --test-only (sbatch is not "
                            "on PATH here)", never]
        for name, text in self.scripts(shape).items():
            done = _slurm("sbatch", "--test-only", stdin=text)
            said = "" if done is None else (done.stderr or done.stdout).strip()
            if done is None or (done.returncode != 0 and _NO_CONTROLLER.search(said)):
                why = f"no answer in {SLURM_TIMEOUT_S:g} s" if done is None else said.splitlines()[-1]
                lines.append(f"not checked: {name} with sbatch --test-only (no Slurm controller answered: {why})")
            elif done.returncode != 0:
                raise ClassError(f"sbatch --test-only refuses {name}: {said}")
            else:
                lines.append(f"{name}: sbatch --test-only accepts it ({said})")
        return lines + [never]

    def still_queued(self, jobs: list[str]) -> list[str]:
        """The jobs squeue still lists (queued or running)."""
        return [job for job in jobs if (done := _slurm("squeue", "-h", "-o", "%i", "-j", job)) is not None
                and done.returncode == 0 and done.stdout.strip()]

    def scripts(self, shape: Shape) -> dict[str, str]:
        """<stage>.sbatch of each stage (grader/README.md lists their lines)."""
        texts = {}
        for stage in TASK_STAGES:
            request, (task, job, _) = shape.requests[stage], STAGE_VARS[stage]
            days, rest = divmod(request.seconds, 86400)             # sbatch --time: D-HH:MM:SS
            partition = self.partition if stage == "gpu" else self.cpu_partition
            log = self.log_pattern.format(stage=stage, job="%A" if task else "%j", task="%a" if task else "0")
            class_word = re.sub(r"[^A-Za-z0-9._-]", "_", shape.class_name)[:40] or "class"
            lines = ["#!/bin/bash", f"#SBATCH --job-name=stencil-{class_word}-{shape.path.name}-{stage}"]
            lines += [f"#SBATCH --array=0-{shape.tasks - 1}" + (f"%{shape.max_running}" if shape.max_running else "")
                      ] if task else []
            lines += [f"#SBATCH --partition={partition}"] if partition else []
            lines += [f"#SBATCH --account={self.account}"] if self.account else []
            lines += [f"#SBATCH --gres={self.gres}"] if stage == "gpu" and self.gpu_locks == "engine" else []
            lines += [f"#SBATCH --time={days}-{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}",
                      f"#SBATCH --mem={request.mem_mib}M", f"#SBATCH --cpus-per-task={request.cpus}",
                      f"#SBATCH --{'' if self.requeue else 'no-'}requeue", "#SBATCH --open-mode=append",
                      f"#SBATCH --output={shape.path / log}"] + [f"#SBATCH {opt}" for opt in self.sbatch_options]
            what = {"build": "builds and static checks of this task's shard (no GPU)",
                    "gpu": ("GPU stages of this task's shard, on the GPU Slurm gives it" if self.gpu_locks == "engine"
                            else "GPU stages of this task's shard, on the node's GPUs, each under a lock shared by "
                                 "the node's tasks (no gres)"),
                    "merge": "the class files of the run (exits 0 once merged; what was not measured is in them)"}
            lines += ["#", f"# {what[stage]}.", f"# --time, --mem, --cpus-per-task: {request.basis}.",
                      "# Written by grade.py slurm (stencil lab kit); the run folder must be on a filesystem every "
                      "node sees.", ""]
            texts[f"{stage}.sbatch"] = "\n".join(lines + task_command(shape, stage, task, job)) + "\n"
        return texts

    def _sbatch(self, shape: Shape, stage: str, after: str | None) -> list[str]:
        """The sbatch command line of a stage's script, after the job `after` (the stage before)."""
        kind = STAGE_VARS[stage][2]
        return ["sbatch", "--parsable"] + ([f"--dependency={kind}:{after}", "--kill-on-invalid-dep=yes"]
                                           if after else []) + [str(shape.path / f"{stage}.sbatch")]

    def commands(self, shape: Shape) -> list[str]:
        lines, previous = [], None
        for stage in TASK_STAGES:
            line = " ".join(a if a.startswith("--dependency=") else shlex.quote(a)
                            for a in self._sbatch(shape, stage, previous))
            lines.append(f"{stage.upper()}_JOB=$({line})" if stage != "merge" else line)
            previous = f"${stage.upper()}_JOB"
        return lines

    def submit_jobs(self, shape: Shape) -> dict[str, str]:
        jobs, previous = {}, None
        for stage in TASK_STAGES:
            argv = self._sbatch(shape, stage, previous)
            done = _slurm(*argv)
            if done is None or done.returncode != 0:
                why = (done.stderr or done.stdout).strip() if done is not None else "sbatch could not be run"
                if started := list(jobs.values()):
                    _slurm("scancel", *started)
                raise ClassError(f"sbatch refused the {stage} job: {why}" + (
                    f" (the jobs already submitted, {', '.join(started)}, were cancelled)" if started else ""))
            previous = jobs[stage] = done.stdout.strip().split(";")[0]
            self.say(" ".join(shlex.quote(a) for a in argv) + f"   -> job {previous}")
        return jobs
