"""The GPUs a class grading may use, each proved usable by a tiny CUDA program first.

nvidia-smi can list a GPU that no program can use (fallen off the bus, a
broken driver state, an ECC error that needs a reset).  Sent there, every lab
would come back "not measured" or "crash".  So before grading, each GPU of the
class's list is probed: a short program (PROBE_PROGRAM, run in its own process
with CUDA_VISIBLE_DEVICES set to the GPU's UUID, and a time limit) initialises
the CUDA driver, makes a context on the GPU, JIT-compiles a one-instruction PTX
kernel, runs it and reads back what it wrote.  A GPU that fails is taken out of
the pool with a message naming it and what failed; the others grade.  When a
grading comes back saying its GPU was unusable, the GPU is probed again and
taken out if it fails now (GpuSet.suspect).

The probe is base/gpuprobe.py's (the CUDA driver API through ctypes: no build,
no toolkit).  It also says which GPU CUDA shows a process (UUID, name, compute
capability): the batch back ends use that to find the GPU the batch engine gave a task
(identify()).

The pool itself, the lock that keeps two gradings off one GPU, is base/locks.py's
GpuPool: each grading process takes a free GPU among the indices this module
hands it (`grade.py lab --gpu-locks DIR --gpus 0,2`).
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
