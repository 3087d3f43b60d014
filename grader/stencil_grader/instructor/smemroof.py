"""The shared-memory roof of this GPU, measured: grader/harness/smem_roof.cu built and run.

    python3 grader/grade.py smem-roof [--json handouts/data/SLUG/smem-roof.json]   (make smem-roof SLUG=h100)

The program reports, for conflict-free loads of 4 and of 16 bytes, the bytes per clock one SM's shared
memory delivers (the median over the SMs, and the lowest); the hardware's figure is 128 (32 banks x 4 bytes,
CUDA C++ Programming Guide, "Shared Memory").  The record (kind "smem-roof", rows "4B" and "16B") is what lab
8's roofline draws its shared-memory ceiling from (roofs.roofline_ceilings), in place of the datasheet figure.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .. import KIT_ROOT
from ..base import gpuprobe, toolkit
from ..base.cliargs import UsageError
from .records import DATA_DIR, RecordError, load_recordings, now, record_header, write_record

SOURCE = KIT_ROOT / "grader" / "harness" / "smem_roof.cu"
BUILD = KIT_ROOT / "build" / "smem-roof"


def build(cc: str, nvcc: str | None = None, out_dir: Path = BUILD) -> Path:
    """smem_roof built for compute capability cc ("9.0") into out_dir; its path.  Raises UsageError (exit 2)
    without nvcc or when nvcc fails (its last lines)."""
    nvcc = nvcc or toolkit.find_nvcc()
    if nvcc is None:
        raise UsageError("smem-roof needs nvcc (the CUDA toolkit): none found (CUDA_HOME, PATH, /usr/local/cuda)")
    arch = cc.replace(".", "")
    out = Path(out_dir) / f"smem_roof-sm_{arch}"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([nvcc, "-O3", "-std=c++17", f"-arch=sm_{arch}", "-o", str(out), str(SOURCE)],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UsageError(f"nvcc could not build {SOURCE.name}: {err}") from None
    if done.returncode != 0:
        raise UsageError(f"nvcc could not build {SOURCE.name}: " + " / ".join(done.stderr.strip().splitlines()[-3:]))
    return out


def measure(binary: Path, timeout_s: float = 120) -> dict:
    """What the program printed (its JSON object, grader/harness/smem_roof.cu).  Raises UsageError when it
    fails (no GPU, a CUDA error: its message), runs past timeout_s or prints no JSON."""
    try:
        done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UsageError(f"{binary.name} did not run to its end: {err}") from None
    if done.returncode != 0:
        raise UsageError((done.stderr.strip() or f"{binary.name} ended with exit status {done.returncode}"))
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        raise UsageError(f"{binary.name} printed no JSON: {done.stdout[:200]!r}") from None


def to_record(data: dict, source: str) -> dict:
    """The record of one run (records.RECORD_FORMAT, kind "smem-roof"): rows "4B" and "16B" with bytes,
    bytes_per_clock_per_sm (median over the SMs), lowest_sm, blocks_per_sm, clock_mhz (the SM clock the run
    saw), ms."""
    record = record_header("smem-roof", source, {"name": data["device"], "compute_capability": data["cc"],
                                                 "sm_count": data["sm_count"]}, now())
    record["rows"] = [{"id": f"{a['bytes']}B", **a} for a in data["accesses"]]
    return record


def recorded_bytes_per_clock(slug: str, width: int = 4, data_dir: Path = DATA_DIR) -> float | None:
    """The recorded bytes per clock per SM of `width`-byte loads on GPU `slug`; None without a recording."""
    try:
        record = load_recordings(data_dir).get(slug, "smem-roof").data
    except RecordError:
        return None
    row = next((r for r in record["rows"] if r["id"] == f"{width}B"), None)
    return float(row["bytes_per_clock_per_sm"]) if row else None


def cmd_smem_roof(args) -> int:
    """grade.py smem-roof: build, run on this machine's first GPU, print; --json FILE records it."""
    found = gpuprobe.probe(quick=True)
    if not found.ok:
        raise UsageError(f"smem-roof needs a GPU: {found.message or found.status}")
    data = measure(build(found.cc))
    for a in data["accesses"]:
        print(f"{data['device']}: {a['bytes']:2d}-byte shared loads: {a['bytes_per_clock_per_sm']:.1f} bytes per "
              f"clock per SM (median of {data['sm_count']} SMs; lowest {a['lowest_sm']:.1f}) at {a['clock_mhz']:.0f} "
              f"MHz; the hardware's figure: 128")
    if args.json:
        path = write_record(to_record(data, "grade.py smem-roof --json (make smem-roof)"), args.json)
        print(f"recorded: {path}")
    return 0
