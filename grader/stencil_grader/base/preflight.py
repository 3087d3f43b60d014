"""Before any build: can this machine's GPU grade the labs?  What is refused (exit 2, one line with the
fix) and what is warned: grader/README.md, section 4.  No GPU is no refusal.  Sources: gpuprobe's
quick probe, nvidia-smi (gpus.py), the toolkit's release (toolkit.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import gpuprobe, gpus, toolkit

#: bench.c's fit_grid: the room it leaves beside the grids: twice the L2 cache (the flusher) and
#: this many bytes (512 MiB: the CUDA context, the copy probe's kernel, the reference's work).
BENCH_RESERVE_BYTES = 512 << 20
#: Device arrays the bench holds per problem kind (grid_kind.h's GRID_BENCH_ARRAYS: input, output
#: and the harness's two for checking; lab 7's kind six: u, f, unew and their references).
BENCH_ARRAYS = {"jacobi_residual": 6}
BENCH_ARRAYS_DEFAULT = 4
#: The L2 cache of a GPU when the probe cannot say: the largest of the supported GPUs (an H100's
#: 50 MB, rounded up), so that the estimate errs on the side of warning.
L2_BYTES_UNKNOWN = 64 << 20
OSRELEASE = Path("/proc/sys/kernel/osrelease")


@dataclass(frozen=True)
class Finding:
    """level: "refuse" (no build is worth it here) or "warn"; message: one line, with the fix."""

    level: str
    message: str


def _cuda(version: int) -> str:
    """13000 -> "13.0" (cuDriverGetVersion's encoding)."""
    return f"{version // 1000}.{version % 1000 // 10}"


def driver_findings(driver: int, release: str, driver_name: str | None, nvcc: str | None) -> list[Finding]:
    """The driver (the CUDA release it supports, cuDriverGetVersion's 12020) against the toolkit
    (release "13.0"); driver_name: nvidia-smi's driver version ("535.104.05"), when known."""
    if not driver or not release:
        return []
    major, minor = (int(x) for x in release.split("."))
    named = f"driver {driver_name}, " if driver_name else ""
    built_by = f"CUDA {release} ({nvcc})" if nvcc else f"CUDA {release}"
    if driver // 1000 < major:
        needed = toolkit.minimum_driver(major)
        return [Finding("refuse", f"the NVIDIA driver ({named}CUDA {_cuda(driver)}) is older than the toolkit that "
                        f"builds the labs, {built_by}: update the driver (CUDA {major} needs "
                        f"{needed or 'a newer one'} or later), or build with a CUDA {driver // 1000} toolkit: "
                        f"CUDA_HOME=/path/to/cuda-{driver // 1000}.x make check")]
    if driver // 1000 == major and driver % 1000 // 10 < minor:
        return [Finding("warn", f"the NVIDIA driver ({named}CUDA {_cuda(driver)}) is older than the toolkit, "
                        f"{built_by}: it runs the labs through CUDA's minor-version compatibility (the build "
                        "holds machine code for this GPU); update the driver if a CUDA call fails")]
    return []


def _which_toolkits(number: int) -> str:
    """The releases whose toolkits build for compute capability `number` (70: "CUDA 12.0 to 12.9";
    120: "CUDA 12.8 or later"), "" for none."""
    first, last = toolkit.first_release_for(number), toolkit.last_release_for(number)
    if not first:
        return ""
    return f"CUDA {first} or later" if last == toolkit.rows()[-1] else f"CUDA {first} to {last}"


def architecture_findings(name: str, cc: str, release: str, cuda_arch: str = "") -> list[Finding]:
    """The GPU's compute capability ("7.0") against the architectures of the toolkit's release ("12.4"),
    naming the releases that build for it; with cuda_arch set, a newer GPU runs the build's PTX."""
    try:
        number = int(cc.replace(".", ""))
        int(release.split(".")[0])
    except (ValueError, AttributeError):
        return []
    archs = toolkit.architectures(release)
    if number in archs:
        return []
    which = _which_toolkits(number)
    fix = (f"build with {which}: CUDA_HOME=/path/to/cuda-{toolkit.first_release_for(number)} make check" if which
           else "no CUDA toolkit the kit supports builds for it: use a GPU of compute capability "
                f"{min(toolkit.architectures(r)[0] for r in toolkit.rows()) / 10:.1f} or later "
                "(Colab and Kaggle lend a T4, 7.5)")
    if not archs:
        return [Finding("refuse", f"CUDA {release} is older than the kit supports (CUDA {toolkit.rows()[0]} "
                        f"and later; grader/toolkits.mk says why): {fix}")]
    if number > archs[-1]:
        if cuda_arch.strip():
            return []
        return [Finding("refuse", f"{name} is compute capability {cc}, newer than CUDA {release} builds for "
                        f"({archs[0] / 10:.1f} to {archs[-1] / 10:.1f}): {fix}; or CUDA_ARCH=compute_{archs[-1]} "
                        "make check builds PTX that the driver compiles for this GPU")]
    below = toolkit.below_note(release) if number < archs[0] else ""
    return [Finding("refuse", f"{name} is compute capability {cc}, and CUDA {release} builds for "
                    f"{archs[0] / 10:.1f} and later{f' ({below})' if below else ''}"
                    f"{'' if number < archs[0] else ' except this one'}: {fix}")]


def bench_bytes(nx: int, ny: int, nz: int, kind: str, l2_bytes: int) -> int:
    """The free GPU memory the bench needs for a lab's full grid (bench.c's fit_grid)."""
    arrays = BENCH_ARRAYS.get(kind, BENCH_ARRAYS_DEFAULT)
    return arrays * nx * ny * nz * 4 + 2 * l2_bytes + BENCH_RESERVE_BYTES


def memory_findings(free_mib: int | None, needs: list[tuple[str, int]]) -> list[Finding]:
    """needs: (lab, bytes its bench needs) each; a warning naming the labs whose grid will be scaled down."""
    if free_mib is None:
        return []
    free = free_mib << 20
    short = [(lab, need) for lab, need in needs if need > free]
    if not short:
        return []
    labs = ", ".join(f"{lab} needs {need / 1e9:.1f} GB" for lab, need in short)
    return [Finding("warn", f"the GPU has {free / 1e9:.1f} GB free: the bench scales the grid down to fit ({labs} "
                    "for the full grid) and the report says so; the ratio stays meaningful, but close other "
                    "programs on the GPU to time the full grid")]


def process_findings(processes) -> list[Finding]:
    """Other processes on the GPU (nvidia-smi's compute apps, this process left out)."""
    others = [p for p in processes if p[0] != os.getpid()]
    if not others:
        return []
    shown = ", ".join(f"{name or '?'} (pid {pid}{f', {used} MiB' if used else ''})" for pid, name, used in others[:3])
    more = f" and {len(others) - 3} more" if len(others) > 3 else ""
    return [Finding("warn", f"other processes use this GPU ({shown}{more}): they share its memory bandwidth, so "
                    "the timings (and the points they give) are unreliable until they end")]


def mig_findings(mig: bool, name: str) -> list[Finding]:
    if not (mig or " MIG " in f" {name} "):
        return []
    return [Finding("warn", f"a MIG slice ({name}): make check works on the slice CUDA shows, and the ratio is fair "
                    "(the copy bandwidth is measured on the same slice), but no target table names a slice, so the "
                    "generic targets grade it; Nsight Compute may not read a slice's counters: make profile then "
                    "gives its diagnosis without counters")]


def wsl_findings(osrelease: Path = OSRELEASE) -> list[Finding]:
    try:
        text = osrelease.read_text().lower()
    except OSError:
        return []
    if "microsoft" not in text and "wsl" not in text:
        return []
    return [Finding("warn", "WSL2: CUDA runs through the Windows NVIDIA driver (install no Linux driver in WSL; "
                    "nvidia-smi is /usr/lib/wsl/lib/nvidia-smi, which lab.mk needs on PATH to detect the GPU); "
                    "make check and make sanitize work; make profile's counters need 'Allow access to the GPU "
                    "performance counters to all users' in the Windows NVIDIA Control Panel, else it gives its "
                    "diagnosis without counters")]


def check(labs=(), probe=None, state=None, osrelease: Path = OSRELEASE, environ=None) -> list[Finding]:
    """Every finding for this machine, refusals first, for the LabSpecs `labs`; probe (a quick gpuprobe
    result) and state (gpus.gpu_state) are asked for when None."""
    probe = probe or gpuprobe.probe(quick=True)
    if not probe.ok:
        return []
    nvcc = toolkit.find_nvcc(environ)
    release = toolkit.release(nvcc, toolkit.cuda_home(environ, nvcc)) or ""
    state = state if state is not None else gpus.gpu_state(probe.uuid) or gpus.GpuState()
    driver_name = gpus.smi_facts(probe.name)["driver"]
    l2 = probe.l2_bytes or L2_BYTES_UNKNOWN
    needs = [(spec.lab, bench_bytes(spec.bench.nx, spec.bench.ny, spec.bench.nz, spec.api, l2)) for spec in labs]
    cuda_arch = (os.environ if environ is None else environ).get("CUDA_ARCH", "")
    found = (driver_findings(probe.driver, release, driver_name, nvcc)
             + architecture_findings(probe.name, probe.cc, release, cuda_arch)
             + memory_findings(state.memory_free_mib, needs) + process_findings(state.processes)
             + mig_findings(state.mig, probe.name) + wsl_findings(osrelease))
    return sorted(found, key=lambda f: f.level != "refuse")
