"""What a batch task asks its engine for (time, memory, CPUs), from class recordings of what the
labs' stages used (handouts/data/<gpu>/class.json: `make bench-class`, summarize() makes its
rows), each figure the largest of the recordings; without one, NOT_MEASURED's stated defaults
and the labs' own stage limits.  The rules (grader/README.md, section 9, "What a task asks for"):

    time    sum over the task's gradings of TIME_SAFETY x the lab's median stage seconds,
            + TASK_SLACK_S, at least TIME_FLOOR_S
    memory  MEM_SAFETY x (the stage's largest peak x concurrent_programs + GRADER_PROCESSES x
            the grading process's peak), in MEM_ROUND_MIB steps, at least MEM_FLOOR_MIB
    cpus    the largest median CPU / wall ratio, rounded up, 1 to MAX_CPUS
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from .. import KIT_ROOT
from ..grading import checkrun
from . import worker

#: The figures of a recording's row, per lab and task stage.
FIGURES = ("n", "wall_s_median", "wall_s_max", "cpu_s_median", "peak_rss_mib_max")
#: The pipeline stages (report["seconds"], report["resources"]) of each task stage.
STAGE_PARTS = {"build": ("build", "static"), "gpu": ("cases", "bench")}
RECORDINGS = "handouts/data/*/class.json"
TIME_SAFETY = 3.0
TIME_FLOOR_S = 600
#: Seconds a task needs beyond its gradings (Python start-up, the GPU probe, the status file).
TASK_SLACK_S = 120
MEM_SAFETY = 1.5
MEM_FLOOR_MIB = 1024
MEM_ROUND_MIB = 256
#: Python processes a task holds beside a grading's programs: the task, and its grading.
GRADER_PROCESSES = 2
MAX_CPUS = 16
#: What a task asks for when nothing was measured: MiB of memory and CPUs per task stage.
NOT_MEASURED = {"build": {"mem_mib": 4096, "cpus": 1}, "gpu": {"mem_mib": 16384, "cpus": 4},
                "merge": {"mem_mib": 2048, "cpus": 1}}
#: The merge's seconds: per report in OUT, beyond TIME_FLOOR_S (reading reports, writing pages).
MERGE_S_PER_REPORT = 0.05
#: Gradings per task by default: as many as TARGET_TASK_S of recorded median GPU stages hold,
#: 1 to MAX_PER_TASK; NOT_MEASURED_PER_TASK without a recording.
TARGET_TASK_S = 600
MAX_PER_TASK = 64
NOT_MEASURED_PER_TASK = 8


def stage_figures(report: dict) -> dict[str, dict]:
    """{task stage: {"wall_s", "cpu_s", "peak_rss_mib"}} of one report, for the task stages whose
    pipeline stages ran in it (a stage with no seconds recorded is left out)."""
    seconds, used = report.get("seconds") or {}, report.get("resources") or {}
    found = {}
    for stage, parts in STAGE_PARTS.items():
        if not any(p in seconds for p in parts):
            continue
        found[stage] = {"wall_s": sum(float(seconds.get(p, 0.0)) for p in parts),
                        "cpu_s": sum(float((used.get(p) or {}).get("cpu_s", 0.0)) for p in parts),
                        "peak_rss_mib": max([float((used.get(p) or {}).get("peak_rss_mib", 0.0)) for p in parts])}
    return found


def summarize(reports: list[dict], measured_gpu) -> tuple[list[dict], float]:
    """(the rows of a recording, the largest grading process in MiB) from reports (module
    docstring).  measured_gpu(report): whether its GPU stages measured (not not_measured, ...)."""
    by_lab: dict[str, dict[str, list[dict]]] = {}
    grader = 0.0
    for r in reports:
        grader = max(grader, float(((r.get("resources") or {}).get("grader") or {}).get("peak_rss_mib", 0.0)))
        for stage, figures in stage_figures(r).items():
            if stage != "gpu" or measured_gpu(r):
                by_lab.setdefault(r["lab"], {}).setdefault(stage, []).append(figures)
    rows = []
    for lab, stages in sorted(by_lab.items()):
        for stage in STAGE_PARTS:
            found = stages.get(stage) or []
            row = {"id": f"{lab[:2]}/{stage}", "lab": lab, "stage": stage, "n": len(found),
                   "wall_s_median": None, "wall_s_max": None, "cpu_s_median": None, "peak_rss_mib_max": None}
            if found:
                row.update(wall_s_median=round(statistics.median(f["wall_s"] for f in found), 3),
                           wall_s_max=round(max(f["wall_s"] for f in found), 3),
                           cpu_s_median=round(statistics.median(f["cpu_s"] for f in found), 3),
                           peak_rss_mib_max=round(max(f["peak_rss_mib"] for f in found), 1))
            rows.append(row)
    return rows, round(grader, 1)


@dataclass
class Recording:
    """The recordings read (sources: "path (device, date)"), merged: per lab and task stage the
    largest of each figure, and the largest grading process."""

    sources: list[str]
    labs: dict[str, dict[str, dict | None]]
    grader_peak_rss_mib: float

    def figures(self, lab: str, stage: str) -> dict | None:
        return (self.labs.get(lab) or {}).get(stage)


def load(paths: list[Path] | None = None, kit: Path | None = None) -> Recording | None:
    """The recordings at paths (default: every RECORDINGS of the kit), merged (Recording), or
    None when there is none.  ValueError naming a file that is not such a recording."""
    paths = sorted(Path(kit or KIT_ROOT).glob(RECORDINGS)) if paths is None else [Path(p) for p in paths]
    merged: dict[str, dict[str, dict]] = {}
    sources, grader = [], 0.0
    for path in paths:
        try:
            data = json.loads(path.read_text())
            if data.get("record") != "class":
                raise ValueError(f"its record is {data.get('record')!r}")
            rows = [r for r in data["rows"] if r["n"]]
            figures_of = [(r["lab"], r["stage"], {k: float(r[k]) for k in FIGURES}) for r in rows]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{path} is not a class-grading recording (tests/submissions/bench_class.py "
                             f"--record): {type(err).__name__}: {err}") from None
        sources.append(f"{path} ({(data.get('device') or {}).get('name', 'unknown device')}, "
                       f"{data.get('date', 'undated')})")
        grader = max(grader, float(data.get("grader_peak_rss_mib") or 0.0))
        for lab, stage, figures in figures_of:
            had = merged.setdefault(lab, {}).get(stage)
            merged[lab][stage] = figures if had is None else {k: max(had[k], figures[k]) for k in FIGURES}
    return Recording(sources, merged, grader) if sources else None


@dataclass
class Request:
    """What the tasks of one stage ask for: seconds, MiB of memory, CPUs, and what the figures
    stand on ("measured: ...", "not measured: ...", said in the job script)."""

    seconds: int
    mem_mib: int
    cpus: int
    basis: str


def concurrent_programs(stage: str, cpus: int) -> int:
    """Programs of one grading that run at once in a task of `cpus` CPUs, each up to the recorded
    peak: a build runs one at a time; the GPU stages' reruns up to checkrun.rerun_split's processes
    (each one's forked case holds the CUDA context; the grading's thread budget is the task's CPUs:
    sandbox.usable_cpus)."""
    if stage != "gpu":
        return 1
    return checkrun.rerun_split(checkrun.RERUN_PROCESSES, cpus)[0]


def _round_mib(mib: float) -> int:
    return max(MEM_FLOOR_MIB, MEM_ROUND_MIB * math.ceil(mib / MEM_ROUND_MIB))


def task_request(stage: str, shards: list[list], recording: Recording | None,
                 time_per_lab: float | None = None) -> Request:
    """The request of stage "build" or "gpu" for tasks grading these shards (each a list of
    the labs' specs of its gradings, in order; module docstring).  time_per_lab: seconds per
    grading instead of the figures (--time-per-lab)."""
    specs = {s.lab: s for shard in shards for s in shard}
    figures = {lab: recording.figures(lab, stage) if recording else None for lab in specs}
    unmeasured = sorted(lab for lab, f in figures.items() if f is None)

    def seconds_of(spec) -> float:
        if time_per_lab:
            return time_per_lab
        f = figures[spec.lab]
        return TIME_SAFETY * f["wall_s_median"] if f else worker.time_limit_s(spec, 1, stage=stage)
    seconds = max(TIME_FLOOR_S, math.ceil(max((sum(seconds_of(s) for s in shard) for shard in shards), default=0)
                                          + TASK_SLACK_S))
    measured = [f for f in figures.values() if f]
    default = NOT_MEASURED[stage]
    if not measured:
        mem, cpus = default["mem_mib"], default["cpus"]
    else:
        ratio = max(f["cpu_s_median"] / f["wall_s_median"] if f["wall_s_median"] else 1.0 for f in measured)
        cpus = min(MAX_CPUS, max(1, math.ceil(ratio)))
        peak = (max(f["peak_rss_mib_max"] for f in measured) * concurrent_programs(stage, cpus)
                + GRADER_PROCESSES * recording.grader_peak_rss_mib)
        mem = _round_mib(MEM_SAFETY * peak)
        if unmeasured:                         # a lab the recordings lack: the defaults bound it too
            mem, cpus = max(mem, default["mem_mib"]), max(cpus, default["cpus"])
    if not recording:
        basis = (f"not measured (no recording {RECORDINGS}: make bench-class SLUG=<gpu> on a GPU machine): "
                 f"{default['mem_mib']} MiB, {default['cpus']} CPU(s), time from the labs' own stage limits")
    else:
        basis = (f"measured: {'; '.join(recording.sources)}: median seconds x {TIME_SAFETY:g} + {TASK_SLACK_S} s "
                 f"(at least {TIME_FLOOR_S} s), peak memory x {MEM_SAFETY:g}, CPUs the CPU/wall ratio"
                 + (f"; not measured for {', '.join(unmeasured)}: stated defaults" if unmeasured else ""))
    if time_per_lab:
        basis += f"; time from --time-per-lab {time_per_lab:g} s"
    return Request(seconds, mem, cpus, basis)


def default_per_task(recording: Recording | None, specs: list) -> int:
    """Gradings per task when --per-task is not given: TARGET_TASK_S over the largest recorded
    median of these labs' GPU stages (1 to MAX_PER_TASK), NOT_MEASURED_PER_TASK without it."""
    medians = [f["wall_s_median"] for s in specs if recording and (f := recording.figures(s.lab, "gpu"))]
    if not medians or len(medians) < len(specs):
        return NOT_MEASURED_PER_TASK
    return max(1, min(MAX_PER_TASK, int(TARGET_TASK_S // max(max(medians), 1e-3))))


def merge_request(reports: int) -> Request:
    """The merge's request: TIME_FLOOR_S plus MERGE_S_PER_REPORT per report; stated memory."""
    default = NOT_MEASURED["merge"]
    return Request(math.ceil(TIME_FLOOR_S + MERGE_S_PER_REPORT * reports), default["mem_mib"], default["cpus"],
                   f"stated: {TIME_FLOOR_S} s + {MERGE_S_PER_REPORT:g} s per report, {default['mem_mib']} MiB "
                   "(not measured)")
