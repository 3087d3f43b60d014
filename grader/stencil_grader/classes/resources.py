"""What a batch task asks its engine for (grader/README.md, section 9, "What a task asks for"), from class recordings
of the labs' stages (handouts/data/<gpu>/class.json, rows by summarize(): `make bench-class`), each figure the
largest of them; without one, NOT_MEASURED and the labs' own stage limits."""

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
#: The rules (module docstring).  TASK_SLACK_S: Python start-up, the GPU probe, the status file;
#: GRADER_PROCESSES: the task and its grading, beside the grading's programs.
TIME_SAFETY, TIME_FLOOR_S, TASK_SLACK_S = 3.0, 600, 120
MEM_SAFETY, MEM_FLOOR_MIB, MEM_ROUND_MIB, GRADER_PROCESSES, MAX_CPUS = 1.5, 1024, 256, 2, 16
#: What a task asks for when nothing was measured: MiB of memory and CPUs per task stage.
NOT_MEASURED = {"build": {"mem_mib": 4096, "cpus": 1}, "gpu": {"mem_mib": 16384, "cpus": 4},
                "merge": {"mem_mib": 2048, "cpus": 1}}
#: The merge's seconds: per report in OUT, beyond TIME_FLOOR_S (reading reports, writing pages).
MERGE_S_PER_REPORT = 0.05
#: Gradings per task by default: as many as TARGET_TASK_S of recorded median GPU stages hold,
#: 1 to MAX_PER_TASK; NOT_MEASURED_PER_TASK without a recording.
TARGET_TASK_S, MAX_PER_TASK, NOT_MEASURED_PER_TASK = 600, 64, 8


def summarize(reports: list[dict], measured_gpu) -> tuple[list[dict], float]:
    """(a recording's rows: FIGURES per lab and task stage that ran, the largest grading process in MiB) of reports."""
    found: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for r in reports:
        seconds, used = r.get("seconds") or {}, r.get("resources") or {}
        for stage, parts in STAGE_PARTS.items():
            if any(p in seconds for p in parts) and (stage != "gpu" or measured_gpu(r)):
                found.setdefault((r["lab"], stage), []).append((
                    sum(float(seconds.get(p, 0.0)) for p in parts),
                    sum(float((used.get(p) or {}).get("cpu_s", 0.0)) for p in parts),
                    max(float((used.get(p) or {}).get("peak_rss_mib", 0.0)) for p in parts)))
    rows = []
    for lab, stage in ((lab, stage) for lab in sorted({lab for lab, _ in found}) for stage in STAGE_PARTS):
        got = found.get((lab, stage), [])
        wall, cpu, peak = zip(*got) if got else ((), (), ())
        figures = (round(statistics.median(wall), 3), round(max(wall), 3), round(statistics.median(cpu), 3),
                   round(max(peak), 1)) if got else (None,) * 4
        rows.append({"id": f"{lab[:2]}/{stage}", "lab": lab, "stage": stage, "n": len(got),
                     **dict(zip(FIGURES[1:], figures))})
    grader = max((float(((r.get("resources") or {}).get("grader") or {}).get("peak_rss_mib", 0.0)) for r in reports),
                 default=0.0)
    return rows, round(grader, 1)


@dataclass
class Recording:
    """Recordings merged: "path (device, date)" of each, and the largest of each figure."""
    sources: list[str]
    figures: dict[tuple[str, str], dict]
    grader_peak_rss_mib: float


def load(paths: list[Path] | None, kit: Path = KIT_ROOT) -> Recording | None:
    """The recordings at paths (None: the kit's RECORDINGS) merged, or None; ValueError naming a bad file."""
    paths = sorted(Path(kit).glob(RECORDINGS)) if paths is None else [Path(p) for p in paths]
    merged: dict[tuple[str, str], dict] = {}
    sources, grader = [], 0.0
    for path in paths:
        try:
            data = json.loads(path.read_text())
            if data.get("record") != "class":
                raise ValueError(f"its record is {data.get('record')!r}")
            rows = [((r["lab"], r["stage"]), {k: float(r[k]) for k in FIGURES}) for r in data["rows"] if r["n"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{path} is not a class-grading recording (tests/submissions/bench_class.py "
                             f"--record): {type(err).__name__}: {err}") from None
        sources.append(f"{path} ({(data.get('device') or {}).get('name', 'unknown device')}, "
                       f"{data.get('date', 'undated')})")
        grader = max(grader, float(data.get("grader_peak_rss_mib") or 0.0))
        for key, figures in rows:
            had = merged.get(key, figures)
            merged[key] = {k: max(had[k], figures[k]) for k in FIGURES}
    return Recording(sources, merged, grader) if sources else None


@dataclass
class Request:
    """What the tasks of one stage ask for, and what the figures stand on (said in the job script)."""
    seconds: int
    mem_mib: int
    cpus: int
    basis: str


def task_request(stage: str, shards: list[list], recording: Recording | None,
                 time_per_lab: float | None = None) -> Request:
    """The request of stage "build" or "gpu" for tasks grading these shards (lists of specs); time_per_lab: seconds."""
    specs = {s.lab: s for shard in shards for s in shard}
    figures = {lab: recording.figures.get((lab, stage)) if recording else None for lab in specs}
    unmeasured = sorted(lab for lab, f in figures.items() if f is None)
    measured = [f for f in figures.values() if f]
    seconds = {lab: time_per_lab or (TIME_SAFETY * f["wall_s_median"] if f else
                                     worker.time_limit_s(specs[lab], 1, stage=stage)) for lab, f in figures.items()}
    longest = max((sum(seconds[s.lab] for s in shard) for shard in shards), default=0)
    mem, cpus = NOT_MEASURED[stage]["mem_mib"], NOT_MEASURED[stage]["cpus"]
    if measured:
        ratio = max(f["cpu_s_median"] / f["wall_s_median"] if f["wall_s_median"] else 1.0 for f in measured)
        own_cpus = min(MAX_CPUS, max(1, math.ceil(ratio)))
        programs = checkrun.rerun_split(checkrun.RERUN_PROCESSES, own_cpus)[0] if stage == "gpu" else 1
        peak = (max(f["peak_rss_mib_max"] for f in measured) * programs
                + GRADER_PROCESSES * recording.grader_peak_rss_mib)
        own_mem = max(MEM_FLOOR_MIB, MEM_ROUND_MIB * math.ceil(MEM_SAFETY * peak / MEM_ROUND_MIB))
        # a lab the recordings lack: the defaults bound it too
        mem, cpus = (max(own_mem, mem), max(own_cpus, cpus)) if unmeasured else (own_mem, own_cpus)
    if not recording:
        basis = (f"not measured (no recording {RECORDINGS}: make bench-class SLUG=<gpu> on a GPU machine): "
                 f"{mem} MiB, {cpus} CPU(s), time from the labs' own stage limits")
    else:
        basis = (f"measured: {'; '.join(recording.sources)}: median seconds x {TIME_SAFETY:g} + {TASK_SLACK_S} s "
                 f"(at least {TIME_FLOOR_S} s), peak memory x {MEM_SAFETY:g}, CPUs the CPU/wall ratio"
                 + (f"; not measured for {', '.join(unmeasured)}: stated defaults" if unmeasured else ""))
    if time_per_lab:
        basis += f"; time from --time-per-lab {time_per_lab:g} s"
    return Request(max(TIME_FLOOR_S, math.ceil(longest + TASK_SLACK_S)), mem, cpus, basis)


def default_per_task(recording: Recording | None, specs: list) -> int:
    """Gradings per task without --per-task (TARGET_TASK_S's constants)."""
    medians = [f["wall_s_median"] for s in specs if recording and (f := recording.figures.get((s.lab, "gpu")))]
    if len(medians) < len(specs):
        return NOT_MEASURED_PER_TASK
    return max(1, min(MAX_PER_TASK, int(TARGET_TASK_S // max(max(medians), 1e-3))))


def merge_request(reports: int) -> Request:
    """The merge's request, for `reports` reports in OUT."""
    mem, cpus = NOT_MEASURED["merge"]["mem_mib"], NOT_MEASURED["merge"]["cpus"]
    return Request(math.ceil(TIME_FLOOR_S + MERGE_S_PER_REPORT * reports), mem, cpus,
                   f"stated: {TIME_FLOOR_S} s + {MERGE_S_PER_REPORT:g} s per report, {mem} MiB (not measured)")
