"""`make profile` / `grade.py profile`: why a kernel is slow, from Nsight Compute's counters.

    grade.py profile LABDIR [--impl starter|reference|DIR] [--build-dir DIR] [--seed N]
    grade.py profile LABDIR --from-inputs BUILD_DIR/profile-inputs.json     (no GPU: analyse again)

What it does, in order:

1. builds the lab (grading/build.py, the same build `make check` makes) and reads the student's
   kernels from the build's ptxas report (their mangled names, registers, spills) and PTX (integer
   div/rem instructions, the widest global load and store of each kernel);
2. runs the lab's bench program (grader/README.md, section 3) under Nsight Compute on the lab's
   bench grid:

       ncu --clock-control none --kernel-name-base mangled --kernel-name regex:^(K1|K2)$
           --filter-mode per-launch-config --launch-count 1 --section ... --metrics ...
           --export BUILD_DIR/profile BUILD_DIR/bench --json BUILD_DIR/profile-bench.json
           --seed N --reps 5 [--no-audit]

   Only the student's kernels are profiled (named from ptxas.log, so the harness's own kernels,
   fill_random, l2_read, ref_*, count_*, copy_float4, never are), and each distinct launch
   configuration once: one launch of a sweep kernel, not every one of a timed run.
   `--clock-control none` leaves the GPU's clocks as they are (ncu's default locks them, which
   virtualised GPUs refuse);
3. reads ncu's raw page back (`ncu --import ... --page raw --csv --print-units base`), derives per
   kernel the figures below, and runs the rule table (grader/profile_rules.json) on them;
4. prints the figures and the ranked findings, and writes BUILD_DIR/profile.json (the result),
   BUILD_DIR/profile-inputs.json (everything the analysis read: ncu's raw CSV, the bench JSON, the
   static facts, the device and date; `--from-inputs` analyses it again without a GPU, and the
   tests' fixtures are such files) and BUILD_DIR/profile.ncu-rep (open it in Nsight Compute's
   GUI, ncu-ui, for the full picture).  When BUILD_DIR/report.json exists, report.html is
   written again with the diagnosis in it.

The profile is never part of a grade: it reads a build and writes its own files, and no graded
figure changes.  It runs the student's code as the user who calls it, outside the grading sandbox
(Nsight Compute needs the GPU's performance counters, which the sandbox's user is usually
denied): profile only code you would run yourself.

Figures per kernel (units: bytes; GB/s with 1 GB = 1e9 bytes; milliseconds)
--------------------------------------------------------------------------
- DRAM bytes read and written (dram__bytes_read.sum, dram__bytes_write.sum) against the compulsory
  bytes of one launch: the kind's bytes per cell (grader/kinds.json) of the launcher the kernel
  belongs to, times the bench grid's cells (one sweep per launch);
- achieved DRAM bandwidth, DRAM bytes / kernel time, against the copy bandwidth the bench measured
  in the same run;
- global load and store sectors per request (l1tex__t_sectors / l1tex__t_requests of
  pipe_lsu_mem_global_op_ld and _st) against the ideal of the kernel's widest access: a warp's 32
  coalesced accesses of W bytes fill 32 * W / 32 = W sectors of 32 bytes (4 for float, 16 for
  float4; CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory");
- load amplification: bytes the global loads fetch through L1 (sectors x 32) per byte read from
  DRAM: about 1 when each input is loaded once (a tile, a register window), about 5 when every
  thread loads its five neighbours itself;
- shared-memory bank conflicts as a share of shared-memory wavefronts (l1tex__data_bank_conflicts
  over l1tex__data_pipe_lsu_wavefronts, loads and stores);
- achieved and theoretical occupancy, and what limits it: the least of the blocks per SM that the
  registers, the shared memory, the block size (warps) and the SM's block slots allow
  (launch__occupancy_limit_*);
- local-memory traffic (l1tex__t_sectors_pipe_lsu_mem_local_op_ld/st: register spills, arrays
  indexed at run time) as a share of all L1 sectors, and ptxas's spill bytes per thread;
- the warp-stall reasons, in cycles per issued instruction
  (smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio), the three largest;
- integer div/rem: the count of div/rem instructions in the kernel's PTX (and the device functions
  it calls), and the share of executed instructions on the XU pipe (conversions and the reciprocal
  that a division by a run-time value needs; smsp__inst_executed_pipe_xu / smsp__inst_executed).

Exit status: 0 profiled; 1 the build or the program failed (a compile error, a CUDA error in the
kernel); 2 nothing could be profiled here (no ncu, counters not permitted, no GPU, a debug build,
no kernel of the student ran), with what to do about it.  Never a diagnosis made from nothing.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import io
import json
import math
import os
import re
import shutil
import string
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import labspec, process
from ..grading import build as grading_build
from ..grading import names, ptx

#: The rule table: the one place where thresholds, messages and handout sections live.
RULES_PATH = KIT_ROOT / "grader" / "profile_rules.json"
#: Format of profile-inputs.json (and of the fixtures under tests/python/data/ncu/).
INPUTS_FORMAT = 1
#: Timed calls the bench makes under ncu (the figures of interest are the counters of one
#: launch; a few timed calls keep the bench's own ratio meaningful).
BENCH_REPS = 5
#: The longest the profiled run may take, seconds.
NCU_TIMEOUT_S = 300.0
#: ncu retries without the metrics or sections a version does not know, at most this often.
MAX_RETRIES = 2

EXIT_PROFILED, EXIT_FAILED, EXIT_CANNOT = 0, 1, 2

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
#: What limits occupancy, from the blocks per SM each resource allows.
LIMITS = (("registers", "launch__occupancy_limit_registers"),
          ("shared memory", "launch__occupancy_limit_shared_mem"),
          ("block size (warps per SM)", "launch__occupancy_limit_warps"),
          ("blocks per SM", "launch__occupancy_limit_blocks"))
_STALL = re.compile(r"^smsp__average_warps?_(?:latency_)?issue_stalled_([a-z_]+?)_per_issue_active\.ratio$")
SEVERITIES = ("info", "warning", "critical")
STALLS_SHOWN = 3

_PERMISSION_FIX = (
    "The GPU driver lets only administrators read the performance counters "
    "(ERR_NVGPUCTRPERM).  Run the profile as root (sudo make profile), or have an administrator "
    "allow everyone: put `options nvidia NVreg_RestrictProfilingToAdminUsers=0` into a file under "
    "/etc/modprobe.d/, then reload the driver or reboot "
    "(https://developer.nvidia.com/ERR_NVGPUCTRPERM).")
_NO_NCU_FIX = (
    "Nsight Compute (ncu) was not found: looked on PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin and "
    "/opt/nvidia/nsight-compute/*/.  It ships with the CUDA toolkit (the nsight-compute package; "
    "on Debian/Ubuntu with NVIDIA's repository: sudo apt-get install nsight-compute-<version>); "
    "install it, or put the directory holding ncu on PATH.")


class ProfileError(Exception):
    """Nothing to diagnose: the message says why and what to do; exit_code is EXIT_FAILED
    (the submission's fault) or EXIT_CANNOT (this machine's)."""

    def __init__(self, message: str, exit_code: int = EXIT_CANNOT):
        super().__init__(message)
        self.exit_code = exit_code


class RulesError(ValueError):
    """profile_rules.json breaks its schema; the message names the rule and the key."""


# ---------------------------------------------------------------- finding ncu

def find_ncu() -> str | None:
    """Path of the ncu executable, or None: PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, then the
    newest /opt/nvidia/nsight-compute/<version>/ncu."""
    found = shutil.which("ncu")
    if found:
        return found
    candidates = [Path(os.environ[v]) / "bin" / "ncu" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates.append(Path("/usr/local/cuda/bin/ncu"))
    candidates += sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"), reverse=True)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def ncu_version(ncu: str) -> str:
    """`ncu --version`'s last line (e.g. 'Version 2025.3.1.0 (build ...)'), or '' when it fails."""
    run = process.run([ncu, "--version"], 60)
    return process.tail_lines(run.stdout, 1).strip() if run.returncode == 0 else ""


# ---------------------------------------------------------------- static facts of the build

_STORE = re.compile(r"^\s*(?:@!?%?\w+\s+)?(st\.[\w.:]*)")
_VEC = re.compile(r"^v(\d+)$")
_TYPE_BITS = re.compile(r"^[bfsu](\d+)$")


def global_store_bytes(line: str) -> int:
    """Bytes one global store instruction of a PTX line moves per thread (0 when it is not one):
    st.global.v4.f32 -> 16, st.global.f32 -> 4."""
    m = _STORE.match(line)
    if not m:
        return 0
    parts = m.group(1).split(".")
    if "global" not in parts:
        return 0
    count = next((int(v.group(1)) for p in parts if (v := _VEC.match(p))), 1)
    bits = next((int(t.group(1)) for p in reversed(parts) if (t := _TYPE_BITS.match(p))), 32)
    return count * bits // 8


def static_facts(build_dir: Path) -> dict[str, dict]:
    """Per student kernel (mangled name): what the build says of it.

    From BUILD_DIR/ptxas.log (the last architecture it lists): registers per thread, static shared
    memory per block (bytes), spill stores and loads and stack frame (bytes per thread).  From
    BUILD_DIR/kernel.ptx: div_rem (integer div/rem instructions in the kernel and the device
    functions it calls), widest_load and widest_store (bytes per thread of its widest global
    access, 0 when it has none).  label: the name people read ('sweep<4>').
    Raises ProfileError when the build holds no kernel of the student's.
    """
    log = Path(build_dir) / "ptxas.log"
    resources = grading_build.parse_ptxas_log(log.read_text(errors="replace")) if log.is_file() else []
    facts: dict[str, dict] = {}
    for k in resources:
        if k.entry:
            facts[k.name] = {"label": names.kernel_label(k.name), "arch": k.arch, "registers": k.registers,
                             "smem_bytes": k.smem_bytes, "spill_stores": k.spill_stores,
                             "spill_loads": k.spill_loads, "stack_bytes": k.stack_bytes,
                             "div_rem": 0, "div_rem_in_loop": 0, "widest_load": 0, "widest_store": 0}
    if not facts:
        raise ProfileError(f"{log} lists no kernel (__global__ function) of your file: there is nothing "
                           "to profile", EXIT_FAILED)
    ptx_path = Path(build_dir) / "kernel.ptx"
    if ptx_path.is_file():
        module = ptx.parse_ptx(ptx_path.read_text(errors="replace"))
        by_name = {f.name: f for f in module.functions}
        div_lines = {(fn, line) for _, fn, line in ptx.integer_div_rem(module)}
        for name, fact in facts.items():
            fn = by_name.get(name)
            if fn is None:
                continue
            reach = _reachable(fn, by_name)
            fact["div_rem"] = sum(1 for f, _ in div_lines if f in reach)
            fact["div_rem_in_loop"] = sum(len(in_loop(by_name[f], {n for g, n in div_lines if g == f}))
                                          for f in reach)
            fact["widest_load"] = max((ptx.global_load_bytes(t) for f in reach for _, t in by_name[f].lines),
                                      default=0)
            fact["widest_store"] = max((global_store_bytes(t) for f in reach for _, t in by_name[f].lines),
                                       default=0)
    return facts


_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$%][\w$]*)")
_LABEL = re.compile(r"^\s*(\$?[A-Za-z_][\w$]*):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$?[A-Za-z_][\w$]*)\s*;")


def in_loop(fn, line_numbers: set[int]) -> set[int]:
    """Those of line_numbers (PTX line numbers in fn's body) that lie inside a loop: between a
    label and a later branch back to it.  nvcc lays out every loop so, whether it came from for,
    while or a grid-stride loop."""
    labels: dict[str, int] = {}
    back_edges = []                                   # (label line, branch line)
    for number, text in fn.lines:
        if m := _LABEL.match(text):
            labels[m.group(1)] = number
        elif (m := _BRANCH.search(text)) and m.group(1) in labels:
            back_edges.append((labels[m.group(1)], number))
    return {n for n in line_numbers if any(start <= n <= end for start, end in back_edges)}


def _reachable(fn, by_name: dict) -> set[str]:
    """Names of fn and every function it calls, directly or not."""
    seen, todo = {fn.name}, [fn]
    while todo:
        for _, text in todo.pop().lines:
            for m in _CALL.finditer(text):
                if m.group(1) in by_name and m.group(1) not in seen:
                    seen.add(m.group(1))
                    todo.append(by_name[m.group(1)])
    return seen


def source_digest(path: Path) -> str | None:
    """sha256 of a file's bytes (None when it cannot be read): ties a profile to one source."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


# ---------------------------------------------------------------- running ncu

def kernel_filter(names) -> str:
    """ncu's --kernel-name value selecting exactly these mangled names: regex:^(a|b)$ with every
    character other than a letter, digit or underscore escaped."""
    escaped = ["".join(ch if ch.isalnum() or ch == "_" else "\\" + ch for ch in n) for n in sorted(names)]
    return "regex:^(" + "|".join(escaped) + ")$"


def bench_supports(bench: Path, option: str) -> bool:
    """Whether the bench program's usage text names `option` (usage is printed for an unknown
    option, before any GPU is touched)."""
    run = process.run([str(bench), "--usage"], 30)
    return option in (run.stdout + run.stderr)


def ncu_command(ncu: str, kernels, export: Path, bench: Path, bench_json: Path, seed: int | None,
                reps: int, no_audit: bool, sections=SECTIONS, metrics=METRICS) -> list[str]:
    """The profiled run's command line (module docstring, step 2)."""
    command = [ncu, "--clock-control", "none", "--kernel-name-base", "mangled",
               "--kernel-name", kernel_filter(kernels), "--filter-mode", "per-launch-config",
               "--launch-count", "1"]
    for s in sections:
        command += ["--section", s]
    if metrics:
        command += ["--metrics", ",".join(metrics)]
    command += ["--export", str(export), "--force-overwrite", str(bench), "--json", str(bench_json),
                "--reps", str(reps)]
    if seed is not None:
        command += ["--seed", str(seed)]
    if no_audit:
        command.append("--no-audit")
    return command


def _error_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.startswith("==ERROR==")]


def unknown_names(errors: list[str], names) -> list[str]:
    """The requested metric or section names that ncu's error lines complain about."""
    return [n for n in names if any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", e) for e in errors)]


#: Bench exit statuses (base/protocol.py): no GPU, a CUDA error, a debug build.
_BENCH_NO_GPU, _BENCH_CUDA_ERROR, _BENCH_DEBUG = 2, 3, 4


def run_ncu(ncu: str, kernels, build_dir: Path, seed: int | None, reps: int = BENCH_REPS,
            timeout_s: float = NCU_TIMEOUT_S) -> tuple[list[str], str, dict]:
    """Run the bench under ncu; returns (the command, ncu's raw CSV, the bench JSON).

    Retries without metrics or sections this ncu does not know (at most MAX_RETRIES times).
    Raises ProfileError: counters not permitted, the profiler not working here, no GPU, a debug
    build (EXIT_CANNOT); a CUDA error or a timeout of the student's code (EXIT_FAILED).
    """
    build_dir = Path(build_dir).resolve()
    bench = build_dir / "bench"
    export = build_dir / "profile"
    report = build_dir / "profile.ncu-rep"
    bench_json = build_dir / "profile-bench.json"
    no_audit = bench_supports(bench, "--no-audit")
    sections, metrics = list(SECTIONS), list(METRICS)
    for attempt in range(MAX_RETRIES + 1):
        for stale in (report, bench_json):
            stale.unlink(missing_ok=True)
        command = ncu_command(ncu, kernels, export, bench, bench_json, seed, reps, no_audit, sections, metrics)
        run = process.run(command, timeout_s, cwd=build_dir)
        said = run.stdout + "\n" + run.stderr
        errors = _error_lines(said)
        if "ERR_NVGPUCTRPERM" in said:
            raise ProfileError(_PERMISSION_FIX)
        if run.timed_out:
            raise ProfileError(f"the profiled run took longer than {timeout_s:.0f} s and was stopped: does your "
                               "kernel finish? (`make check` times each case)", EXIT_FAILED)
        if run.error:
            raise ProfileError(f"could not start {ncu}: {run.error}")
        dropped = unknown_names(errors, metrics + sections)
        if dropped and attempt < MAX_RETRIES:
            metrics = [m for m in metrics if m not in dropped]
            sections = [s for s in sections if s not in dropped]
            print(f"  ncu does not know {', '.join(dropped)}: profiling again without", flush=True)
            continue
        break
    status = run.returncode
    detail = process.tail_lines("\n".join(errors) or run.stderr.strip() or run.stdout.strip(), 6)
    if status == _BENCH_NO_GPU and not report.is_file():
        raise ProfileError(f"no GPU: the bench found none ({detail})")
    if status == _BENCH_DEBUG:
        raise ProfileError("this is a debug build (DEBUG=1, -G): its counters describe unoptimised code; "
                           "`make build` without DEBUG=1, then profile again")
    if status == _BENCH_CUDA_ERROR:
        raise ProfileError(f"your kernel failed with a CUDA error under the profiler:\n{detail}\n"
                           "fix it first (`make check`, `make sanitize`)", EXIT_FAILED)
    if not report.is_file():
        raise ProfileError(f"ncu wrote no report ({run.describe()}):\n{detail}")
    if not bench_json.is_file():
        raise ProfileError(f"the bench wrote no figures under ncu ({run.describe()}):\n{detail}", EXIT_FAILED)
    try:
        bench_data = json.loads(bench_json.read_text())
    except json.JSONDecodeError as err:
        raise ProfileError(f"{bench_json}: not JSON ({err.msg})", EXIT_FAILED) from None
    imported = process.run([ncu, "--import", str(report), "--page", "raw", "--csv", "--print-units", "base",
                            "--print-kernel-base", "mangled"], 120, cwd=build_dir)
    if imported.returncode != 0 or not imported.stdout.strip():
        raise ProfileError(f"ncu --import {report} failed ({imported.describe()}): "
                           f"{process.tail_lines(imported.stderr, 4)}")
    return command, imported.stdout, bench_data


# ---------------------------------------------------------------- ncu's raw page

def number(text: str) -> float | None:
    """A raw-page value as a float ('1,073,741,824' -> 1073741824.0); None for 'n/a' and text."""
    cleaned = text.strip().replace(",", "")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_raw_csv(text: str) -> list[dict]:
    """The rows of `ncu --page raw --csv`: one dict per profiled launch with 'name' (Kernel Name),
    'block', 'grid', 'id' and 'metrics' {metric: float} (values that are not numbers left out).

    The page is a header row of column names, then (with --print-units) a row of units whose ID
    cell is empty, then one row per launch.  Lines before the header (ncu's ==PROF== lines, if
    any) are skipped.  Raises ValueError when there is no header with 'Kernel Name'.
    """
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
        metrics = {}
        for key, cell in row.items():
            value = number(cell)
            if value is not None and "__" in key:
                metrics[key] = value
        rows.append({"id": row.get("ID", "").strip(), "name": row.get("Kernel Name", "").strip(),
                     "block": row.get("Block Size", "").strip(), "grid": row.get("Grid Size", "").strip(),
                     "metrics": metrics})
    return rows


# ---------------------------------------------------------------- the figures per kernel

def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def launcher_of(kernel: str, label: str, launchers: list[dict]) -> dict:
    """The launcher a kernel most likely belongs to: the one whose name shares a word of at least
    4 letters with the kernel's (lab 7: residual_kernel -> residual_norm2), else the only one, else
    the one with the most compulsory bytes per cell (the conservative choice: it makes no traffic
    look excessive)."""
    if len(launchers) == 1:
        return launchers[0]
    words = set(re.findall(r"[a-z]{4,}", label.lower()))
    for launcher in launchers:
        if words & set(re.findall(r"[a-z]{4,}", launcher["name"].lower())):
            return launcher
    return max(launchers, key=lambda x: x["bytes_per_cell"])


def derive(row: dict, fact: dict, inputs: dict, total_ms: float) -> dict:
    """The figures of one profiled launch (module docstring), as {name: value or None}.

    row: one of parse_raw_csv's rows; fact: static_facts()'s entry of its kernel (or {});
    inputs: the profile-inputs record (its 'bench' and 'launchers'); total_ms: the summed time of
    the profiled launches.  A figure whose counters are missing is None, and rules on it do not fire.
    """
    m = row["metrics"]
    get = m.get
    bench = inputs["bench"]
    cells = float(bench.get("nx", 1)) * float(bench.get("ny", 1)) * float(bench.get("nz", 1))
    launcher = launcher_of(row["name"], fact.get("label", row["name"]), inputs["launchers"])
    compulsory = launcher["bytes_per_cell"] * cells
    duration_ns = get("gpu__time_duration.sum")
    duration_ms = duration_ns / 1e6 if duration_ns else None
    dram_read, dram_write = get("dram__bytes_read.sum"), get("dram__bytes_write.sum")
    dram = dram_read + dram_write if dram_read is not None and dram_write is not None else None
    dram_gbps = _ratio(dram, duration_ms * 1e6 if duration_ms else None)

    gld_sectors = get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    gst_sectors = get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum")
    gld_spr = _ratio(gld_sectors, get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"))
    gst_spr = _ratio(gst_sectors, get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"))
    # A warp's 32 coalesced accesses of W bytes fill W 32-byte sectors.
    gld_ideal = float(max(4, fact.get("widest_load") or 4))
    gst_ideal = float(max(4, fact.get("widest_store") or 4))
    excesses = [x for x in (_ratio(gld_spr, gld_ideal), _ratio(gst_spr, gst_ideal)) if x is not None]

    local = [get("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"), get("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum")]
    local_sectors = sum(x for x in local if x is not None) if any(x is not None for x in local) else None
    all_sectors = sum(x for x in (local_sectors, gld_sectors, gst_sectors) if x is not None)

    def both(prefix: str) -> float | None:
        vals = [get(f"{prefix}_op_ld.sum"), get(f"{prefix}_op_st.sum")]
        return sum(v for v in vals if v is not None) if any(v is not None for v in vals) else None

    conflicts = both("l1tex__data_bank_conflicts_pipe_lsu_mem_shared")
    wavefronts = both("l1tex__data_pipe_lsu_wavefronts_mem_shared")

    limits = {what: get(metric) for what, metric in LIMITS if get(metric) is not None}
    least = min(limits.values()) if limits else None
    limiters = [what for what, v in limits.items() if v == least]

    stalls = {}
    for key, value in m.items():
        if s := _STALL.match(key):
            stalls.setdefault(s.group(1), value)
    ranked = sorted(stalls.items(), key=lambda kv: -kv[1])
    total_inst = get("smsp__inst_executed.sum")
    threads = (get("launch__grid_size") or 0) * (get("launch__block_size") or 0)
    threads_per_cell = threads / cells if threads and cells else None
    # Divisions a cell pays for, estimated from the PTX: one per cell for each div/rem inside a
    # loop (a grid-stride or row loop visits each cell once), one per thread for the others.
    divisions = None
    if fact and threads_per_cell is not None:
        looped = float(fact.get("div_rem_in_loop", 0))
        divisions = looped + (float(fact.get("div_rem", 0)) - looped) * threads_per_cell

    figures = {
        "duration_ms": duration_ms,
        "time_share": _ratio(duration_ms, total_ms),
        "cells": cells,
        "launcher": launcher["name"],
        "compulsory_bytes": compulsory,
        "dram_read_bytes": dram_read, "dram_write_bytes": dram_write, "dram_bytes": dram,
        "dram_over_compulsory": _ratio(dram, compulsory),
        "dram_gbps": dram_gbps,
        "copy_gbps": bench.get("copy_gbps"),
        "dram_of_copy": _ratio(dram_gbps, bench.get("copy_gbps")),
        "gld_sectors_per_request": gld_spr, "gld_ideal_sectors": gld_ideal,
        "gst_sectors_per_request": gst_spr, "gst_ideal_sectors": gst_ideal,
        "gld_excess": _ratio(gld_spr, gld_ideal), "gst_excess": _ratio(gst_spr, gst_ideal),
        "global_excess": max(excesses) if excesses else None,
        "load_amplification": _ratio(gld_sectors * 32 if gld_sectors is not None else None, dram_read),
        "local_bytes": local_sectors * 32 if local_sectors is not None else None,
        "local_share": _ratio(local_sectors, all_sectors) if local_sectors is not None else None,
        "spill_bytes": float(fact.get("spill_stores", 0) + fact.get("spill_loads", 0)) if fact else None,
        "shared_wavefronts": wavefronts,
        "shared_conflict_share": _ratio(conflicts, wavefronts) if wavefronts else (0.0 if wavefronts == 0 else None),
        "achieved_occupancy": get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        "theoretical_occupancy": get("sm__maximum_warps_per_active_cycle_pct"),
        "occupancy_limiter": " and ".join(limiters) if limiters else None,
        "limited_by_registers": (1.0 if "registers" in limiters else 0.0) if limiters else None,
        "limited_by_shared": (1.0 if "shared memory" in limiters else 0.0) if limiters else None,
        "limited_by_block_size": (1.0 if any(x in limiters for x in ("block size (warps per SM)", "blocks per SM"))
                                  else 0.0) if limiters else None,
        "registers": get("launch__registers_per_thread") or fact.get("registers"),
        "block_size": get("launch__block_size"),
        "smem_per_block": sum(v for v in (get("launch__shared_mem_per_block_static"),
                                          get("launch__shared_mem_per_block_dynamic")) if v is not None)
        if get("launch__shared_mem_per_block_static") is not None else None,
        "div_rem_ptx": float(fact.get("div_rem", 0)) if fact else None,
        "threads_per_cell": threads_per_cell,
        "div_rem_per_cell": divisions,
        "xu_share": _ratio(get("smsp__inst_executed_pipe_xu.sum"), total_inst),
        "top_stall": ranked[0][0] if ranked else None,
        "top_stall_cycles": ranked[0][1] if ranked else None,
    }
    figures["stalls"] = ranked[:STALLS_SHOWN]
    return figures


# ---------------------------------------------------------------- the rule table

@dataclass(frozen=True)
class Rule:
    """One row of profile_rules.json (see its "_about")."""

    id: str
    severity: str
    when: tuple[tuple[str, str, float], ...]
    message: str
    handout: str
    section: str
    source: str
    labs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RuleTable:
    rules: tuple[Rule, ...]
    settings: dict
    stall_reasons: dict
    path: str = ""


_OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, "==": lambda a, b: a == b}


def parse_rules(data, path: str = "profile_rules.json") -> RuleTable:
    """Validate the table; raises RulesError naming the rule and the key that is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise RulesError(f"{path}: must be an object with a list \"rules\"")
    rules, seen = [], set()
    for i, r in enumerate(data["rules"]):
        where = f"{path}: rules[{i}]" + (f" ({r.get('id')})" if isinstance(r, dict) and r.get("id") else "")
        if not isinstance(r, dict):
            raise RulesError(f"{where}: must be an object")
        for key in ("id", "severity", "message", "handout", "section", "source"):
            if not isinstance(r.get(key), str) or not r[key].strip():
                raise RulesError(f"{where}: \"{key}\" must be a non-empty string, got {r.get(key)!r}")
        if r["id"] in seen:
            raise RulesError(f"{where}: the id {r['id']!r} is used twice")
        seen.add(r["id"])
        if r["severity"] not in SEVERITIES:
            raise RulesError(f"{where}: \"severity\" must be one of {', '.join(SEVERITIES)}, got {r['severity']!r}")
        when = r.get("when")
        if not isinstance(when, list) or not when:
            raise RulesError(f"{where}: \"when\" must be a non-empty list of [figure, operator, number]")
        conditions = []
        for c in when:
            if not (isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and c[1] in _OPS
                    and isinstance(c[2], (int, float)) and not isinstance(c[2], bool)):
                raise RulesError(f"{where}: a condition must be [figure, one of {' '.join(_OPS)}, number], got {c!r}")
            conditions.append((c[0], c[1], float(c[2])))
        labs = r.get("labs")
        if labs is not None and not (isinstance(labs, list) and all(isinstance(x, str) for x in labs)):
            raise RulesError(f"{where}: \"labs\" must be a list of lab names or absent")
        rules.append(Rule(r["id"], r["severity"], tuple(conditions), r["message"], r["handout"], r["section"],
                          r["source"], tuple(labs) if labs is not None else None))
    settings = data.get("settings", {})
    stalls = data.get("stall_reasons", {})
    if not isinstance(settings, dict) or not isinstance(stalls, dict):
        raise RulesError(f"{path}: \"settings\" and \"stall_reasons\" must be objects")
    return RuleTable(tuple(rules), settings, stalls, path)


def load_rules(path: Path = RULES_PATH) -> RuleTable:
    """Read and validate the rule table (RulesError when it is broken)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RulesError(f"{path}: {err}") from None
    return parse_rules(data, labspec.display_path(Path(path)))


class _Values(dict):
    """format_map values: a missing or None figure shows as '?'."""

    def __missing__(self, key):
        return "?"


def _format(template: str, values: dict) -> str:
    shown = _Values()
    for k, v in values.items():
        if v is not None:
            shown[k] = v
    try:
        return string.Formatter().vformat(template, (), shown)
    except (ValueError, TypeError, IndexError):
        return template


def evaluate(table: RuleTable, kernels: list[dict], lab: str, at_target: bool) -> list[dict]:
    """Run every rule on every profiled kernel; returns the findings, ranked.

    A rule fires on a kernel when all its conditions hold (a condition on a figure that was not
    measured never holds) and the lab is in its "labs" (when it has any).  Ranking: severity
    first, then the table's order (causes before symptoms), then the kernel's share of the
    profiled time.  Findings on kernels with less than settings.min_time_share of the profiled
    time, and every finding when the launcher reaches the lab's target (settings.demote_at_target),
    are lowered to "info": worth knowing, not what makes the kernel slow.
    """
    min_share = float(table.settings.get("min_time_share", 0.0))
    demote = bool(table.settings.get("demote_at_target", False)) and at_target
    findings = []
    for order, rule in enumerate(table.rules):
        if rule.labs is not None and lab not in rule.labs:
            continue
        for k in kernels:
            f = k["figures"]
            if not all(f.get(name) is not None and not isinstance(f.get(name), str)
                       and _OPS[op](f[name], limit) for name, op, limit in rule.when):
                continue
            values = dict(f, kernel=k["label"])
            if f.get("top_stall"):
                values["stall_meaning"] = table.stall_reasons.get(f["top_stall"], "")
            severity = rule.severity
            minor = f.get("time_share") is not None and f["time_share"] < min_share
            note = ""
            if severity != "info" and (minor or demote):
                severity = "info"
                note = (" (a small part of the profiled time)" if minor else
                        " (your launcher already reaches the lab's target: worth knowing, not urgent)")
            findings.append({"rule": rule.id, "severity": severity, "table_severity": rule.severity,
                             "kernel": k["label"], "message": _format(rule.message, values) + note,
                             "handout": rule.handout, "section": rule.section, "source": rule.source,
                             "order": order, "time_share": f.get("time_share") or 0.0})
    findings.sort(key=lambda x: (-SEVERITIES.index(x["severity"]), x["order"], -x["time_share"]))
    return findings


# ---------------------------------------------------------------- analysis

def analyse(inputs: dict, table: RuleTable) -> dict:
    """The diagnosis of one profile-inputs record (GPU-less: the tests run it on fixtures).

    Returns {"lab", "impl", "device", "recorded_at", "bench", "target_ratio", "at_target",
    "kernels": [{"name", "label", "block", "grid", "figures", "static"}], "findings": [...],
    "worst": the highest severity found or None, "not_measured": [figures missing]}.
    Raises ValueError when the raw CSV cannot be read.
    """
    rows = parse_raw_csv(inputs["ncu_raw_csv"])
    static = inputs.get("static", {})
    by_label = {f["label"]: name for name, f in static.items()}
    total_ms = sum((r["metrics"].get("gpu__time_duration.sum") or 0.0) / 1e6 for r in rows)
    kernels = []
    for r in rows:
        mangled = r["name"] if r["name"] in static else by_label.get(r["name"], r["name"])
        fact = static.get(mangled, {})
        kernels.append({"name": mangled, "label": fact.get("label", names.kernel_label(mangled)),
                        "block": r["block"], "grid": r["grid"], "static": fact,
                        "figures": derive(r, fact, inputs, total_ms)})
    bench = inputs["bench"]
    ratio, target = bench.get("ratio"), inputs.get("target_ratio")
    at_target = ratio is not None and target is not None and ratio >= target
    findings = evaluate(table, kernels, inputs["lab"], at_target)
    wanted = ("dram_bytes", "gld_sectors_per_request", "shared_conflict_share", "theoretical_occupancy",
              "local_bytes", "xu_share", "top_stall")
    missing = sorted({w for k in kernels for w in wanted if k["figures"].get(w) is None})
    return {"lab": inputs["lab"], "impl": inputs.get("impl"), "device": inputs.get("device"),
            "recorded_at": inputs.get("recorded_at"), "ncu_version": inputs.get("ncu_version"),
            "source": inputs.get("source"), "source_sha256": inputs.get("source_sha256"),
            "bench": {k: bench.get(k) for k in ("nx", "ny", "nz", "steps", "gbps", "copy_gbps", "ratio",
                                                "output_ok", "output_message", "ms_median")},
            "target_ratio": target, "at_target": at_target, "kernels": kernels, "findings": findings,
            "worst": max((f["severity"] for f in findings), key=SEVERITIES.index, default=None),
            "not_measured": missing, "rules": table.path}


# ---------------------------------------------------------------- text

def _fmt(value, spec: str = ".2f", unit: str = "") -> str:
    return "?" if value is None else f"{value:{spec}}{unit}"


def _pct(value, spec: str = ".0f") -> str:
    """A fraction as a percentage ('?' when not measured)."""
    return "?" if value is None else f"{value * 100:{spec}}%"


def _mb(value) -> str:
    return "?" if value is None else f"{value / 1e6:.0f} MB"


def handout_ref(finding: dict) -> str:
    """'handout 1, "Coalescing and the thread-to-data mapping" (handouts/01-naive-5pt.md)'."""
    number = finding["handout"].split("-", 1)[0].lstrip("0") or "0"
    return f'handout {number}, "{finding["section"]}" (handouts/{finding["handout"]})'


def render_text(result: dict) -> str:
    """The terminal report of analyse()'s result: figures per kernel, then the findings."""
    b = result["bench"]
    out = [f"Profile of {result['lab']} ({result.get('impl')}) on {result.get('device')}, "
           f"Nsight Compute {(result.get('ncu_version') or '?').removeprefix('Version ')}",
           f"  bench grid {b.get('nx')} x {b.get('ny')} x {b.get('nz')}; copy bandwidth "
           f"{_fmt(b.get('copy_gbps'), '.0f')} GB/s in this run; your launcher {_fmt(b.get('gbps'), '.0f')} GB/s, "
           f"ratio {_fmt(b.get('ratio'), '.3f')}, timed under the profiler (`make check`'s figure is the one "
           "that counts" + (f"; the lab's target is {result['target_ratio']:.2f})"
                            if result.get("target_ratio") is not None else ")")]
    if b.get("output_ok") is False:
        out.append(f"  WARNING: the output under the profiler was wrong ({b.get('output_message')}): "
                   "fix correctness first (`make check`); these figures describe a wrong kernel")
    for k in result["kernels"]:
        f = k["figures"]
        out += ["", f"  kernel {k['label']} (grid {k['grid']}, block {k['block']}): "
                    f"{_fmt(f['duration_ms'], '.3f')} ms, {_pct(f['time_share'])} of the profiled time",
                f"    DRAM       {_mb(f['dram_read_bytes'])} read + {_mb(f['dram_write_bytes'])} written = "
                f"{_fmt(f['dram_over_compulsory'])}x the compulsory {_mb(f['compulsory_bytes'])}; "
                f"{_fmt(f['dram_gbps'], '.0f')} GB/s = {_fmt(f['dram_of_copy'])} of copy",
                f"    global     loads {_fmt(f['gld_sectors_per_request'], '.1f')} sectors/request "
                f"(ideal {_fmt(f['gld_ideal_sectors'], '.0f')}), stores {_fmt(f['gst_sectors_per_request'], '.1f')} "
                f"(ideal {_fmt(f['gst_ideal_sectors'], '.0f')}); loads fetch each DRAM byte "
                f"{_fmt(f['load_amplification'], '.1f')} times through L1",
                f"    shared     {_fmt(f['smem_per_block'], '.0f')} B per block; bank conflicts "
                f"{_pct(f['shared_conflict_share'])} of wavefronts",
                f"    occupancy  achieved {_fmt(f['achieved_occupancy'], '.0f')}%, theoretical "
                f"{_fmt(f['theoretical_occupancy'], '.0f')}% (limited by {f['occupancy_limiter'] or '?'}); "
                f"{_fmt(f['registers'], '.0f')} registers/thread, {_fmt(f['block_size'], '.0f')} threads/block",
                f"    local      {_fmt(f['local_bytes'], '.0f')} B of local-memory traffic "
                f"({_pct(f['local_share'], '.1f')} of L1 sectors); ptxas: {_fmt(f['spill_bytes'], '.0f')} B of "
                "spills per thread",
                f"    div/rem    {_fmt(f['div_rem_ptx'], '.0f')} in the PTX, about {_fmt(f['div_rem_per_cell'], '.3g')} "
                f"per cell; {_pct(f['xu_share'], '.1f')} of instructions on the XU pipe",
                "    stalls     " + (", ".join(f"{r} {v:.1f}" for r, v in f["stalls"]) or "?")
                + " (cycles per issued instruction)"]
    out += ["", f"Diagnosis (ranked; rules: {result.get('rules')}):"]
    if not result["findings"]:
        out.append("  no finding: no rule of the table fired")
    for i, finding in enumerate(result["findings"], 1):
        out.append(f"  {i}. [{finding['severity']}] {finding['kernel']}: {finding['message']}")
        out.append(f"       read: {handout_ref(finding)}")
    if result["worst"] in (None, "info"):
        out.append("  nothing above info: no counter points at a defect the handouts teach")
    if result.get("not_measured"):
        out.append(f"  not measured (this ncu or GPU gave no counter for): {', '.join(result['not_measured'])}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- the command

@dataclass
class ProfileRun:
    exit_code: int
    text: str
    result: dict | None = None
    written: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def _target_ratio(spec: labspec.LabSpec, device: str | None) -> float | None:
    try:
        return spec.target_for(device).target.target
    except (AttributeError, KeyError):
        return None


def collect_inputs(spec: labspec.LabSpec, impl: str, build_dir: Path, seed: int | None,
                   reps: int = BENCH_REPS, timeout_s: float = NCU_TIMEOUT_S) -> dict:
    """Profile a good build (step 2 of the module docstring); returns the profile-inputs record.
    Raises ProfileError."""
    ncu = find_ncu()
    if ncu is None:
        raise ProfileError(_NO_NCU_FIX)
    static = static_facts(build_dir)
    command, raw, bench = run_ncu(ncu, static.keys(), build_dir, seed, reps, timeout_s)
    if not parse_raw_csv(raw):
        raise ProfileError("ncu profiled none of your kernels: did the launcher launch any? "
                           f"(looked for {', '.join(f['label'] for f in static.values())})")
    source = grading_build.impl_source(spec.lab, impl)
    launchers = [{"name": x.name, "bytes_per_cell": x.bytes_per_cell, "flop_per_cell": x.flop_per_cell}
                 for x in spec.kind.launchers]
    return {"format": INPUTS_FORMAT, "lab": spec.lab, "impl": impl if impl in ("starter", "reference") else
            str(Path(impl).resolve()), "source": str(source), "source_sha256": source_digest(source),
            "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": bench.get("device"), "ncu_version": ncu_version(ncu),
            "ncu_command": [str(c) for c in command], "target_ratio": _target_ratio(spec, bench.get("device")),
            "launchers": launchers, "bench": bench, "static": static, "ncu_raw_csv": raw}


def profile_lab(lab_dir, impl: str = "starter", build_dir: Path | None = None, seed: int | None = None,
                arch: str | None = None, reps: int = BENCH_REPS, from_inputs: Path | None = None,
                table: RuleTable | None = None) -> ProfileRun:
    """The whole command: build, profile, analyse, write (module docstring); never raises for
    what the student's code or this machine does (see ProfileRun.exit_code)."""
    from ..grading import pipeline

    start = time.monotonic()
    lab_dir = pipeline.resolve_lab_dir(lab_dir)
    spec = labspec.load(Path(lab_dir) / "lab.json")
    build_dir = Path(build_dir) if build_dir else pipeline.default_build_dir(spec.lab, impl)
    table = table or load_rules()
    written = []
    try:
        if from_inputs:
            inputs = json.loads(Path(from_inputs).read_text())
        else:
            if find_ncu() is None:               # before a build that would be for nothing
                raise ProfileError(_NO_NCU_FIX)
            print(f"building {spec.lab} ({impl}) in {labspec.display_path(build_dir)} ...", flush=True)
            built = grading_build.build(spec.lab_dir, impl, build_dir, arch)
            if not built.ok:
                raise ProfileError(f"the build failed ({built.outcome}); nothing to profile:\n{built.message}",
                                   EXIT_FAILED)
            print("profiling under Nsight Compute (ncu) ...", flush=True)
            inputs = collect_inputs(spec, impl, build_dir, seed, reps)
            written.append(write_json(inputs, build_dir / "profile-inputs.json"))
        result = analyse(inputs, table)
    except ProfileError as err:
        return ProfileRun(err.exit_code, f"grade.py profile: {err}\n", seconds=time.monotonic() - start)
    except (ValueError, KeyError) as err:
        return ProfileRun(EXIT_CANNOT, f"grade.py profile: cannot read the profile ({err})\n",
                          seconds=time.monotonic() - start)
    if not from_inputs:
        written.append(write_json(result, build_dir / "profile.json"))
        page = _rewrite_report_page(build_dir, result)
        if page:
            written.append(page)
        report = build_dir / "profile.ncu-rep"
        if report.is_file():
            written.append(report)
    seconds = time.monotonic() - start
    text = render_text(result)
    if written:
        text += "\nwritten: " + ", ".join(labspec.display_path(p) for p in written) + "\n"
        text += "  (open profile.ncu-rep in Nsight Compute, ncu-ui, for every counter)\n" if any(
            p.suffix == ".ncu-rep" for p in written) else ""
    text += f"profiled in {seconds:.1f} s; the profile is not part of the grade\n"
    return ProfileRun(EXIT_PROFILED, text, result, written, seconds)


def write_json(obj: dict, path: Path) -> Path:
    """Write obj as indented JSON to path (parent folders made, replaced atomically); returns path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def _rewrite_report_page(build_dir: Path, result: dict) -> Path | None:
    """report.html again, now with the diagnosis, when the build directory holds a report.json."""
    report_json = Path(build_dir) / "report.json"
    if not report_json.is_file():
        return None
    try:
        from ..grading import html, progress

        data = json.loads(report_json.read_text())
        return html.write_lab_html(data, Path(build_dir) / "report.html", profile=result,
                                   history=progress.read(Path(build_dir) / progress.BUILD_HISTORY))
    except (ImportError, OSError, ValueError, KeyError, TypeError) as err:
        print(f"  report.html not rewritten: {err}", file=sys.stderr)
        return None
