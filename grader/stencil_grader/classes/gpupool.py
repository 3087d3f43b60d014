"""The GPUs a class grading may use, each proved usable first by base/gpuprobe.py's probe, its first probe a
gpuprobe.ContextHold that keeps a context open on a usable GPU while the class is graded (grader/README.md, section 9,
"This host"); base/locks.py GpuPool keeps two gradings off one GPU."""

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from ..base import gpus as gpulist
from ..base.gpuprobe import ContextHold, ProbeResult, probe
from ..base.gpus import Gpu
from .submissions import ClassError


def describe(gpu: Gpu) -> str:
    """'GPU 1 (NVIDIA H100 80GB HBM3, GPU-5c3e...)'."""
    return f"GPU {gpu.index} ({gpu.name}, {gpu.uuid})"


def choose(spec: str | None) -> tuple[list[Gpu], str | None]:
    """The GPUs `--gpus spec` names ("all", the default, or indices "0,2") among those nvidia-smi lists, and None; or
    ([], why there is none).  ClassError for an index that is not there (naming those that are)."""
    found, why = gpulist.list_gpus()
    if why and spec not in (None, "all"):
        raise ClassError(f"--gpus {spec}: {why}")
    try:
        return ([], why) if why else (gpulist.select(found, spec or "all"), None)
    except ValueError as err:
        raise ClassError(str(err)) from None


class GpuSet:
    """The usable GPUs of one class grading: the chosen ones, less those that failed a probe; thread-safe.  `say`
    receives each GPU taken out, `notes` keeps them for the class summary.  probe_gpu: the probe of a suspect GPU
    (default: the real one); hold_gpu: the first probe, whose `result` it gives and which holds a context open on
    each usable GPU until close() (default: gpuprobe.ContextHold; none with a probe of one's own, as tests give:
    then probe_gpu is the first probe too)."""

    def __init__(self, chosen: list[Gpu], probe_gpu: Callable[[Gpu], ProbeResult] | None = None,
                 say: Callable[[str], None] = print, hold_gpu: Callable[[Gpu], ContextHold] | None = None):
        self.chosen, self.usable, self.notes = list(chosen), list(chosen), []
        if probe_gpu is None:
            probe_gpu, hold_gpu = (lambda gpu: probe(gpu.uuid)), hold_gpu or (lambda gpu: ContextHold(gpu.uuid))
        self._probe, self._hold, self._say, self._lock = probe_gpu, hold_gpu, say, threading.Lock()
        self._held: dict[str, ContextHold] = {}

    def _remove(self, gpu: Gpu, result: ProbeResult) -> None:
        self.usable.remove(gpu)
        if (held := self._held.pop(gpu.uuid, None)) is not None:
            held.close()
        self.notes.append(f"{describe(gpu)} failed its probe ({result.message or result.status}): taken out of the "
                          "pool")
        self._say(self.notes[-1])

    def _check_one(self, gpu: Gpu) -> ProbeResult:
        if self._hold is None:
            return self._probe(gpu)
        holder = self._hold(gpu)
        if holder.result.ok:
            self._held[gpu.uuid] = holder
        else:
            holder.close()
        return holder.result

    def check(self) -> None:
        """Probe every chosen GPU (in parallel), take out those that fail, hold a context on the others."""
        with ThreadPoolExecutor(max_workers=max(1, len(self.chosen))) as pool:
            for gpu, result in zip(self.chosen, pool.map(self._check_one, self.chosen)):
                if not result.ok:
                    self._remove(gpu, result)

    def close(self) -> None:
        """Ends the contexts held open (at the end of the class run)."""
        with self._lock:
            for held in self._held.values():
                held.close()
            self._held.clear()

    def indices(self) -> str | None:
        """`--gpus` of a grading: "0,2" ("" when all were taken out), or None when none was chosen (no GPU here)."""
        with self._lock:
            return ",".join(str(g.index) for g in self.usable) if self.chosen else None

    def suspect(self, index: int) -> bool:
        """A grading on GPU `index` saw no usable GPU: probe it again; True when the GPU is
        (now, or already) out of the pool, so that the grading should be run again elsewhere."""
        with self._lock:
            gpu = next((g for g in self.chosen if g.index == index), None)     # None: not a GPU of the set
            if gpu is None or gpu not in self.usable:
                return gpu is not None
            result = self._probe(gpu)
            if not result.ok:
                self._remove(gpu, result)
            return not result.ok
