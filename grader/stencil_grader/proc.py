"""Run one program under a time limit and leave nothing of it behind.

Every program the grader starts (make, check, bench) goes through `run()`:

- it gets its own process session and a mark in its environment
  (STENCIL_GRADER_RUN), so that everything it starts can be found again:
  Check forks one child per case and puts each child in a process group of
  its own, so killing the parent's group alone would leave a hung case
  running forever; and a grading process killed by instructor mode has
  children in sessions of their own, found by the mark they inherited;
- after the program ends, or when its time limit passes, every process still
  in that session or carrying that mark is killed (SIGKILL);
- stdout and stderr are read as they come and kept bounded (the first 64 KiB
  and the last 256 KiB of each), so a program printing in a loop cannot fill
  the grader's memory.

Only a process that both leaves the session (setsid) and clears its
environment escapes; the grader then stops waiting for its output after a few
seconds.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

RUN_MARK = "STENCIL_GRADER_RUN"
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 256 * 1024
_PIPE_GRACE_S = 5.0


@dataclass
class Completed:
    """What one run of a program did.

    returncode: the exit status (negative: killed by that signal); None when the
        program timed out or could not be started.
    timed_out: True when the time limit passed and the program was killed.
    seconds: wall-clock time of the run, in seconds.
    error: why the program could not be started (missing, not executable), else None.
    """

    argv: list[str]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    seconds: float = 0.0
    timeout_s: float | None = None
    error: str | None = None

    def describe(self) -> str:
        """One phrase saying how the program ended, for messages."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"timed out after {self.timeout_s:g} s and was killed"
        if self.returncode is not None and self.returncode < 0:
            return f"was killed by signal {-self.returncode} ({signal_name(-self.returncode)})"
        return f"exited with status {self.returncode}"


def signal_name(number: int) -> str:
    """'SIGSEGV' for 11, or 'signal N' when the number is unknown."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def tail_lines(text: str, n: int) -> str:
    """The last n lines of text (all of it when shorter)."""
    lines = text.rstrip("\n").splitlines()
    return "\n".join(lines[-n:])


class _Capture(threading.Thread):
    """Reads one pipe to its end, keeping its head and its tail."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def run(self) -> None:
        fd = self.pipe.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.total += len(chunk)
            room = HEAD_BYTES - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            if len(self.tail) > 2 * TAIL_BYTES:
                del self.tail[:-TAIL_BYTES]

    def text(self) -> str:
        tail = self.tail[-TAIL_BYTES:]
        dropped = self.total - len(self.head) - len(tail)
        middle = f"\n[... {dropped} bytes of output left out ...]\n".encode() if dropped > 0 else b""
        return bytes(self.head + middle + tail).decode("utf-8", errors="replace")


def _started_by(sid: int, mark: str) -> list[int]:
    """Process ids whose session is sid or whose environment carries mark (read from /proc;
    empty where there is no /proc)."""
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    needle = mark.encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp session ..."; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2:].split()
        in_session = len(fields) > 3 and int(fields[3]) == sid
        prefix = RUN_MARK.encode() + b"="
        marked = any(var.startswith(prefix) and needle in var[len(prefix):].split(b":")
                     for var in environ.split(b"\0"))
        if in_session or marked:
            found.append(int(entry.name))
    return found


def kill_started(sid: int, mark: str) -> None:
    """SIGKILL every process a `run()` started: its session sid, and whatever carries its mark."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(5):
        pids = _started_by(sid, mark)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


def run(argv: list[str], timeout_s: float, *, env: dict[str, str] | None = None,
        cwd: str | Path | None = None) -> Completed:
    """Run argv with stdin closed, at most timeout_s seconds.

    Never raises for the program's behaviour: a missing program gives
    Completed.error, a timeout gives Completed.timed_out.
    """
    argv = [str(a) for a in argv]
    mark = secrets.token_hex(8)
    env = dict(os.environ if env is None else env)
    env[RUN_MARK] = f"{env[RUN_MARK]}:{mark}" if env.get(RUN_MARK) else mark
    start = time.monotonic()
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env, cwd=cwd,
                                 start_new_session=True)
    except OSError as err:
        return Completed(argv, None, timeout_s=timeout_s,
                         error=f"could not start {argv[0]}: {err.strerror or err}")
    readers = [_Capture(child.stdout), _Capture(child.stderr)]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    kill_started(child.pid, mark)
    child.wait()
    seconds = time.monotonic() - start
    for reader, pipe in zip(readers, (child.stdout, child.stderr)):
        reader.join(_PIPE_GRACE_S)
        if not reader.is_alive():  # else an escaped process still holds the pipe
            pipe.close()
    return Completed(argv, None if timed_out else child.returncode,
                     stdout=readers[0].text(), stderr=readers[1].text(),
                     timed_out=timed_out, seconds=seconds, timeout_s=timeout_s)


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
