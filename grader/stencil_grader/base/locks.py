"""Two locks per GPU, held around the GPU stages of a grading: files with an exclusive flock(2), which the
kernel drops when the process holding them dies, so a killed grading never leaves a GPU locked
(classes/gpupool.py hands out the GPUs).

gpu-<uuid>.lock is the GPU itself: one grading at a time runs on it.  gpu-<uuid>.next.lock is the place
next in line: the grading holding it has its GPU named and makes its CUDA start while the one before it
still runs (a start serialised across the host, some 0.1-0.4 s, then costs no GPU time; grader/README.md,
section 9), and only its holder ever waits for the GPU's lock, so the GPU goes to it next.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path


class Slot:
    """A grading's place on one GPU of a GpuPool (reserve()): next in line, or holding the GPU.

    gpu: the gpus.Gpu (None: whatever CUDA_VISIBLE_DEVICES shows); take(): blocks until the GPU is held
    (at once when it already is; may be called again); waited_s: seconds take() blocked; release(): gives
    the GPU and the place back (also when the grading failed before take())."""

    def __init__(self, gpu, gpu_fd: int, next_fd: int | None):
        self.gpu = gpu
        self.waited_s = 0.0
        self._gpu_fd: int | None = gpu_fd
        self._next_fd = next_fd

    @property
    def held(self) -> bool:
        return self._gpu_fd is not None and self._next_fd is None

    def take(self) -> None:
        if self._next_fd is None:
            return
        start = time.monotonic()
        fcntl.flock(self._gpu_fd, fcntl.LOCK_EX)
        self.waited_s += time.monotonic() - start
        _unlock(self._next_fd)                  # the next grading may line up now
        self._next_fd = None

    def release(self) -> None:
        for fd in (self._next_fd, self._gpu_fd):
            if fd is not None:
                _unlock(fd)
        self._gpu_fd = self._next_fd = None


def _unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _try_lock(path: Path) -> int | None:
    """An open descriptor of path, locked exclusively, or None when another holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class GpuPool:
    """Hands one GPU of a set to a grading, exclusively, for the length of its GPU stages.

    Gradings (processes) sharing lock_dir share the pool (module docstring).  reserve() waits until a
    GPU of `gpus` is free, or has its place next in line free, and takes that; an empty `gpus` means
    "whatever CUDA_VISIBLE_DEVICES shows", under one pair of locks (gpu-any).

        slot = pool.reserve()                   # a Slot; slot.gpu: the gpus.Gpu, or None
        try:
            env = GpuPool.env(slot.gpu)         # CUDA_VISIBLE_DEVICES for the GPU programs
            ...                                 # what needs no GPU time: a CUDA start
            slot.take()                         # the GPU is this grading's now
        finally:
            slot.release()
    """

    #: Seconds between looks for a free GPU: short beside a GPU stage of a second or two, which a
    #: longer wait would leave the GPU idle for.
    POLL_S = 0.02

    def __init__(self, lock_dir: str | Path, gpus: list | None = None):
        self.lock_dir = Path(lock_dir)
        self.gpus = list(gpus or [])

    def reserve(self) -> Slot:
        """A free GPU (held), else a GPU's free place next in line (take() waits for the GPU)."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        names = [f"gpu-{g.uuid}" for g in self.gpus] or ["gpu-any"]
        while True:
            waiting = None
            for gpu, name in zip(self.gpus or [None], names):
                next_fd = _try_lock(self.lock_dir / f"{name}.next.lock")
                if next_fd is None:
                    continue
                gpu_fd = _try_lock(self.lock_dir / f"{name}.lock")
                if gpu_fd is not None:
                    if waiting is not None:
                        waiting.release()
                    _unlock(next_fd)
                    return Slot(gpu, gpu_fd, None)
                if waiting is None:
                    waiting = Slot(gpu, os.open(self.lock_dir / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644),
                                   next_fd)
                else:
                    _unlock(next_fd)
            if waiting is not None:
                return waiting
            time.sleep(self.POLL_S)

    @staticmethod
    def env(gpu) -> dict[str, str]:
        """The environment that shows a program only `gpu` (nothing when gpu is None)."""
        return {"CUDA_VISIBLE_DEVICES": gpu.uuid} if gpu is not None else {}
