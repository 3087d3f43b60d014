"""Nsight Compute: finding ncu, running the lab's bench under it (the command line and why each option:
grader/README.md, section 8), reading its raw page back (parse_raw_csv)."""

from __future__ import annotations

import csv
import io
import math
import os
import re
import shutil
from pathlib import Path

from ...base import process, protocol, toolkit
from ...base.files import read_json
from .common import EXIT_FAILED, CountersLocked, ProfileError

#: Timed calls the bench makes under ncu (the figures of interest are the counters of one
#: launch; a few timed calls keep the bench's own ratio meaningful).
BENCH_REPS = 5
#: The longest the profiled run may take, seconds.
NCU_TIMEOUT_S = 300.0
#: ncu retries without the metrics or sections a version does not know, at most this often.
MAX_RETRIES = 2

#: Sections of ncu (identifiers of `ncu --list-sections`) the profile collects.
SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats")
#: Metrics collected on top of the sections (the figures above need them).
METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__inst_executed.sum", "smsp__inst_executed_pipe_xu.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct",
    "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps", "launch__occupancy_limit_blocks",
    "launch__registers_per_thread", "launch__block_size", "launch__grid_size",
    "launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic",
)

PERMISSION_FIX = (
    "The GPU driver lets only administrators read the performance counters "
    "(ERR_NVGPUCTRPERM).  Run the profile as root (sudo make profile), or have an administrator "
    "allow everyone: put `options nvidia NVreg_RestrictProfilingToAdminUsers=0` into a file under "
    "/etc/modprobe.d/, then reload the driver or reboot "
    "(https://developer.nvidia.com/ERR_NVGPUCTRPERM).")
NO_NCU_FIX = (
    "Nsight Compute (ncu) was not found: looked on PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin and "
    "/opt/nvidia/nsight-compute/*/.  It ships with the CUDA toolkit (the nsight-compute package; "
    "on Debian/Ubuntu with NVIDIA's repository: sudo apt-get install nsight-compute-<version>); "
    "install it, or put the directory holding ncu on PATH.")


def find_ncu() -> str | None:
    """Path of the ncu executable, or None: PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin,
    then the newest /opt/nvidia/nsight-compute/<version>/ncu."""
    homes = (toolkit.cuda_home(), os.environ.get("CUDA_PATH"), toolkit.DEFAULT_HOME)
    candidates = [Path(h) / "bin" / "ncu" for h in homes if h]
    candidates += sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"), reverse=True)
    return shutil.which("ncu") or next((str(p) for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)


def ncu_version(ncu: str) -> str:
    """`ncu --version`'s last line (e.g. 'Version 2025.3.1.0 (build ...)'), or '' when it fails."""
    run = process.run([ncu, "--version"], 60)
    return process.tail_lines(run.stdout, 1).strip() if run.returncode == 0 else ""


def kernel_filter(names) -> str:
    """ncu's --kernel-name value selecting exactly these mangled names: regex:^(a|b)$ with every
    character other than a letter, digit or underscore escaped."""
    escaped = ["".join(ch if ch.isalnum() or ch == "_" else "\\" + ch for ch in n) for n in sorted(names)]
    return "regex:^(" + "|".join(escaped) + ")$"


def ncu_command(ncu: str, kernels, export: Path, bench: Path, bench_json: Path, seed: int | None,
                reps: int, sections=SECTIONS, metrics=METRICS) -> list[str]:
    """The profiled run's command line (grader/README.md, section 8): the bench without its launch audit,
    whose CUPTI ncu holds itself."""
    return [ncu, "--clock-control", "none", "--kernel-name-base", "mangled", "--kernel-name", kernel_filter(kernels),
            "--filter-mode", "per-launch-config", "--launch-count", "1",
            *(word for s in sections for word in ("--section", s)),
            *(["--metrics", ",".join(metrics)] if metrics else []),
            "--export", str(export), "--force-overwrite", str(bench), "--json", str(bench_json), "--reps", str(reps),
            *(["--seed", str(seed)] if seed is not None else []), "--no-audit"]


def unknown_names(errors: list[str], names) -> list[str]:
    """The requested metric or section names that ncu's error lines complain about."""
    return [n for n in names if any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", e) for e in errors)]


def run_ncu(ncu: str, kernels, build_dir: Path, seed: int | None, reps: int = BENCH_REPS,
            timeout_s: float = NCU_TIMEOUT_S) -> tuple[list[str], str, dict]:
    """Run the bench under ncu (again without what this ncu does not know, MAX_RETRIES times);
    returns (the command, ncu's raw CSV, the bench JSON).  Raises ProfileError: EXIT_CANNOT for this
    machine (counters locked, no GPU, a debug build), EXIT_FAILED for the student's code."""
    build_dir = Path(build_dir).resolve()
    bench, export, report, bench_json = (build_dir / name for name in ("bench", "profile", "profile.ncu-rep",
                                                                       "profile-bench.json"))
    sections, metrics = list(SECTIONS), list(METRICS)
    for attempt in range(MAX_RETRIES + 1):
        for stale in (report, bench_json):
            stale.unlink(missing_ok=True)
        command = ncu_command(ncu, kernels, export, bench, bench_json, seed, reps, sections, metrics)
        run = process.run(command, timeout_s, cwd=build_dir)
        said = run.stdout + "\n" + run.stderr
        errors = [line.strip() for line in said.splitlines() if line.startswith("==ERROR==")]
        if "ERR_NVGPUCTRPERM" in said:
            raise CountersLocked(PERMISSION_FIX)
        if run.timed_out:
            raise ProfileError(f"the profiled run took longer than {timeout_s:.0f} s and was stopped: does your "
                               "kernel finish? (`make check` times each case)", EXIT_FAILED)
        if run.error:
            raise ProfileError(f"could not start {ncu}: {run.error}")
        dropped = unknown_names(errors, metrics + sections)
        if dropped and attempt < MAX_RETRIES:
            metrics, sections = ([x for x in names if x not in dropped] for names in (metrics, sections))
            print(f"  ncu does not know {', '.join(dropped)}: profiling again without", flush=True)
            continue
        break
    status = run.returncode
    detail = process.tail_lines("\n".join(errors) or run.stderr.strip() or run.stdout.strip(), 6)
    if status == protocol.EXIT_NO_GPU and not report.is_file():
        raise ProfileError(f"no GPU: the bench found none ({detail})")
    if status == protocol.EXIT_DEBUG_BUILD:
        raise ProfileError("this is a debug build (DEBUG=1, -G): its counters describe unoptimised code; "
                           "`make build` without DEBUG=1, then profile again")
    if status == protocol.EXIT_CUDA_ERROR:
        raise ProfileError(f"your kernel failed with a CUDA error under the profiler:\n{detail}\n"
                           "fix it first (`make check`, `make sanitize`)", EXIT_FAILED)
    if not report.is_file():
        raise ProfileError(f"ncu wrote no report ({run.describe()}):\n{detail}")
    if not bench_json.is_file():
        raise ProfileError(f"the bench wrote no figures under ncu ({run.describe()}):\n{detail}", EXIT_FAILED)
    bench_data = read_json(bench_json, lambda why: ProfileError(why, EXIT_FAILED))
    imported = process.run([ncu, "--import", str(report), "--page", "raw", "--csv", "--print-units", "base",
                            "--print-kernel-base", "mangled"], 120, cwd=build_dir)
    if imported.returncode != 0 or not imported.stdout.strip():
        raise ProfileError(f"ncu --import {report} failed ({imported.describe()}): "
                           f"{process.tail_lines(imported.stderr, 4)}")
    return command, imported.stdout, bench_data


# ------------------------------------------------------------------ the raw page

def number(text: str) -> float | None:
    """A raw-page value as a float ('1,073,741,824' -> 1073741824.0); None for 'n/a' and text."""
    cleaned = text.strip().replace(",", "")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_raw_csv(text: str) -> list[dict]:
    """The launches of `ncu --page raw --csv --print-units base` (a header, a units row, a row per
    launch; lines before the header skipped): {id, name, block, grid, metrics {metric: float}}.
    ValueError: no header naming 'Kernel Name'."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if '"Kernel Name"' in line or line.startswith("ID,")), None)
    if start is None:
        raise ValueError("ncu's raw CSV has no header row naming 'Kernel Name'")
    reader = csv.reader(io.StringIO("\n".join(lines[start:])))
    header = next(reader)
    rows = []
    for cells in reader:
        if len(cells) != len(header):
            continue
        row = dict(zip(header, cells))
        if not row.get("ID", "").strip():           # the units row
            continue
        metrics = {key: value for key, cell in row.items() if "__" in key and (value := number(cell)) is not None}
        rows.append({"id": row.get("ID", "").strip(), "name": row.get("Kernel Name", "").strip(),
                     "block": row.get("Block Size", "").strip(), "grid": row.get("Grid Size", "").strip(),
                     "metrics": metrics})
    return rows
