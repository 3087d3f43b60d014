"""The sandbox that programs running student code (check, bench) get.

When the grader is root, such a program runs as an unprivileged user
(STENCIL_SANDBOX_USER, default `nobody`), in a network namespace of its own
(no network); always in a temporary directory of its own holding a copy of
the program, with an environment holding only what CUDA needs, and limits on
CPU time, file size, processes and core dumps.  A layer that this machine
cannot give is reported as off, with why, and the run goes on without it.

`plan_sandbox()` decides the layers, `SandboxDir` is the directory, and
process.run(sandbox=...) applies the layers between fork and exec.
grader/README.md, section Threat model, says what this defends and what not.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .process import RUN_MARK

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
