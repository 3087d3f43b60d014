"""Run one program under a time limit and leave nothing of it behind (run()): its own session and a
mark in its environment (RUN_MARK), every process in either killed (SIGKILL) when it ends; stdout and
stderr kept bounded (HEAD_BYTES, TAIL_BYTES); the private channel (grader/README.md, "How the pieces
talk") kept whole up to CHANNEL_MAX_BYTES; CPU seconds and peak resident set from wait4(2), summed by
metered().  Only a process that calls setsid and clears its environment escapes the kill.  A run with a
gate (run(gate=...)) waits, once its program says it is ready, for the gate to open, and its time limit
starts only then.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from .protocol import CHANNEL_FD_ENV, GO_FD_ENV

RUN_MARK = "STENCIL_GRADER_RUN"
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 256 * 1024
#: The most the private channel keeps; a harness that writes more is broken (Completed.channel_overflow).
CHANNEL_MAX_BYTES = 64 * 1024 * 1024
_PIPE_GRACE_S = 5.0


@dataclass
class Completed:
    """What one run of a program did: returncode (negative: killed by that signal; None after a
    timeout or a failed start, whose reason is error); seconds of wall time; cpu_s (user + system, the
    descendants it waited for included) and peak_rss_kib (wait4's ru_maxrss), None without a start."""

    argv: list[str]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    seconds: float = 0.0
    timeout_s: float | None = None
    error: str | None = None
    stopped: str | None = None
    channel: str = ""
    channel_overflow: bool = False
    cpu_s: float | None = None
    peak_rss_kib: int | None = None
    gated_s: float = 0.0         # with a gate: seconds from the start to the go (not in `seconds`)

    def describe(self) -> str:
        """One phrase saying how the program ended, for messages."""
        if self.error:
            return self.error
        if self.stopped:
            return f"was stopped ({self.stopped})"
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


#: What the student's code printed (a program's stdout: a kernel's printf) kept for the report.
OUTPUT_MAX_BYTES = 16 * 1024


def program_output(text: str) -> str:
    """The student's output as the report keeps it: at most OUTPUT_MAX_BYTES, and a line saying
    how much more there was."""
    if len(text) <= OUTPUT_MAX_BYTES:
        return text
    return text[:OUTPUT_MAX_BYTES] + f"\n[... {len(text) - OUTPUT_MAX_BYTES} more bytes not shown ...]\n"


def output(argv: list[str], timeout_s: float = 30.0) -> str | None:
    """The standard output of a short command of the grader's own (nvidia-smi, git), or None when it
    cannot run or fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def tail_lines(text: str, n: int) -> str:
    """The last n lines of text (all of it when shorter)."""
    lines = text.rstrip("\n").splitlines()
    return "\n".join(lines[-n:])


class Watch(Protocol):
    """What `run(watch=...)` calls: feed(chunk) with the output as it arrives (a reader thread);
    poll(now), often (time.monotonic()): a string stops the run at once and becomes Completed.stopped."""

    def feed(self, chunk: bytes) -> None: ...

    def poll(self, now: float) -> str | None: ...


class Gate(Protocol):
    """What `run(gate=...)` calls.  ready(): whether the program is waiting for its go (what it wrote says
    so; a process.Watch's reading); restart(now): the go was given at monotonic time now (the watch's
    clocks start there); open(): blocks until the program may go on (a GPU of a pool is held for it).
    ready_timeout_s: how long the program may take to get ready; past it, the run ends with `error` (the
    grader's machinery, not the program: nothing of the program's own has run yet)."""

    ready_timeout_s: float

    def ready(self) -> bool: ...

    def restart(self, now: float) -> None: ...

    def open(self) -> None: ...


class _Capture(threading.Thread):
    """Reads one pipe to its end, keeping its head and tail (whole: up to CHANNEL_MAX_BYTES), feeding a watcher."""

    def __init__(self, pipe, watch: Watch | None = None, whole: bool = False):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.watch = watch
        self.whole = whole
        self.overflow = False
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
            if self.watch is not None:
                self.watch.feed(chunk)
            self.total += len(chunk)
            if self.whole:
                room = CHANNEL_MAX_BYTES - len(self.head)
                self.overflow |= len(chunk) > room
                self.head += chunk[:max(0, room)]
                continue
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


@dataclass(eq=False)           # each block's own: two with the same figures are not one
class Usage:
    """What the runs of a `metered()` block used: CPU seconds summed, the largest peak resident set (KiB), runs."""

    cpu_s: float = 0.0
    peak_rss_kib: int = 0
    runs: int = 0

    def add(self, cpu_s: float, peak_rss_kib: int) -> None:
        self.cpu_s += cpu_s
        self.peak_rss_kib = max(self.peak_rss_kib, peak_rss_kib)
        self.runs += 1


_meters = threading.local()


@contextmanager
def metered():
    """Within the block, every run() of this thread adds its CPU seconds and peak resident set
    to the Usage yielded (nested blocks each get them)."""
    usage = Usage()
    stack = _meters.__dict__.setdefault("stack", [])
    stack.append(usage)
    try:
        yield usage
    finally:
        stack.remove(usage)


def _reap(child: subprocess.Popen, block: bool) -> tuple[int, object] | None:
    """(exit status, resource usage) of child once it has ended (wait4); None while it runs
    (block False).  The status is also set on child, as Popen.wait would."""
    try:
        pid, status, usage = os.wait4(child.pid, 0 if block else os.WNOHANG)
    except ChildProcessError:          # reaped elsewhere: no usage to be had
        return (child.wait(), None) if block else (None if child.poll() is None else (child.returncode, None))
    if pid == 0:
        return None
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage


def read_proc(path: str) -> bytes:
    """A /proc file's bytes, read unbuffered (OSError when the process is gone or not ours to read)."""
    with open(path, "rb", buffering=0) as f:
        return f.read()


def _started_by(sid: int, mark: str) -> list[int]:
    """Process ids whose session is sid or whose environment carries mark (read from /proc;
    empty where there is no /proc).  A scan of every process on the host, after every run: kept
    short (bytes, and no environment read for a process of the session)."""
    if not os.path.isdir("/proc"):
        return []
    found, me = [], str(os.getpid())
    needle, prefix = mark.encode(), RUN_MARK.encode() + b"="
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == me:
            continue
        try:
            # "pid (comm) state ppid pgrp session ..."; comm may hold spaces and parentheses.
            stat = read_proc(f"/proc/{name}/stat")
            fields = stat[stat.rfind(b")") + 2:].split()
            if len(fields) > 3 and int(fields[3]) == sid:
                found.append(int(name))
                continue
            environ = read_proc(f"/proc/{name}/environ")
        except (OSError, ValueError):
            continue
        if any(var.startswith(prefix) and needle in var[len(prefix):].split(b":")
               for var in environ.split(b"\0")):
            found.append(int(name))
    return found


def kill_all(find: Callable[[], list[int]], rounds: int = 5, pause_s: float = 0.05) -> bool:
    """SIGKILL every process find() names, a few rounds (a fork in flight shows up in the next one);
    True once find() names none, False when some were still there at the last round."""
    for _ in range(rounds):
        pids = find()
        if not pids:
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(pause_s)
    return False


def kill_started(sid: int, mark: str) -> None:
    """SIGKILL every process a `run()` started: its session sid, and whatever carries its mark."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    kill_all(lambda: _started_by(sid, mark))


def _end_watch(pid: int) -> Callable[[float | None], None]:
    """wait(seconds): sleeps that long, or less when process pid ends first (a pidfd, where the
    system has them: a grading holding a GPU learns at once that its program ended); wait(None)
    closes the pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):                  # not Linux 5.3+, or Python before 3.9
        return lambda seconds: time.sleep(seconds) if seconds else None

    def wait(seconds: float | None) -> None:
        if seconds is None:
            os.close(fd)
        else:
            select.select([fd], [], [], seconds)
    return wait


def run(argv: list[str], timeout_s: float, *, env: dict[str, str] | None = None,
        cwd: str | Path | None = None, stdin_text: str | None = None,
        sandbox=None, watch: Watch | None = None,
        channel: bool = False, gate: Gate | None = None) -> Completed:
    """Run argv at most timeout_s seconds; stdin closed, or fed stdin_text.  sandbox (a sandbox.Sandbox): its
    enter() runs between fork and exec, and its uid, gid (None: the grader's own) own the channel's pipe.
    watch (Watch) is fed from the channel when there is one (Completed.channel), else from stdout.  gate
    (Gate): the program reads one byte from the descriptor GO_FD_ENV names once gate.ready(); it is written
    when gate.open() returns, and timeout_s counts from then (Completed.gated_s: the seconds before).  Never
    raises for the program's behaviour: see Completed.error, timed_out and stopped."""
    argv = [str(a) for a in argv]
    mark = secrets.token_hex(8)
    env = dict(os.environ if env is None else env)
    env[RUN_MARK] = f"{env[RUN_MARK]}:{mark}" if env.get(RUN_MARK) else mark
    go_read = go_write = None
    if gate is not None:
        go_read, go_write = os.pipe()
        env[GO_FD_ENV] = str(go_read)
    read_end = write_end = None
    if channel:
        read_end, write_end = os.pipe()
        env[CHANNEL_FD_ENV] = str(write_end)
        if sandbox is not None and sandbox.uid is not None:
            # The sandbox user reopens the pipe by name (/dev/fd/N: Check opens its log by
            # name), which the kernel allows only to the pipe's owner.
            os.fchown(write_end, sandbox.uid, sandbox.gid)
    start = time.monotonic()
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
                                 start_new_session=True,
                                 pass_fds=tuple(fd for fd in (write_end, go_read) if fd is not None),
                                 preexec_fn=sandbox.enter if sandbox is not None else None)
    except (OSError, subprocess.SubprocessError) as err:
        for fd in (read_end, write_end, go_read, go_write):
            if fd is not None:
                os.close(fd)
        why = getattr(err, "strerror", None) or err
        return Completed(argv, None, timeout_s=timeout_s, error=f"could not start {argv[0]}: {why}")
    if go_read is not None:
        os.close(go_read)
    readers = [_Capture(child.stdout, None if channel else watch), _Capture(child.stderr)]
    channel_pipe = None
    if channel:
        os.close(write_end)
        channel_pipe = os.fdopen(read_end, "rb", buffering=0)
        readers.append(_Capture(channel_pipe, watch, whole=True))
    for reader in readers:
        reader.start()
    if stdin_text is not None:
        try:
            child.stdin.write(stdin_text.encode())
            child.stdin.close()
        except OSError:
            pass
    timed_out, stopped, not_ready, gated_s = False, None, False, 0.0
    deadline = start + (gate.ready_timeout_s if gate is not None else timeout_s)
    delay = 0.001
    ends = _end_watch(child.pid)
    try:
        while (ended := _reap(child, block=False)) is None:
            now = time.monotonic()
            if go_write is not None and gate.ready():
                gate.open()
                try:
                    os.write(go_write, b"g")
                except OSError:                   # the program has ended meanwhile: its ending says how
                    pass
                os.close(go_write)
                go_write = None
                now = time.monotonic()
                gated_s, start, deadline, delay = now - start, now, now + timeout_s, 0.001
                gate.restart(now)
                continue
            if now >= deadline:
                timed_out, not_ready = True, go_write is not None
                break
            if watch is not None and go_write is None and (stopped := watch.poll(now)):
                break
            ends(min(delay, max(0.0, deadline - now)))
            delay = min(2 * delay, 0.05)
    finally:
        ends(None)
        if go_write is not None:                  # never opened: the program reads end of file
            os.close(go_write)
    kill_started(child.pid, mark)
    if ended is None:
        ended = _reap(child, block=True)
    usage = ended[1]
    seconds = time.monotonic() - start
    for reader, pipe in zip(readers, (child.stdout, child.stderr, channel_pipe)):
        reader.join(_PIPE_GRACE_S)
        if not reader.is_alive():  # else an escaped process still holds the pipe
            pipe.close()
    killed = timed_out or stopped is not None
    done = Completed(argv, None if killed else child.returncode,
                     stdout=readers[0].text(), stderr=readers[1].text(),
                     timed_out=timed_out, seconds=seconds, timeout_s=timeout_s, stopped=stopped, gated_s=gated_s)
    if not_ready:
        done.error = (f"{Path(argv[0]).name} was not ready for its go within {gate.ready_timeout_s:g} s "
                      "(its CUDA start; the grader's machinery, not the program)")
    if usage is not None:
        done.cpu_s, done.peak_rss_kib = usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss)
        for meter in getattr(_meters, "stack", ()):
            meter.add(done.cpu_s, done.peak_rss_kib)
    if channel:
        done.channel = bytes(readers[2].head).decode("utf-8", errors="replace")
        done.channel_overflow = readers[2].overflow
    return done
