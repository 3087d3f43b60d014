"""The sandbox of the programs that run student code (check, bench); its layers (LAYERS) and what each
defends: grader/README.md, section 6.  plan_sandbox() decides the layers, SandboxDir holds the directory
and the claimed user id, process.run(sandbox=...) applies them between fork and exec.  A layer this
machine cannot give is reported off, with why; one it should give and does not raises SandboxError
(the grader's failure, never the student's).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import os
import pwd
import resource
import shutil
import signal
import stat
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .process import RUN_MARK, kill_all, read_proc

#: The user ids student code runs as when the grader is root: "FIRST-LAST"; empty: do not switch.
SANDBOX_UIDS_ENV = "STENCIL_SANDBOX_UIDS"
#: The default pool: 256 ids above the accounts of real systems, below 2**31.
DEFAULT_FIRST_UID, POOL_SIZE = 2_000_000_000, 256
#: CPU threads one grading's programs may use (an integer >= 1); unset: every CPU of the machine.
THREADS_ENV = "STENCIL_THREADS"
#: Environment variables a sandboxed program keeps: what the CUDA driver and runtime read.
CUDA_ENV_KEEP = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING",
                 "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_CACHE_DISABLE")
#: Set for every sandboxed program: one hardware work queue per context (the labs' programs use one stream),
#: with which the CUDA runtime makes and ends a context in half the time, a part the driver serialises across
#: the host (handouts/data/h200/notes.json, kit/cuda_start_one_connection).
CUDA_ENV_SET = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
FILE_SIZE_LIMIT = 256 * 1024 * 1024      # bytes one file may reach (the CUDA JIT cache included)
#: Threads (processes count as one each) a sandbox's user may have beyond PROCESS_PER_THREAD x threads:
#: Check's processes and their forked cases, each with the CUDA runtime's few threads of its own.
PROCESS_BASE, PROCESS_PER_THREAD = 1024, 16
#: Seconds a sandbox waits for a free user id before giving up (SandboxError).
CLAIM_WAIT_S = 600.0
#: A user id's lock file says this when its last run ended with no process of the id left.
_CLEAN = b"clean"
#: Where the user ids' locks live: the first of these that is (or can be made) root's alone.
LOCK_DIRS = ("/run/stencil-sandbox", os.path.join(tempfile.gettempdir(), "stencil-sandbox-root"))
CLONE_NEWNET = 0x40000000
#: The layers, in the order reports list them.
LAYERS = ("user", "directory", "environment", "network", "limits")


class SandboxError(Exception):
    """The sandbox this machine should give could not be set up (the grader's failure, not the student's)."""


_libc: list = []      # the C library, loaded in the parent: a child between fork and exec loads nothing


def _unshare(flags: int) -> None:
    if hasattr(os, "unshare"):                   # Python 3.12
        os.unshare(flags)
        return
    libc = _libc[0]
    if libc.unshare(ctypes.c_int(flags)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


@functools.cache
def _network_unavailable() -> str | None:
    """Why a network namespace cannot be made here (None when it can); asked once per process, by a
    forked child that tries it (no interpreter started: this runs while a GPU waits)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux only"
    code = _in_child(lambda: _unshare(CLONE_NEWNET))
    return None if code == 0 else f"unshare(CLONE_NEWNET) failed: {os.strerror(code)}"


def _in_child(call: Callable[[], None]) -> int:
    """0 when call() returned in a forked child, else the errno of the OSError it raised (EPERM for any
    other exception).  The child makes system calls only and leaves by os._exit(), so forking beside the
    grader's reader threads is safe (Python's warning about forking a threaded process is kept quiet)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = errno.EPERM
        try:
            call()
            code = 0
        except OSError as err:
            code = err.errno or errno.EPERM
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def kill_user(uid: int) -> None:
    """SIGKILL to every process whose real (or saved) user id is uid, by kill(2) of pid -1 from a child that
    switched to uid first: the kernel walks its own process list, atomically against forks, with no
    /proc scan (its return value says nothing of how many there were: kill(2) counts processes it may
    not signal).  SandboxError when the child could not switch to uid."""
    def as_user() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:                 # no other process on the machine
            pass
    if code := _in_child(as_user):
        raise SandboxError(f"could not kill the processes of user id {uid}: {os.strerror(code)}")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), else every CPU of the machine."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_budget() -> int:
    """The CPU threads one grading's programs may use: STENCIL_THREADS (>= 1), else every usable CPU.
    Raises SandboxError for a value that is not a positive integer."""
    text = os.environ.get(THREADS_ENV, "").strip()
    if not text:
        return usable_cpus()
    if not text.isdigit() or int(text) < 1:
        raise SandboxError(f"{THREADS_ENV}={text!r}: give the CPU threads of one grading, an integer >= 1")
    return int(text)


def thread_env(threads: int) -> dict[str, str]:
    """OpenMP's variables for `threads` threads that sleep, not spin (libgomp's default), when idle."""
    return {"OMP_NUM_THREADS": str(threads), "OMP_THREAD_LIMIT": str(threads), "OMP_DYNAMIC": "false",
            "OMP_WAIT_POLICY": "PASSIVE"}


def _mapped(first: int, last: int) -> bool:
    """True when this user namespace can switch to every id of first..last (/proc/self/uid_map)."""
    try:
        lines = Path("/proc/self/uid_map").read_text().split("\n")
    except OSError:
        return True                                       # no user namespaces: every id is there
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and int(parts[0]) <= first and last < int(parts[0]) + int(parts[2]):
            return True
    return False


def uid_pool() -> tuple[int, int] | str:
    """(first, last) of the sandbox's user ids, or why there is none: STENCIL_SANDBOX_UIDS="FIRST-LAST"
    when set (empty: none), else the default pool, else (a rootless container) the last POOL_SIZE ids below 65534."""
    text = os.environ.get(SANDBOX_UIDS_ENV)
    if text is not None:
        text = text.strip()
        if not text:
            return f"{SANDBOX_UIDS_ENV} is empty"
        first, _, last = text.partition("-")
        if not (first.isdigit() and last.isdigit() and 0 < int(first) <= int(last) < 2 ** 32 - 1):
            return f"{SANDBOX_UIDS_ENV}={text!r} is not FIRST-LAST (user ids above 0)"
        if not _mapped(int(first), int(last)):
            return f"{SANDBOX_UIDS_ENV}={text!r}: this user namespace does not map those ids (/proc/self/uid_map)"
        return int(first), int(last)
    first = DEFAULT_FIRST_UID
    if _mapped(first, first + POOL_SIZE - 1):
        return first, first + POOL_SIZE - 1
    last = 65533
    if _mapped(last - POOL_SIZE + 1, last):
        return last - POOL_SIZE + 1, last
    return f"this user namespace maps neither {first}-{first + POOL_SIZE - 1} nor ids below 65534: " \
           f"set {SANDBOX_UIDS_ENV}"


def processes_of(uid: int) -> list[int]:
    """Process ids (from /proc) whose real or effective user id is uid, zombies left out.  Reads each
    status file as bytes (a scan of every process on the host: kept short; the kernel escapes a newline
    in the Name line, so no process can forge the lines read here)."""
    want, found = str(uid).encode(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            data = read_proc(f"/proc/{name}/status")
        except OSError:
            continue                                     # gone meanwhile
        uids = data.partition(b"\nUid:")[2].split(b"\n", 1)[0].split()[:2]     # real, effective
        state = data.partition(b"\nState:")[2].split(b"\n", 1)[0].strip()
        if want in uids and not state.startswith(b"Z"):
            found.append(int(name))
    return found


def _lock_dir() -> Path:
    """The folder of the user ids' locks: root's, mode 0700, no symbolic link; SandboxError when none is."""
    problems = []
    for name in LOCK_DIRS:
        folder = Path(name)
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            info = os.lstat(folder)
        except OSError as err:
            problems.append(f"{folder}: {err.strerror or err}")
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not info.st_mode & 0o077:
            return folder
        problems.append(f"{folder} is not a folder that root alone may write")
    raise SandboxError("no folder for the sandbox's user-id locks: " + "; ".join(problems))


@dataclass
class Sandbox:
    """How one run of student code is confined: pool, the user ids SandboxDir claims one from (None:
    the grader's own user); uid, gid once claimed; limits: (resource, soft, hard) for setrlimit;
    layers: LAYERS -> "on: how" or "off: why", for the report."""

    pool: tuple[int, int] | None = None
    uid: int | None = None
    gid: int | None = None
    new_net: bool = False
    threads: int = 1
    limits: list[tuple[int, int, int]] = field(default_factory=list)
    layers: dict[str, str] = field(default_factory=dict)

    def enter(self) -> None:
        """Apply the layers; runs in the child between fork and exec (an exception aborts the start)."""
        if self.pool is not None and self.uid is None:
            raise SandboxError("the sandbox's user id was not claimed (run inside its SandboxDir)")
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
    """The sandbox this machine can give a program allowed timeout_s seconds of wall time.
    Raises SandboxError for a STENCIL_THREADS that is no thread count."""
    box = Sandbox(threads=thread_budget())
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    pool = uid_pool() if root else "the grader is not root, so student code runs as the grader's own user"
    if isinstance(pool, str):
        box.layers["user"] = f"off: {pool}"
    else:
        box.pool = pool
        box.layers["user"] = f"on: a user id of its own, claimed from {pool[0]}-{pool[1]} for this run alone"
    box.layers["directory"] = "on: a temporary directory of its own, removed afterwards"
    box.layers["environment"] = ("on: only PATH, HOME, TMPDIR, LANG, the CUDA driver's variables "
                                 f"({', '.join(CUDA_ENV_KEEP[:3])}, ...; CUDA_DEVICE_MAX_CONNECTIONS=1) "
                                 f"and OpenMP's, {box.threads} thread(s)")
    if root and not hasattr(os, "unshare") and not _libc:
        _libc.append(ctypes.CDLL(None, use_errno=True))
    if not root:
        box.layers["network"] = "off: a network namespace needs root"
    elif why := _network_unavailable():
        box.layers["network"] = f"off: {why}"
    else:
        box.new_net = True
        box.layers["network"] = "on: a network namespace of its own, without interfaces"
    cpu_s = int(timeout_s * box.threads) + 60
    box.limits = [(resource.RLIMIT_CPU, cpu_s, cpu_s + 5),
                  (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT, FILE_SIZE_LIMIT),
                  (resource.RLIMIT_CORE, 0, 0)]
    limits = f"on: CPU time {cpu_s} s per process, files {FILE_SIZE_LIMIT >> 20} MiB, no core dumps"
    if box.pool is not None:
        nproc = PROCESS_BASE + PROCESS_PER_THREAD * box.threads
        box.limits.append((resource.RLIMIT_NPROC, nproc, nproc))
        limits += f", {nproc} threads for its user id (this run's alone)"
    else:
        limits += (", no thread limit (RLIMIT_NPROC counts per user: without a user of its own it would "
                   "count every grading beside this one)")
    box.layers["limits"] = limits
    return box


class SandboxDir:
    """A context manager: claims a user id of the box's pool (SandboxError after CLAIM_WAIT_S), makes a
    temporary directory with read-only copies of the programs and `work/` (their current and home
    directory, the sandbox user's); on exit kills every process of the id, releases it, removes all."""

    def __init__(self, box: Sandbox, programs: list[Path], prefix: str = "stencil-run-"):
        self.box, self.programs, self.prefix = box, [Path(p) for p in programs], prefix
        self.root: Path | None = None
        self._lock: int | None = None

    def _claim(self) -> None:
        first, last = self.box.pool
        folder = _lock_dir()
        deadline = time.monotonic() + CLAIM_WAIT_S
        while True:
            for uid in range(first, last + 1):
                fd = os.open(folder / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                # Someone else's id is never ours: an account's, or one with processes, which only an id
                # whose last run did not end cleanly (a killed grader's) can have: /proc is read then.
                clean = os.pread(fd, len(_CLEAN) + 1, 0) == _CLEAN
                if (not clean and processes_of(uid)) or _has_account(uid):
                    os.close(fd)
                    continue
                os.ftruncate(fd, 0)                          # in use until __exit__ says clean
                self._lock, self.box.uid, self.box.gid = fd, uid, uid
                return
            if time.monotonic() > deadline:
                raise SandboxError(f"no free sandbox user id in {first}-{last} after {CLAIM_WAIT_S:g} s "
                                   f"(each grading running at once holds one; widen {SANDBOX_UIDS_ENV})")
            time.sleep(0.05)

    def __enter__(self) -> "SandboxDir":
        if self.box.pool is not None:
            self._claim()
        try:
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
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            uid = self.box.uid
            try:
                kill_user(uid)                               # every process of the id, at once
            except SandboxError:
                pass
            if kill_all(lambda: processes_of(uid), rounds=10, pause_s=0.02):       # until /proc shows none
                os.pwrite(self._lock, _CLEAN, 0)             # the next run of this id need not look
            os.close(self._lock)                      # releases the id
            self._lock = None
            self.box.uid = self.box.gid = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def work(self) -> Path:
        return self.root / "work"

    def program(self, name: str) -> Path:
        """The copy of a program, by file name."""
        return self.root / name

    def env(self, extra: dict[str, str] | None = None, threads: int | None = None) -> dict[str, str]:
        """The program's whole environment: a minimal one, CUDA's variables (CUDA_ENV_KEEP, CUDA_ENV_SET), the
        run marks above it (RUN_MARK: a killed grading takes its programs along), OpenMP's for `threads`, and
        extra."""
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.work), "TMPDIR": str(self.work), "LANG": "C"}
        env.update({k: os.environ[k] for k in CUDA_ENV_KEEP + (RUN_MARK,) if k in os.environ})
        env.update(CUDA_ENV_SET)
        env.update(thread_env(threads or self.box.threads))
        env.update(extra or {})
        return env


def _has_account(uid: int) -> bool:
    """True when an account of this machine has uid (its files and processes are someone's)."""
    try:
        return bool(pwd.getpwuid(uid))
    except KeyError:
        return False
