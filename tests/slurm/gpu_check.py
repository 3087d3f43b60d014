#!/usr/bin/env python3
"""On a GPU machine: the known submissions graded through Slurm and through `grade.py class`, compared.

    python3 tests/slurm/gpu_check.py --prefix /opt/slurm-root --out DIR [--labs 03-boundary-neat,...]
                                     [--all] [--phase-timeout S]

(tests/slurm/gpu-check.sh unpacks the Slurm packages first and calls this.)  Steps:

1. a one-node Slurm from PREFIX (minislurm.py), its node declaring the machine's GPUs as gres
   (gres.conf names /dev/nvidiaN), so that a task asking `--gres=gpu:1` gets one and Slurm
   sets CUDA_VISIBLE_DEVICES;
2. a class laid out from tests/submissions (one student per known submission; --labs picks
   labs, --all takes every lab: about 62 submission-labs, more than one 10-minute device call
   holds for both gradings);
3. `grade.py slurm` of that class (the CPU array, the GPU array, the merge), waited for;
4. `grade.py class` of the same class on the same GPU;
5. the verdicts compared grading by grading (pass and slow count as the same: "correct"
   submissions sit near their target, and timing noise moves them across it), and each
   against tests/submissions' expected verdict.

Writes under DIR: gpu_check.json (every grading's two verdicts, the wall seconds of each
phase, the GPU tasks' CUDA_VISIBLE_DEVICES and GPUs), summary.txt, and each grading's
class.csv, gradings.csv and summary.txt, the Slurm run's run.json, task status files and logs.
Exit status 0 when every grading got the same verdict both ways.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KIT_ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(KIT_ROOT / "tests" / "submissions"))
sys.path.insert(0, str(KIT_ROOT / "grader"))

import minislurm  # noqa: E402
from check_verdicts import META_VERDICTS, collect, from_report, make_class, student_name  # noqa: E402
from stencil_grader.classes import outdir  # noqa: E402

DEFAULT_LABS = "03-boundary-neat,04-max-smem,05-z-coarsening,07-reduction-residual"
SAME = [set(META_VERDICTS["correct"])]


def gpu_devices() -> tuple[list[str], list[str]]:
    """(/dev/nvidiaN of each GPU nvidia-smi lists, in index order; their names)."""
    try:
        text = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=60).stdout
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=60).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return [], []
    minors = re.findall(r"Minor Number\s*:\s*(\d+)", text)
    names = [n.strip() for n in names if n.strip()]
    devices = [f"/dev/nvidia{m}" for m in minors] or [f"/dev/nvidia{i}" for i in range(len(names))]
    return [d if Path(d).exists() else "/dev/null" for d in devices], names


def same(a: str | None, b: str | None) -> bool:
    return a == b or any(a in group and b in group for group in SAME)


def read_reports(out: Path) -> dict[str, dict]:
    """{"student/lab": report} of a class grading's OUT (outdir.read_reports)."""
    labs = [d.name for d in (KIT_ROOT / "labs").iterdir() if (d / "lab.json").is_file()]
    return {f"{student}/{lab}": data for student, found in outdir.read_reports(out, labs).items()
            for lab, data in found.items()}


def run(argv: list, env: dict, timeout_s: float, log: Path) -> tuple[int | None, float]:
    """Run a command, its output to log; (exit status or None on timeout, wall seconds)."""
    start = time.monotonic()
    with open(log, "w") as f:
        try:
            status = subprocess.run([str(a) for a in argv], env=env, stdout=f, stderr=subprocess.STDOUT,
                                    timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            status = None
    return status, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", type=Path, help="Slurm unpacked here (default: the installed packages)")
    parser.add_argument("--out", type=Path, required=True, help="where the results go ($OUT on the device)")
    parser.add_argument("--labs", default=DEFAULT_LABS, help=f"labs whose known submissions to grade "
                                                             f"(default {DEFAULT_LABS})")
    parser.add_argument("--all", action="store_true", help="every lab's known submissions")
    parser.add_argument("--phase-timeout", type=float, default=270.0, help="seconds each grading may take")
    args = parser.parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    labs = None if args.all else [x.strip() for x in args.labs.split(",") if x.strip()]
    entries = [e for e in collect(KIT_ROOT) if labs is None or e.lab in labs]
    work = Path(tempfile.mkdtemp(prefix="stencil-gpu-check-"))
    klass = work / "class"
    make_class(entries, klass)
    devices, names = gpu_devices()
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "gpus": names, "gres_files": devices, "labs": labs or "all", "gradings": len(entries)}
    print(f"gpu_check: {len(entries)} known submission(s); GPUs: {names or 'none'}; gres: {devices}", flush=True)
    prefix = args.prefix
    if prefix is not None and isinstance(minislurm.find_programs(prefix), str) \
            and not isinstance(minislurm.find_programs(None), str):
        print(f"gpu_check: no Slurm under {prefix} (unpack-debs.sh skips what is installed): the installed "
              "packages are used", flush=True)
        prefix = None
    record["slurm_prefix"] = str(prefix) if prefix else "installed packages"
    cluster = minislurm.MiniSlurm(work / "slurm", prefix, gpus=devices)
    try:
        cluster.start()
        print("gpu_check: Slurm is up:", cluster.run("sinfo", "-N", "-o", "%N %T %G").stdout.strip(), flush=True)
        grade = [sys.executable, KIT_ROOT / "grader" / "grade.py"]
        env = cluster.env()
        slurm_out, class_out = work / "graded-slurm", work / "graded-class"
        # --array-max 6: a few gradings per task, as on a real class (and fewer task start-ups here)
        status, _ = run(grade + ["slurm", klass, "--out", slurm_out, "--partition", minislurm.PARTITION,
                                 "--array-max", "6"]
                        # without a GPU (trying this script out): no gres to ask for, and sm_90 builds
                        + (["--gres", "none", "--arch", "90"] if not devices else []), env, 120,
                        out / "slurm-submit.log")
        start = time.monotonic()
        try:
            cluster.wait_idle(args.phase_timeout)
            record["slurm_finished"] = True
        except minislurm.MiniSlurmError as err:
            record["slurm_finished"] = False
            record["slurm_error"] = str(err)[:2000]
            cluster.run("scancel", "--quiet", *cluster.jobs(), check=False)
        record["slurm_submit_status"] = status
        record["slurm_finished"] = record["slurm_finished"] and status == 0
        record["slurm_wall_s"] = round(time.monotonic() - start, 1)
        runs = sorted((slurm_out / "batch").glob("run-*"))
        if runs:
            tasks = [json.loads(p.read_text()) for p in sorted((runs[-1] / "tasks").glob("gpu-*.json"))]
            record["gpu_tasks"] = [{k: t.get(k) for k in ("task", "node", "cuda_visible_devices", "state", "message")}
                                   for t in tasks]
            shutil.copytree(runs[-1], out / "slurm-run", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("builds", "pending"))
        status, wall = run(grade + ["class", klass, "--out", class_out], dict(os.environ), args.phase_timeout,
                           out / "class.log")
        record["class_status"], record["class_wall_s"] = status, round(wall, 1)
        for name, folder in (("slurm", slurm_out), ("class", class_out)):
            for f in ("class.csv", "gradings.csv", "summary.txt"):
                if (folder / f).is_file():
                    shutil.copyfile(folder / f, out / f"{name}-{f}")
        by_slurm, by_class = read_reports(slurm_out), read_reports(class_out)
        rows, differ = [], 0
        for entry in entries:
            key = f"{student_name(entry)}/{entry.lab}"
            s, c = by_slurm.get(key, {}), by_class.get(key, {})
            row = {"key": key, "expected": entry.verdict, "slurm": s.get("verdict"), "class": c.get("verdict"),
                   "slurm_points": s.get("points"), "class_points": c.get("points"),
                   "slurm_gpu": ((s.get("gpu") or {}).get("assigned") or {}).get("name"),
                   "slurm_vs_expected": from_report(entry, s).status if s else "missing",
                   "class_vs_expected": from_report(entry, c).status if c else "missing"}
            row["same"] = same(row["slurm"], row["class"])
            differ += not row["same"]
            rows.append(row)
        record["rows"], record["differ"] = rows, differ
    finally:
        cluster.stop()
        for log in ("slurmctld.log", "slurmd.log"):
            src = work / "slurm" / "log" / log
            if src.is_file():
                shutil.copyfile(src, out / log)
    lines = [f"gpu_check {record['date']}: GPUs {record['gpus']}, {record['gradings']} gradings",
             f"slurm: finished {record.get('slurm_finished')} in {record.get('slurm_wall_s')} s; "
             f"class: status {record.get('class_status')} in {record.get('class_wall_s')} s",
             f"GPU tasks: {record.get('gpu_tasks')}",
             f"{record.get('differ')} grading(s) differ between Slurm and grade.py class"]
    lines += [f"  {r['key']:<45} expected {r['expected']:<13} slurm {r['slurm']!s:<13} class {r['class']!s:<13}"
              f"{'' if r['same'] else '  DIFFERENT'}" for r in record.get("rows", [])]
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    (out / "gpu_check.json").write_text(json.dumps(record, indent=2) + "\n")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)
    return 0 if record.get("differ") == 0 and record.get("slurm_finished") else 1


if __name__ == "__main__":
    sys.exit(main())
