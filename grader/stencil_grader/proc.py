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
seconds (and, in a sandbox, its CPU-time limit ends it).

A run may also be watched (`watch=`): its stdout is fed to the watcher as it
arrives, and the watcher can stop the run early (checkrun.py stops a Check run
at the first case that times out).

Programs that run student code (check, bench) run in a sandbox (`Sandbox`,
`plan_sandbox()`): when the grader is root, as an unprivileged user
(STENCIL_SANDBOX_USER, default `nobody`), in a network namespace of their own
(no network), and always in a temporary directory of their own holding a copy
of the program, with an environment holding only what CUDA needs, and limits
on CPU time, file size, processes and core dumps.  A layer that this machine
cannot give is reported as off, with why, and the run goes on without it.
grader/README.md, section Threat model, says what this defends and what not.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

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
    stopped: str | None = None

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


def tail_lines(text: str, n: int) -> str:
    """The last n lines of text (all of it when shorter)."""
    lines = text.rstrip("\n").splitlines()
    return "\n".join(lines[-n:])


class Watch(Protocol):
    """What `run(watch=...)` calls while a program runs.

    feed(chunk): the program's stdout, as it arrives (from a reader thread);
    poll(now): about ten times a second (time.monotonic()); a string stops
    the run at once (every process killed), and becomes Completed.stopped.
    """

    def feed(self, chunk: bytes) -> None: ...

    def poll(self, now: float) -> str | None: ...


class _Capture(threading.Thread):
    """Reads one pipe to its end, keeping its head and its tail (and feeding a watcher)."""

    def __init__(self, pipe, watch: Watch | None = None):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.watch = watch
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
        cwd: str | Path | None = None, stdin_text: str | None = None,
        sandbox: "Sandbox | None" = None, watch: Watch | None = None) -> Completed:
    """Run argv at most timeout_s seconds; stdin closed, or fed stdin_text.

    sandbox: confine the program (see Sandbox; its layers are applied between
        fork and exec).  watch: see Watch.
    Never raises for the program's behaviour: a missing program gives
    Completed.error, a timeout gives Completed.timed_out, a stop by the watcher
    Completed.stopped.
    """
    argv = [str(a) for a in argv]
    mark = secrets.token_hex(8)
    env = dict(os.environ if env is None else env)
    env[RUN_MARK] = f"{env[RUN_MARK]}:{mark}" if env.get(RUN_MARK) else mark
    start = time.monotonic()
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
                                 start_new_session=True,
                                 preexec_fn=sandbox.enter if sandbox is not None else None)
    except (OSError, subprocess.SubprocessError) as err:
        why = getattr(err, "strerror", None) or err
        return Completed(argv, None, timeout_s=timeout_s, error=f"could not start {argv[0]}: {why}")
    readers = [_Capture(child.stdout, watch), _Capture(child.stderr)]
    for reader in readers:
        reader.start()
    if stdin_text is not None:
        try:
            child.stdin.write(stdin_text.encode())
            child.stdin.close()
        except OSError:
            pass
    timed_out, stopped = False, None
    deadline = start + timeout_s
    while True:
        now = time.monotonic()
        try:
            child.wait(timeout=max(0.0, min(0.1 if watch else deadline - now, deadline - now)))
            break
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if watch is not None and (stopped := watch.poll(now)):
            break
    kill_started(child.pid, mark)
    child.wait()
    seconds = time.monotonic() - start
    for reader, pipe in zip(readers, (child.stdout, child.stderr)):
        reader.join(_PIPE_GRACE_S)
        if not reader.is_alive():  # else an escaped process still holds the pipe
            pipe.close()
    killed = timed_out or stopped is not None
    return Completed(argv, None if killed else child.returncode,
                     stdout=readers[0].text(), stderr=readers[1].text(),
                     timed_out=timed_out, seconds=seconds, timeout_s=timeout_s, stopped=stopped)


# ---------------------------------------------------------------- the sandbox

#: The account student code runs as when the grader is root; empty: do not switch.
SANDBOX_USER_ENV = "STENCIL_SANDBOX_USER"
DEFAULT_SANDBOX_USER = "nobody"
#: Environment variables a sandboxed program keeps: what the CUDA driver and runtime read.
CUDA_ENV_KEEP = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING",
                 "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_CACHE_DISABLE")
FILE_SIZE_LIMIT = 256 * 1024 * 1024      # bytes one file may reach (the CUDA JIT cache included)
CLONE_NEWNET = 0x40000000
#: The layers, in the order reports list them.
LAYERS = ("user", "directory", "environment", "network", "limits")


_libc: list = []      # the C library, loaded in the parent: a child between fork and exec loads nothing


def _unshare(flags: int) -> None:
    if hasattr(os, "unshare"):                   # Python 3.12
        os.unshare(flags)
        return
    libc = _libc[0]
    if libc.unshare(ctypes.c_int(flags)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


_NET_PROBE = """import ctypes, os, sys
try:
    if hasattr(os, "unshare"):
        os.unshare(0x40000000)
    else:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(ctypes.c_int(0x40000000)) != 0:
            e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
except OSError as err:
    print(err.strerror or err); sys.exit(1)
"""
_net_probe_cache: list[str | None] = []


def _network_unavailable() -> str | None:
    """Why a network namespace cannot be made here (None when it can); asked once per process."""
    if not _net_probe_cache:
        why = None
        if not sys.platform.startswith("linux"):
            why = "network namespaces are Linux only"
        else:
            try:
                probe = subprocess.run([sys.executable, "-c", _NET_PROBE], capture_output=True, text=True,
                                       timeout=30)
                if probe.returncode != 0:
                    why = f"unshare(CLONE_NEWNET) failed: {probe.stdout.strip() or probe.stderr.strip()}"
            except (OSError, subprocess.SubprocessError) as err:
                why = f"unshare probe failed: {err}"
        _net_probe_cache.append(why)
    return _net_probe_cache[0]


def _threads_of(uid: int) -> int:
    """Threads that processes of uid have now (RLIMIT_NPROC counts them); 0 without /proc."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


@dataclass
class Sandbox:
    """How one run of student code is confined.

    uid, gid: the account it runs as (None: the grader's own); new_net: a
    network namespace of its own (no interface but a down loopback);
    limits: (resource, soft, hard) for setrlimit; layers: LAYERS -> "on: how"
    or "off: why", for the report.
    """

    uid: int | None = None
    gid: int | None = None
    new_net: bool = False
    limits: list[tuple[int, int, int]] = field(default_factory=list)
    layers: dict[str, str] = field(default_factory=dict)

    def enter(self) -> None:
        """Apply the layers; runs in the child between fork and exec (an exception aborts the start)."""
        if self.new_net:
            _unshare(CLONE_NEWNET)
        for which, soft, hard in self.limits:
            resource.setrlimit(which, (soft, hard))
        if self.uid is not None:
            os.setgroups([])
            os.setgid(self.gid)
            os.setuid(self.uid)

    def off(self) -> list[str]:
        """'layer (why)' for each layer that is off."""
        return [f"{k} ({v.removeprefix('off: ')})" for k, v in self.layers.items() if v.startswith("off")]


def plan_sandbox(timeout_s: float) -> Sandbox:
    """The sandbox this machine can give a program allowed timeout_s seconds of wall time."""
    box = Sandbox()
    user = os.environ.get(SANDBOX_USER_ENV, DEFAULT_SANDBOX_USER).strip()
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        box.layers["user"] = "off: the grader is not root, so student code runs as the grader's own user"
    elif not user:
        box.layers["user"] = f"off: {SANDBOX_USER_ENV} is empty"
    else:
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            box.layers["user"] = f"off: no user {user!r} on this machine (set {SANDBOX_USER_ENV})"
        else:
            if entry.pw_uid == 0:
                box.layers["user"] = f"off: {user!r} is root"
            else:
                box.uid, box.gid = entry.pw_uid, entry.pw_gid
                box.layers["user"] = f"on: runs as {user} (uid {entry.pw_uid})"
    box.layers["directory"] = "on: a temporary directory of its own, removed afterwards"
    box.layers["environment"] = ("on: only PATH, HOME, TMPDIR, LANG and the CUDA driver's variables "
                                 f"({', '.join(CUDA_ENV_KEEP[:3])}, ...)")
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        box.layers["network"] = "off: a network namespace needs root"
    elif why := _network_unavailable():
        box.layers["network"] = f"off: {why}"
    else:
        box.new_net = True
        if not hasattr(os, "unshare") and not _libc:
            _libc.append(ctypes.CDLL(None, use_errno=True))
        box.layers["network"] = "on: a network namespace of its own, without interfaces"
    cpus = os.cpu_count() or 1
    cpu_s = int(timeout_s * cpus) + 60
    owner = box.uid if box.uid is not None else os.getuid()
    nproc = _threads_of(owner) + max(256, 8 * cpus)
    box.limits = [(resource.RLIMIT_CPU, cpu_s, cpu_s + 5),
                  (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT, FILE_SIZE_LIMIT),
                  (resource.RLIMIT_CORE, 0, 0),
                  (resource.RLIMIT_NPROC, nproc, nproc)]
    box.layers["limits"] = (f"on: CPU time {cpu_s} s per process, files {FILE_SIZE_LIMIT >> 20} MiB, "
                            f"{nproc} threads for its user, no core dumps")
    return box


class SandboxDir:
    """A temporary directory for one run of student code (a context manager).

    Holds read-only copies of the programs (so the build directory, which may
    sit in a folder the sandbox user cannot enter, stays out of reach) and
    `work/`, the program's current and home directory, owned by the sandbox
    user.  Everything is removed on exit.
    """

    def __init__(self, box: Sandbox, programs: list[Path], prefix: str = "stencil-run-"):
        self.box, self.programs, self.prefix = box, [Path(p) for p in programs], prefix
        self.root: Path | None = None

    def __enter__(self) -> "SandboxDir":
        self.root = Path(tempfile.mkdtemp(prefix=self.prefix))
        self.root.chmod(0o711)
        for program in self.programs:
            if program.is_file():
                target = self.root / program.name
                shutil.copyfile(program, target)
                target.chmod(0o555)
        self.work.mkdir(mode=0o700)
        if self.box.uid is not None:
            os.chown(self.work, self.box.uid, self.box.gid)
        return self

    def __exit__(self, *exc) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def work(self) -> Path:
        return self.root / "work"

    def program(self, name: str) -> Path:
        """The copy of a program, by file name."""
        return self.root / name

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The program's whole environment: a minimal one, CUDA's variables, and extra.

        The run marks of the processes above this one are kept (RUN_MARK), so that a
        grading process killed by instructor mode takes its sandboxed programs along.
        """
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.work), "TMPDIR": str(self.work), "LANG": "C"}
        env.update({k: os.environ[k] for k in CUDA_ENV_KEEP + (RUN_MARK,) if k in os.environ})
        env.update(extra or {})
        return env


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
