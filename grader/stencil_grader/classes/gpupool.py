"""The GPUs a class grading may use, each proved usable first by base/gpuprobe.py's probe (a
context, a one-instruction PTX kernel run and read back, in a process of its own): a GPU that
fails is taken out with a message, and one a grading found unusable is probed again
(GpuSet.suspect).  identify() finds the GPU a batch engine gave a task; base/locks.py GpuPool
keeps two gradings off one GPU.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from ..base import gpus as gpulist
from ..base.gpuprobe import ProbeResult, probe
from ..base.gpus import Gpu

Probe = Callable[[Gpu], ProbeResult]


def _probe_gpu(gpu: Gpu) -> ProbeResult:
    return probe(gpu.uuid)


def describe(gpu: Gpu) -> str:
    """'GPU 1 (NVIDIA H100 80GB HBM3, GPU-5c3e...)'."""
    return f"GPU {gpu.index} ({gpu.name}, {gpu.uuid})"


def choose(spec: str | None) -> tuple[list[Gpu], str | None]:
    """The GPUs `--gpus spec` names ("all", the default, or indices "0,2") among those
    nvidia-smi lists, and None; or ([], why there is none) on a machine without GPUs.
    Raises ValueError for an index that is not there (the message lists the indices)."""
    found, why = gpulist.list_gpus()
    if why:
        if spec not in (None, "all"):
            raise ValueError(f"--gpus {spec}: {why}")
        return [], why
    return gpulist.select(found, spec or "all"), None


class GpuSet:
    """The usable GPUs of one class grading: the chosen ones, less those that failed a probe.

    Thread-safe: the gradings of a local class run in threads, and any of them may report
    its GPU as suspect.  `say` receives each message (a GPU taken out); `notes` keeps them
    for the class summary.
    """

    def __init__(self, chosen: list[Gpu], probe_gpu: Probe = _probe_gpu, say: Callable[[str], None] = print):
        self.chosen = list(chosen)
        self.usable = list(chosen)
        self.removed: dict[int, str] = {}
        self.notes: list[str] = []
        self._probe = probe_gpu
        self._say = say
        self._lock = threading.Lock()

    def _remove(self, gpu: Gpu, why: str) -> None:
        self.usable = [g for g in self.usable if g.index != gpu.index]
        self.removed[gpu.index] = why
        note = f"{describe(gpu)} failed its probe ({why}): taken out of the pool"
        self.notes.append(note)
        self._say(note)

    def check(self) -> None:
        """Probe every chosen GPU (in parallel) and take out those that fail."""
        if not self.chosen:
            return
        with ThreadPoolExecutor(max_workers=len(self.chosen)) as pool:
            results = list(pool.map(self._probe, self.chosen))
        with self._lock:
            for gpu, result in zip(self.chosen, results):
                if not result.ok:
                    self._remove(gpu, result.message or result.status)

    def indices(self) -> str | None:
        """`--gpus` for a grading: "0,2" (the usable GPUs), or None when no GPU was chosen at
        all (a machine without GPUs: the gradings run and find none)."""
        with self._lock:
            return ",".join(str(g.index) for g in self.usable) if self.chosen else None

    @property
    def exhausted(self) -> bool:
        """True when GPUs were chosen and every one of them has been taken out."""
        with self._lock:
            return bool(self.chosen) and not self.usable

    def suspect(self, index: int) -> bool:
        """A grading on GPU `index` saw no usable GPU: probe it again; True when the GPU is
        (now, or already) out of the pool, so that the grading should be run again elsewhere."""
        with self._lock:
            if index in self.removed:
                return True
            gpu = next((g for g in self.usable if g.index == index), None)
            if gpu is None:
                return False
            result = self._probe(gpu)
            if result.ok:
                return False
            self._remove(gpu, result.message or result.status)
            return True

    def models(self) -> list[str]:
        """The distinct GPU names among the usable GPUs."""
        return sorted({g.name for g in self.usable})


def identify(probe_result: ProbeResult, listed: list[Gpu]) -> Gpu | None:
    """The GPU of nvidia-smi's list that the probe found (matched by UUID), or None."""
    if not probe_result.ok:
        return None
    return next((g for g in listed if g.uuid == probe_result.uuid), None)
