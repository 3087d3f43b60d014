"""EBISU (Zhang, Wahib, Chen, Meng, Wang, Endo and Matsuoka, ICS 2023, "Revisiting temporal blocking stencil
optimizations"), the best published GPU temporal blocking, timed beside lab 8's reference on this GPU:

    python3 grader/grade.py ebisu --src PATH [--json handouts/data/SLUG/ebisu.json]   (make ebisu EBISU=PATH)

PATH is a copy of EBISU's public repository (github.com/neozhang307/EBISU-ICS23) that the instructor fetched;
the kit never ships or copies its code.  Its 2D 5-point star in fp32 (2dstencil/, stencil 2d5pt, the binary its
CMake files call 2d5pt_ebisu.exe) is built here with nvcc into build/ebisu/, without CMake.  EBISU's sources
accept only compute capabilities 6.0, 7.0 and 8.0 (2dstencil/common/cuda_common.cuh stops at any other
__CUDA_ARCH__), so it is built as PTX for compute_80, which the driver compiles for this GPU when it loads:
the only way it runs on a Hopper GPU without editing its sources.

Both codes run the same grid and number of sweeps, lab 8's bench grid and steps (its lab.json), and EBISU also
its own setting of the paper (`--experiment`: a square grid and a depth chosen for its tile); a rate is cells
updated per second, TCells/s = nx x ny x steps / seconds / 1e12 (EBISU prints GCells/s by the same count).
EBISU's output is checked once, on a small grid (CHECK_ARGS: its own `--check`, the RMS difference from its CPU
code over the cells farther than `steps` from the edge, below its TOLERANCE of 1e-5), before anything is timed:
on the timed grids its CPU code would take minutes.  Lab 8's reference is checked by its bench, every cell, as in
a grading.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import KIT_ROOT
from ..base import process, toolkit
from ..base.cliargs import UsageError
from . import tour
from .records import record_header
from .roofs import run_program

LAB = "08-temporal-blocking"
BUILD_DIR = KIT_ROOT / "build" / "ebisu"
#: The C++ compiler of EBISU's host code.
CXX = "g++"
#: The files of EBISU's 2D stencils this build reads, relative to its 2dstencil/ folder.
SOURCES = ("jacobi-temporal-traditional.cu", "jacobi-2d.cu", "jacobi.driver.cpp", "2d5pt/config.cuh",
           "2d5pt/jacobi_gold.cpp", "2d5pt/jacobi_gold_gen.cpp", "common/cuda_common.cuh")
#: PTX for the newest compute capability EBISU's sources accept; the driver compiles it for this GPU.
ARCH = ("-gencode", "arch=compute_80,code=compute_80")
#: EBISU's own check (jacobi.driver.cpp): 16 sweeps of a 1024 x 1024 grid against its CPU code.
CHECK_ARGS = ("1024", "1024", "--fp32", "--iter=16", "--check")
#: The RMS difference its driver accepts (TOLERANCE in jacobi.driver.cpp).
CHECK_TOLERANCE = 1e-5
#: The fields of EBISU's result line (its 2dstencil/README.md, "Output"), tab-separated.
FIELDS = ("ptx_version", "sizeof_data", "width_x", "width_y", "iteration", "depth", "bdim", "valid_bdim",
          "grid", "block_per_sm", "shared_mem_used", "shared_mem_range", "runtime_ms", "gcells_per_s")


def stencil_dir(src: Path) -> Path:
    """The 2dstencil/ folder of EBISU's repository at src (src may be that folder itself).  Raises
    UsageError naming the files that are missing."""
    src = Path(src)
    folder = src if (src / "jacobi-2d.cu").exists() else src / "2dstencil"
    missing = [name for name in SOURCES if not (folder / name).is_file()]
    if missing:
        raise UsageError(f"--src {src}: not a copy of EBISU's repository (github.com/neozhang307/EBISU-ICS23): "
                         f"{folder} lacks {', '.join(missing)}")
    return folder


def build_commands(folder: Path, out_dir: Path, nvcc: str) -> list[list[str]]:
    """The argument lists that build EBISU's 2d5pt binary (out_dir/ebisu-2d5pt) from folder, in order; no
    shell.  The same defines as its CMake files: _TIMER_ everywhere, TRATEMPORAL for the kernels, EBISU for the
    host code; relocatable device code, as there (the host code launches kernels of another file)."""
    out = Path(out_dir)
    inc = [f"-I{folder / '2d5pt'}", f"-I{folder / 'common'}", f"-I{folder.parent / 'share'}"]
    cuda = [nvcc, "-O3", *ARCH, "-rdc=true", "-D_TIMER_", *inc]
    return [
        [*cuda, "-DTRATEMPORAL", "-c", str(folder / "jacobi-temporal-traditional.cu"), "-o", str(out / "kernels.o")],
        [*cuda, "-DEBISU", "-c", str(folder / "jacobi-2d.cu"), "-o", str(out / "host.o")],
        [CXX, "-O3", *inc, "-c", str(folder / "2d5pt" / "jacobi_gold.cpp"), "-o", str(out / "gold.o")],
        [CXX, "-O3", *inc, "-c", str(folder / "2d5pt" / "jacobi_gold_gen.cpp"), "-o", str(out / "gold_gen.o")],
        [CXX, "-O3", "-D_TIMER_", "-DEBISU", *inc, "-c", str(folder / "jacobi.driver.cpp"),
         "-o", str(out / "driver.o")],
        [nvcc, *ARCH, "-rdc=true", *(str(out / f"{o}.o") for o in ("kernels", "host", "gold", "gold_gen", "driver")),
         "-o", str(out / "ebisu-2d5pt")],
    ]


def build(src: Path, out_dir: Path = BUILD_DIR) -> Path:
    """EBISU's 2d5pt binary built from src into out_dir; its path.  Raises UsageError without nvcc, or with
    the failing command's last lines."""
    folder = stencil_dir(src)
    nvcc = toolkit.find_nvcc()
    if nvcc is None:
        raise UsageError(f"ebisu needs nvcc (the CUDA toolkit): {toolkit.why_no_nvcc()}")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for argv in build_commands(folder, Path(out_dir), nvcc):
        done = run_program(argv, 600, f"building EBISU: {Path(argv[0]).name} did not finish")
        if done.returncode != 0:
            last = process.tail_lines(done.stderr or done.stdout, 3).replace("\n", " / ")
            raise UsageError(f"building EBISU failed at {' '.join(argv[-3:])}: {last}")
    return Path(out_dir) / "ebisu-2d5pt"


def parse_result(text: str) -> dict:
    """EBISU's result line in its output text as a dict of FIELDS (numbers where they are numbers) plus
    tcells_per_s.  Raises UsageError when no line has the fields (it printed an error instead)."""
    for line in reversed(text.splitlines()):
        cells = line.strip().split("\t")
        if len(cells) == len(FIELDS):
            row = dict(zip(FIELDS, cells))
            try:
                for key in ("width_x", "width_y", "iteration", "depth", "bdim", "valid_bdim"):
                    row[key] = int(row[key])
                row["runtime_ms"], row["gcells_per_s"] = float(row["runtime_ms"]), float(row["gcells_per_s"])
            except ValueError:
                continue
            row["tcells_per_s"] = row["gcells_per_s"] / 1e3
            return row
    tail = process.tail_lines(text.strip(), 3).replace("\n", " / ") or "nothing"
    raise UsageError(f"EBISU printed no result line ({len(FIELDS)} tab-separated fields); it printed: {tail}")


def _run(binary: Path, args: list[str]):
    """EBISU's binary run with args (its command line: width_y width_x, then options) for at most 300 s:
    its CompletedProcess (run_program, whose UsageError it raises)."""
    return run_program([str(binary), *args], 300, f"EBISU ({' '.join(args)}) did not run to its end")


def run_ebisu(binary: Path, args: list[str]) -> dict:
    """One timed run of EBISU with args: parse_result of what it printed.  Raises UsageError when it fails
    (_run)."""
    done = _run(binary, args)
    if done.returncode != 0:
        raise UsageError(f"EBISU ({' '.join(args)}) ended with exit status {done.returncode}: "
                         f"{(done.stderr or done.stdout).strip()[-300:]}")
    return parse_result(done.stdout)


def check_ebisu(binary: Path) -> float:
    """EBISU's RMS difference from its CPU code on CHECK_ARGS' grid.  Raises UsageError when it is
    CHECK_TOLERANCE or more, or not printed: its rates would then be of wrong results."""
    done = _run(binary, CHECK_ARGS)
    found = re.search(r"RMS Error : (\S+)", done.stdout)
    try:
        error = float(found.group(1)) if found else None
    except ValueError:
        error = None
    if error is None or not error < CHECK_TOLERANCE:
        said = f"RMS difference {error:g}" if error is not None else "no RMS difference printed"
        raise UsageError(f"EBISU's check ({' '.join(CHECK_ARGS)}) failed: {said} from its CPU code (at most "
                         f"{CHECK_TOLERANCE:g}), exit status {done.returncode}; nothing is timed")
    return error


def compare(src: Path, measure=tour.measure, run=run_ebisu, check=check_ebisu, built: Path | None = None) -> dict:
    """Lab 8's reference and EBISU on this GPU: the record (kind "ebisu", its fields: records.RECORD_FORMAT;
    the ratios are the reference's rate over EBISU's on the same grid and over EBISU's best of its two runs).
    Raises UsageError (EBISU) or tour.TourError (lab 8's reference)."""
    binary = built or build(src)
    rms = check(binary)
    data, params = measure(LAB, "reference")
    nx, ny, steps = data["nx"], data["ny"], data["steps"]
    ours = {"id": "08/reference", "nx": nx, "ny": ny, "steps": steps, "ms": data["ms_median"],
            "tcells_per_s": nx * ny * steps / data["ms_median"] / 1e9, "ratio_to_copy": data["ratio"],
            "params": params}
    rows = [ours]
    for rid, args in (("ebisu/bench_grid", [str(ny), str(nx), "--fp32", f"--iter={steps}", "--warmup"]),
                      ("ebisu/experiment", ["--fp32", "--experiment"])):
        got = run(binary, args)
        rows.append({"id": rid, "nx": got["width_x"], "ny": got["width_y"], "steps": got["iteration"],
                     "ms": got["runtime_ms"], "tcells_per_s": got["tcells_per_s"], "depth": got["depth"],
                     "args": " ".join(args)})
    device = {"name": data["device"], "compute_capability": data["cc"], "sm_count": data["sm_count"]}
    record = record_header("ebisu", "grade.py ebisu --src EBISU-ICS23 (2dstencil, 2d5pt, fp32; PTX for "
                           "compute_80)", device)
    return record | {"copy_gbps": data["copy_gbps"], "rows": rows,
                     "ratio_bench_grid": ours["tcells_per_s"] / rows[1]["tcells_per_s"],
                     "ratio_best": ours["tcells_per_s"] / max(r["tcells_per_s"] for r in rows[1:]),
                     "ebisu_check_rms": rms, "ebisu_check": " ".join(CHECK_ARGS)}


def render(record: dict) -> str:
    """The comparison as lines of text."""
    lines = [f"{record['device']['name']}: 2D 5-point, fp32, cells updated per second"]
    for r in record["rows"]:
        lines.append(f"  {r['id']:<18} {r['nx']:>6} x {r['ny']:<6} {r['steps']:>3} sweeps  {r['ms']:9.3f} ms  "
                     f"{r['tcells_per_s']:.3f} TCells/s")
    lines.append(f"EBISU's own check ({record['ebisu_check']}): RMS difference {record['ebisu_check_rms']:.2e} "
                 "from its CPU code")
    lines.append(f"lab 8's reference: {record['ratio_bench_grid']:.2f}x EBISU on the same grid, "
                 f"{record['ratio_best']:.2f}x EBISU's best of its two runs")
    return "\n".join(lines)
