"""A lock per GPU, held around the GPU stages of a grading: a file with an exclusive flock(2), which the
kernel drops when the process holding it dies, so a killed grading never leaves a GPU locked
(classes/gpupool.py hands out the GPUs)."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path


class GpuPool:
    """Hands one GPU of a set to a grading, exclusively, for the length of its GPU stages.

    Gradings (processes) sharing lock_dir share the pool: the lock of a GPU is lock_dir/gpu-<uuid>.lock; a
    grading waits until some GPU of `gpus` is free and keeps it until the `with` block ends.  An empty `gpus`
    means "whatever CUDA_VISIBLE_DEVICES shows", under one lock (lock_dir/gpu-any.lock).

        with GpuPool(lock_dir, gpus) as gpu:     # gpu: the gpus.Gpu held, or None
            env = GpuPool.env(gpu)               # CUDA_VISIBLE_DEVICES for the GPU programs
    """

    #: Seconds between looks for a free GPU: short beside a GPU stage of a second or two, which a
    #: longer wait would leave the GPU idle for.
    POLL_S = 0.02

    def __init__(self, lock_dir: str | Path, gpus: list | None = None):
        self.lock_dir = Path(lock_dir)
        self.gpus = list(gpus or [])
        self._fd: int | None = None

    def __enter__(self):
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        names = [f"gpu-{g.uuid}.lock" for g in self.gpus] or ["gpu-any.lock"]
        while True:
            for gpu, name in zip(self.gpus or [None], names):
                fd = os.open(self.lock_dir / name, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if len(names) > 1 else 0))
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._fd = fd
                return gpu
            time.sleep(self.POLL_S)

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @staticmethod
    def env(gpu) -> dict[str, str]:
        """The environment that shows a program only `gpu` (nothing when gpu is None)."""
        return {"CUDA_VISIBLE_DEVICES": gpu.uuid} if gpu is not None else {}
