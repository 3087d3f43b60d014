"""The GPUs of this host, as nvidia-smi lists them.

Used by the GPU pool (locks.GpuPool) and recorded in every report: a grading
names the GPU it ran on (index, UUID, name), so a class graded on several GPUs
can be checked for mixed models.  nvidia-smi ships with the NVIDIA driver;
without it (or without a driver) there is no GPU to list.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import asdict, dataclass

from . import process

QUERY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Gpu:
    """One GPU: nvidia-smi's index (the CUDA_VISIBLE_DEVICES number with the default
    PCI bus order), its UUID (stable across reboots and orderings), its name and its
    compute capability ("9.0"; "" when nvidia-smi does not say)."""

    index: int
    uuid: str
    name: str
    compute_cap: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


QUERY = "index,uuid,compute_cap,name"


def parse_query(text: str) -> list[Gpu]:
    """GPUs from `nvidia-smi --query-gpu=index,uuid,compute_cap,name --format=csv,noheader`
    output (the name last: it may hold commas); lines of another shape are ignored."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",", 3)]
        if len(parts) == 4 and parts[0].isdigit() and parts[1]:
            gpus.append(Gpu(int(parts[0]), parts[1], parts[3], parts[2]))
    return gpus


def list_gpus() -> tuple[list[Gpu], str | None]:
    """(the GPUs of this host, None), or ([], why there is none)."""
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except FileNotFoundError:
        return [], "nvidia-smi not found: no NVIDIA driver on this machine"
    except (OSError, subprocess.SubprocessError) as err:
        return [], f"nvidia-smi failed: {err}"
    gpus = parse_query(done.stdout)
    if done.returncode != 0 or not gpus:
        why = (done.stderr or done.stdout).strip().splitlines()
        return [], "nvidia-smi lists no GPU" + (f": {why[-1]}" if why else "")
    return gpus, None


def arch(compute_cap: str | None) -> int | None:
    """The architecture number of a compute capability ("9.0" -> 90, as in sm_90); None when
    compute_cap is not one ("", "9", None)."""
    major, _, minor = (compute_cap or "").partition(".")
    return int(major) * 10 + int(minor) if major.isdigit() and minor.isdigit() else None


def elf_runs_on(arch: int, gpu_arch: int) -> bool:
    """Whether machine code for sm_`arch` loads on a GPU of sm_`gpu_arch`: the same major version,
    not newer (CUDA C++ Programming Guide, "Binary Compatibility": sm_80 code runs on sm_86)."""
    return arch // 10 == gpu_arch // 10 and arch <= gpu_arch


def visible_gpu() -> Gpu | None:
    """The GPU a CUDA program started now runs on, chosen as CUDA does: the first entry of
    CUDA_VISIBLE_DEVICES (an index, a UUID or a UUID's prefix), or the first GPU nvidia-smi lists
    when the variable is unset.  None without a GPU, or when that entry names none of them."""
    found, _why = list_gpus()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return found[0] if found else None
    first = visible.split(",")[0].strip()
    return next((g for g in found if first == str(g.index) or (first and g.uuid.startswith(first))), None)


def select(gpus: list[Gpu], spec: str) -> list[Gpu]:
    """The GPUs named by `--gpus`: "all", or indices such as "0,2".  Raises ValueError naming
    an unknown or repeated index."""
    if spec.strip() == "all":
        return list(gpus)
    by_index = {g.index: g for g in gpus}
    chosen = []
    for part in spec.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) not in by_index:
            known = ", ".join(str(i) for i in sorted(by_index)) or "none"
            raise ValueError(f"--gpus: {part!r} is not a GPU of this host (indices: {known}; or 'all')")
        if by_index[int(part)] in chosen:
            raise ValueError(f"--gpus: GPU {part} is named twice")
        chosen.append(by_index[int(part)])
    return chosen


@dataclass(frozen=True)
class GpuState:
    """What a GPU is doing now, from nvidia-smi: free and total memory (MiB), whether MIG mode
    is on, and the compute processes on it: (pid, name, used MiB) each.  nvidia-smi inside a
    container often lists no process of another container (their PIDs are not visible)."""

    memory_free_mib: int | None = None
    memory_total_mib: int | None = None
    mig: bool = False
    processes: tuple[tuple[int, str, int | None], ...] = ()


def smi_facts(device_name: str | None = None) -> dict:
    """{driver, sm_clock_max_mhz} of the GPU named device_name (else the first nvidia-smi lists): the driver's
    version ("580.159.04") and the maximum SM clock (MHz, a float); each None when nvidia-smi is missing or
    does not say.  The one place the kit asks nvidia-smi for them (records, rooflines, report pages)."""
    facts = {"driver": None, "sm_clock_max_mhz": None}
    out = process.output(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                          "--format=csv,noheader,nounits"], QUERY_TIMEOUT_S)
    lines = [[c.strip() for c in line.split(",")] for line in (out or "").splitlines() if line.count(",") >= 2]
    if lines:
        chosen = next((cells for cells in lines if cells[0] == device_name), lines[0])
        facts["driver"] = chosen[1] or None
        try:
            facts["sm_clock_max_mhz"] = float(chosen[2])
        except ValueError:
            pass
    return facts


def _int(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def gpu_state(uuid: str) -> GpuState | None:
    """The state of the GPU with this UUID (GpuState), or None when nvidia-smi cannot say."""
    out = process.output(["nvidia-smi", "--query-gpu=uuid,memory.free,memory.total,mig.mode.current",
                          "--format=csv,noheader,nounits"], QUERY_TIMEOUT_S)
    row = next((cells for line in (out or "").splitlines()
                if (cells := [c.strip() for c in line.split(",")])[0] == uuid and len(cells) == 4), None)
    if row is None:
        return None
    apps = process.output(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                           "--format=csv,noheader,nounits"], QUERY_TIMEOUT_S)
    processes = []
    for line in (apps or "").splitlines():
        head = [c.strip() for c in line.split(",", 2)]           # the name may hold commas
        if len(head) == 3 and head[0] == uuid and head[1].isdigit() and "," in head[2]:
            name, used = head[2].rsplit(",", 1)
            processes.append((int(head[1]), name.strip(), _int(used)))
    return GpuState(_int(row[1]), _int(row[2]), row[3].lower() == "enabled", tuple(processes))
