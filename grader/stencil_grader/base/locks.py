"""A lock per GPU, held around the GPU stages of a grading.

Instructor mode runs several gradings at once; each holds the lock of the GPU
it uses for the length of its GPU stages (classes/gpupool.py hands out the
GPUs).  A lock is a file with an exclusive flock(2): the kernel drops it when
the process holding it dies, so a killed grading never leaves a GPU locked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

@dataclass
class GpuLock:
    """A file lock serialising GPU stages across grader processes (instructor mode).

    With path None it does nothing.  Use as a context manager.
    """

    path: str | Path | None = None
    _fd: int | None = field(default=None, repr=False)

    def __enter__(self) -> "GpuLock":
        if self.path is not None:
            import fcntl
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            import fcntl
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
