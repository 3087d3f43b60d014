#!/usr/bin/env python3
"""Class-grading throughput: grade a made-up class of N students and print what each stage costs.

    python3 tests/submissions/bench_class.py [--students N] [--labs 01-naive-5pt,...]
        [--only-correct] [--jobs J] [--gpus all|0,2] [--out DIR] [--json FILE] [--record FILE]
    make bench-class [STUDENTS=N] [GPUS=all] [SLUG=h100]

Each student gets, for every lab, one of the known submissions of tests/submissions/<lab>/
(taken in turn, so a class holds the mix those folders hold: correct kernels, wrong ones,
compile errors, cheats, an infinite loop; --only-correct keeps the correct ones, the
common case).  The class is graded by `grade.py class` exactly as an instructor runs it,
and the reports' own stage seconds (report["seconds"]) give:

    builds per CPU core-minute       gradings built / (sum of build + static seconds / 60): each
                                     build runs on one core, so this is one core's rate
    submission-labs per GPU-minute   gradings whose GPU stages ran / (sum of cases + bench
                                     seconds / 60): the rate of one GPU kept busy
    wall rate                        gradings / wall minutes of the whole command, on this host

and, from the first two, the projected wall time of 1000 students x 8 labs on a cluster of
8 GPUs (and as many build cores as --cores says, default 64): the larger of the GPU time
over 8 GPUs and the build time over the cores.  It ignores the batch system's own delays
(queueing, job start-up: seconds per task), so it is a floor for `grade.py slurm`.

--scaling 1,2,4 grades the same class once per GPU count (the first N usable GPUs of this host,
each run into an OUT of its own) and prints the speed-up over the first count; --scaling-record
FILE (handouts/data/<gpu>/class-scaling.json, a record of kind "class-scaling") keeps each run as a
row {"id", "gpus", "cpus", "submission_labs", "wall_s", "verdicts_sha256"} (the digest over the
sorted student, lab and verdict of every grading: the same class must get the same verdicts on any
number of GPUs), with what the GPU stages cost (gpu_stages: their seconds summed, figures()'s
gpu_busy_s; when the last build ended; a grading's median cases seconds while builds ran and after),
replacing an earlier row of the same GPU and CPU counts.  A count named twice
(--scaling 2,1,2) is graded twice, into an OUT each; the later row's id ends in -runK (K: its place).

Without a GPU the GPU figures are "not measured" (the GPU stages end at once) and only the
build rate means something.  Prints the device (nvidia-smi's name), date and figures;
--json FILE keeps them (the record a README figure comes from).

--record FILE (what `make bench-class SLUG=h100` gives: handouts/data/h100/class.json) keeps,
per lab and batch task stage (build: build and static checks; gpu: cases and bench), the
median wall seconds and CPU seconds and the largest peak resident set of the stage's programs,
from the reports' own figures (report["seconds"], report["resources"]): the recording that
`grade.py slurm` (classes/resources.py) turns into each job's --time, --mem and --cpus-per-task.
A GPU stage that measured nothing (no GPU) is left out of it (its figures null).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(KIT_ROOT / "grader"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_verdicts import META_VERDICTS, SOURCE, collect, source_bytes  # noqa: E402  (needs the paths above)
from stencil_grader.base.files import write_json  # noqa: E402
from stencil_grader.base import gpus as gpulist  # noqa: E402
from stencil_grader.classes import outdir, resources  # noqa: E402
from stencil_grader.grading import score  # noqa: E402
from stencil_grader.instructor import records  # noqa: E402

GPU_STAGES = ("cases", "bench")
BUILD_STAGES = ("build", "static")
PROJECTION = {"students": 1000, "labs": 8, "gpus": 8}


def make_class(folder: Path, students: int, labs: list[str] | None, only_correct: bool) -> int:
    """Lay out `students` students, each with one known submission per lab (its kernel.cu whole:
    check_verdicts.source_bytes); returns the number of submission-labs.  Raises
    check_verdicts.PatchError for a mutant's patch that no longer applies."""
    by_lab: dict[str, list] = {}
    for entry in collect(KIT_ROOT):
        if labs and entry.lab not in labs:
            continue
        if only_correct and entry.verdict not in META_VERDICTS["correct"] + ("correct",):
            continue
        by_lab.setdefault(entry.lab, []).append(entry)
    if not by_lab:
        raise SystemExit("bench_class.py: no known submission matches (--labs, --only-correct)")
    sources = {entry.id: source_bytes(entry.path, KIT_ROOT) for entries in by_lab.values() for entry in entries}
    count = 0
    for s in range(students):
        for lab, entries in sorted(by_lab.items()):
            entry = entries[s % len(entries)]
            target = folder / f"student{s:04d}" / lab
            target.mkdir(parents=True, exist_ok=True)
            (target / SOURCE).write_bytes(sources[entry.id])      # a mutant's patch applied (check_verdicts)
            count += 1
    return count


def figures(out: Path, wall_s: float, cores: int) -> dict:
    """The throughput figures (module docstring) from OUT's gradings.csv."""
    rows = list(csv.DictReader(open(out / "gradings.csv", newline="")))
    built = [r for r in rows if r["build_s"]]
    on_gpu = [r for r in rows if any(r[f"{k}_s"] for k in GPU_STAGES) and r["verdict"] not in
              ("not_measured", "kit_error", "grader_error", "pending")]
    build_s = sum(float(r[f"{k}_s"] or 0) for r in built for k in BUILD_STAGES)
    gpu_s = sum(float(r[f"{k}_s"] or 0) for r in on_gpu for k in GPU_STAGES)
    gpus_used = sorted({r["gpu_uuid"] for r in on_gpu if r["gpu_uuid"]})
    verdicts: dict[str, int] = {}
    for r in rows:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    result = {
        "gradings": len(rows), "verdicts": verdicts, "wall_s": round(wall_s, 1),
        "wall_rate_per_min": round(len(rows) / (wall_s / 60), 2) if wall_s else None,
        "builds": len(built), "build_cpu_s": round(build_s, 1),
        "builds_per_core_min": round(len(built) / (build_s / 60), 2) if build_s else None,
        "gpu_gradings": len(on_gpu), "gpu_busy_s": round(gpu_s, 1),
        "labs_per_gpu_min": round(len(on_gpu) / (gpu_s / 60), 2) if gpu_s else None,
        "gpus_used": len(gpus_used),
        "gpu_wait_s_mean": round(sum(float(r["gpu_wait_s"] or 0) for r in rows) / len(rows), 2) if rows else None,
    }
    n = PROJECTION["students"] * PROJECTION["labs"]
    if result["labs_per_gpu_min"] and result["builds_per_core_min"]:
        gpu_min = n / result["labs_per_gpu_min"] / PROJECTION["gpus"]
        build_min = n / result["builds_per_core_min"] / cores
        result["projection"] = {"gradings": n, "gpus": PROJECTION["gpus"], "build_cores": cores,
                                "gpu_wall_min": round(gpu_min, 1), "build_wall_min": round(build_min, 1),
                                "wall_min_at_least": round(max(gpu_min, build_min), 1)}
    return result


def gpu_stages(out: Path) -> dict:
    """When builds slowed the GPU stages of OUT's gradings.csv: last_build_end_s, when the last build ended
    (graded_at less the grading's GPU wait and stages: one-second resolution), counted from the first
    grading's end; and the median seconds of a grading's cases (gradings whose cases took under 2 s: a hang
    is no measure of speed) among those that ended while builds still ran and after, with their counts
    (None where there are none).  The stages' seconds summed are figures()'s gpu_busy_s."""
    rows = [r for r in csv.DictReader(open(out / "gradings.csv", newline="")) if r["graded_at"]]
    if not rows:
        return {"last_build_end_s": None}
    seconds = lambda r, k: float(r[f"{k}_s"] or 0)                      # noqa: E731
    ended = {id(r): datetime.datetime.fromisoformat(r["graded_at"]).timestamp() for r in rows}
    first = min(ended.values())
    last_build = max(ended[id(r)] - seconds(r, "gpu_wait") - sum(seconds(r, k) for k in GPU_STAGES) for r in rows)
    timed = [r for r in rows if r["cases_s"] and seconds(r, "cases") < 2]
    building = [seconds(r, "cases") for r in timed if ended[id(r)] <= last_build]
    after = [seconds(r, "cases") for r in timed if ended[id(r)] > last_build]
    median = lambda xs: round(statistics.median(xs), 3) if xs else None  # noqa: E731
    return {"last_build_end_s": round(last_build - first),
            "cases_s_median_building": median(building), "gradings_building": len(building),
            "cases_s_median_after": median(after), "gradings_after": len(after)}


def verdicts_sha256(out: Path) -> str:
    """sha256 over the sorted "student<TAB>lab<TAB>verdict" lines of OUT's gradings.csv."""
    rows = csv.DictReader(open(out / "gradings.csv", newline=""))
    lines = sorted(f"{r['student']}\t{r['lab']}\t{r['verdict']}" for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def grade(subs: Path, out: Path, args, labs: list[str] | None, gpus: str | None) -> tuple[float, int]:
    """Run grade.py class on SUBS into OUT; (wall seconds, exit status)."""
    command = [sys.executable, str(KIT_ROOT / "grader" / "grade.py"), "class", str(subs), "--out", str(out)]
    if args.jobs:
        command += ["--jobs", str(args.jobs)]
    if gpus:
        command += ["--gpus", gpus]
    if labs:
        command += ["--labs", ",".join(labs)]
    start = time.monotonic()
    done = subprocess.run(command, env=dict(os.environ, NO_COLOR="1"))
    return time.monotonic() - start, done.returncode


def scaling(subs: Path, work: Path, args, labs: list[str] | None, count: int, device: str) -> int:
    """--scaling: the class graded on each GPU count in turn (module docstring)."""
    found, why = gpulist.list_gpus()
    counts = [int(n) for n in args.scaling.split(",")]
    if not found or max(counts) > len(found):
        print(f"bench_class: --scaling {args.scaling} needs {max(counts)} GPU(s); this host lists "
              f"{len(found)} ({why or ', '.join(g.name for g in found)})", file=sys.stderr)
        return 2
    runs, started = [], records.now()
    for i, n in enumerate(counts):
        # A count named again (2,1,2: A/B/A on one host) grades into an OUT of its own, never the earlier one's.
        out = work / (f"grades-{n}gpu" if counts.index(n) == i else f"grades-{n}gpu-run{i + 1}")
        wall, status = grade(subs, out, args, labs, ",".join(str(g.index) for g in found[:n]))
        if not (out / "gradings.csv").is_file():
            print(f"bench_class: grade.py class on {n} GPU(s) wrote no gradings.csv (exit status {status})",
                  file=sys.stderr)
            return 2
        runs.append({"gpus": n, "cpus": os.cpu_count(), "submission_labs": count, "wall_s": round(wall, 1),
                     "verdicts_sha256": verdicts_sha256(out),
                     "gpu_stages": dict(gpu_stages(out),
                                        gpu_stage_s=figures(out, wall, args.cores)["gpu_busy_s"])})
        cost = runs[-1]["gpu_stages"]
        print(f"bench_class: {n} GPU(s): {count} submission-labs in {wall:.1f} s; verdicts "
              f"{runs[-1]['verdicts_sha256'][:12]}; GPU stages {cost['gpu_stage_s']} s, a grading's cases "
              f"{cost.get('cases_s_median_building')} s while builds ran, {cost.get('cases_s_median_after')} s after",
              flush=True)
    base = runs[0]
    print(f"\nclass scaling on {device} ({os.cpu_count()} CPUs, {datetime.date.today().isoformat()}):")
    for run in runs:
        same = "same verdicts" if run["verdicts_sha256"] == base["verdicts_sha256"] else "VERDICTS DIFFER"
        print(f"  {run['gpus']} GPU(s): {run['wall_s']:.1f} s, speed-up {base['wall_s'] / run['wall_s']:.2f}x over "
              f"{base['gpus']} GPU(s) ({same})")
    if args.scaling_record:
        path = args.scaling_record
        source = "python3 tests/submissions/bench_class.py " + " ".join(sys.argv[1:])
        record = records.record_header("class-scaling", source, {"name": device}, started)
        ids = [f"{r['gpus']}gpu-{r['cpus']}cpu" for r in runs]
        rows = [dict(r, id=ids[i] if ids.index(ids[i]) == i else f"{ids[i]}-run{i + 1}") for i, r in enumerate(runs)]
        earlier = json.loads(path.read_text()).get("rows", []) if path.is_file() else []
        record["rows"] = [r for r in earlier if r.get("id") not in {n["id"] for n in rows}] + rows
        write_json(path, record)
        print(f"  runs: {path}")
    return 0 if len({r["verdicts_sha256"] for r in runs}) == 1 else 1


def record_resources(out: Path, path: Path, started: datetime.datetime, source: str, extra: dict) -> dict:
    """Write the "class" record (module docstring) of the reports in OUT to path; returns it."""
    reports = [json.loads(p.read_text()) for p in sorted((out / outdir.STUDENTS).glob("*/*.json"))
               if not p.name.endswith(outdir.ATTEMPT + ".json")]
    rows, grader = resources.summarize(reports, lambda r: score.is_grade(r))
    measured = next(((r.get("gpu") or {}).get("device") for r in reports if score.is_grade(r)
                     and ((r.get("gpu") or {}).get("device") or {}).get("name")), None)
    found, why = gpulist.list_gpus()
    name = (measured or {}).get("name") or (found[0].name if found else f"no GPU ({why})")
    device = {"name": name, "compute_capability": (measured or {}).get("cc"),
              "sm_count": (measured or {}).get("sm_count")}
    smi = gpulist.smi_facts(name)
    device.update(sm_clock_max_mhz=smi["sm_clock_max_mhz"], driver=smi["driver"], cuda=records.cuda_release())
    record = records.record_header("class", source, device, started)
    record.update(extra, grader_peak_rss_mib=grader, rows=rows)
    write_json(path, record)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=8, metavar="N", help="students in the class (default 8)")
    parser.add_argument("--labs", help="comma-separated labs (default: every lab with known submissions)")
    parser.add_argument("--only-correct", action="store_true", help="correct submissions only")
    parser.add_argument("--jobs", type=int, default=None, help="grade.py class --jobs (default: CPU count)")
    parser.add_argument("--gpus", default=None, help="grade.py class --gpus (default: all)")
    parser.add_argument("--cores", type=int, default=64, help="build cores of the projected cluster (default 64)")
    parser.add_argument("--out", type=Path, help="where the class and its grading go (default: a temporary folder)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    parser.add_argument("--record", type=Path, metavar="FILE",
                        help="also write what each lab's stages used (the class recording grade.py slurm reads), "
                             "e.g. handouts/data/h100/class.json")
    parser.add_argument("--scaling", metavar="N,N,...", help="grade the class once per GPU count (e.g. 1,2,4)")
    parser.add_argument("--scaling-record", type=Path, metavar="FILE",
                        help="keep the --scaling runs here, e.g. handouts/data/h100/class-scaling.json")
    args = parser.parse_args(argv)
    if args.students < 1:
        parser.error("--students must be at least 1")
    labs = [x.strip() for x in args.labs.split(",")] if args.labs else None
    work = args.out or Path(tempfile.mkdtemp(prefix="bench-class-"))
    subs, out = work / "class", work / "grades"
    count = make_class(subs, args.students, labs, args.only_correct)
    found, why = gpulist.list_gpus()
    device = ", ".join(sorted({g.name for g in found})) if found else f"no GPU ({why})"
    print(f"bench_class: {args.students} student(s), {count} submission-lab(s) in {subs}; device: {device}",
          flush=True)
    if args.scaling:
        return scaling(subs, work, args, labs, count, device)
    started = records.now()
    wall, status = grade(subs, out, args, labs, args.gpus)
    if not (out / "gradings.csv").is_file():
        print(f"bench_class: grade.py class wrote no gradings.csv (exit status {status})", file=sys.stderr)
        return 2
    result = figures(out, wall, args.cores)
    result.update(device=device, gpus_listed=len(found), date=datetime.date.today().isoformat(),
                  students=args.students, jobs=args.jobs or os.cpu_count(), only_correct=args.only_correct,
                  labs=labs or "all")
    print(f"\nclass throughput on {device} ({result['date']}, {result['jobs']} jobs, "
          f"{result['gpus_used']} GPU(s) used):")
    print(f"  {result['gradings']} gradings in {result['wall_s']:.0f} s wall: {result['wall_rate_per_min']} "
          f"per minute; verdicts {result['verdicts']}")
    rate = result["builds_per_core_min"]
    print(f"  builds: {result['builds']} in {result['build_cpu_s']:.0f} core-seconds: "
          f"{rate if rate is not None else 'not measured'} builds per CPU core-minute")
    rate = result["labs_per_gpu_min"]
    print(f"  GPU stages: {result['gpu_gradings']} in {result['gpu_busy_s']:.0f} GPU-seconds: "
          f"{rate if rate is not None else 'not measured'} submission-labs per GPU-minute")
    if "projection" in result:
        p = result["projection"]
        print(f"  projection, {p['gradings']} gradings (1000 students x 8 labs) on {p['gpus']} GPUs and "
              f"{p['build_cores']} build cores: GPU stages {p['gpu_wall_min']} min, builds {p['build_wall_min']} min: "
              f"at least {p['wall_min_at_least']} min of wall time (batch-system delays not counted)")
    else:
        print("  projection: not made (the GPU stages were not measured here)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"  figures: {args.json}")
    if args.record:
        source = "python3 tests/submissions/bench_class.py " + " ".join(argv if argv is not None else sys.argv[1:])
        rec = record_resources(out, args.record, started, source,
                               {"students": args.students, "jobs": result["jobs"], "cpus": os.cpu_count()})
        print(f"  what each lab's stages used (grade.py slurm's --time, --mem, --cpus-per-task): {args.record}")
        for row in rec["rows"]:
            used = ("not measured" if not row["n"] else
                    f"median {row['wall_s_median']:.1f} s wall, {row['cpu_s_median']:.1f} s CPU; "
                    f"peak {row['peak_rss_mib_max']:.0f} MiB (n={row['n']})")
            print(f"    {row['lab']:<24} {row['stage']:<6} {used}")
    print(f"  class and grades: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
