"""A real one-node Slurm in a temporary directory, for the kit's tests and the GPU machine.

    cluster = MiniSlurm(workdir, prefix=None, gpus=["/dev/nvidia0"])
    cluster.start()                         # munged, slurmctld, slurmd; waits for the node
    subprocess.run(["sbatch", ...], env=cluster.env())
    cluster.stop()                          # cancels every job, stops the three daemons by pid

It runs Debian's packages (slurmctld, slurmd, slurm-client, munge: Slurm 22.05 in
Debian 12) either as installed (prefix None: the programs on PATH or in /usr/sbin)
or unpacked into a prefix of their own (tests/slurm/unpack-debs.sh: PREFIX/usr/sbin/
slurmctld-wlm, ...).  Everything it writes goes under `workdir`: the MUNGE key and
socket, slurm.conf (and gres.conf when GPUs are named), the controller's state, the
spool, the logs.  Both daemons listen on free loopback ports, so the machine's own
Slurm, if any, is neither seen nor disturbed.  The daemons run in the foreground as
children of this process, and stop() ends them by their pid.

Jobs run as the user who starts the cluster (root in the kit's CI), with the node's
CPUs and memory as consumable resources (select/cons_tres, CR_Core_Memory: a job's
--cpus-per-task and --mem must fit the node, RealMemory being 90% of the machine's, as an
HPC site declares them); process tracking is
proctrack/linuxproc (no cgroups needed), so a cancelled job's processes are found
through their parent process ids.  With `gpus` (device files such as /dev/nvidia0),
the node declares `Gres=gpu:N` and gres.conf names the files: a job asking for
`--gres=gpu:1` gets one, and Slurm sets CUDA_VISIBLE_DEVICES for it.

With a prefix, the daemons get the prefix's library folders on LD_LIBRARY_PATH; the
client commands (sbatch, squeue, ...) are small wrappers in workdir/bin that start
the real program through the dynamic loader with --library-path, so that the
environment sbatch passes on to jobs holds no library path of the prefix.

Standard library only; MiniSlurmError says what went wrong with the tail of the
daemon's log.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo", "sacct", "srun")
NODE = "stencil-node"
PARTITION = "debug"
#: Dynamic loaders, for starting a prefix's client programs with --library-path.
LOADERS = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1")


class MiniSlurmError(RuntimeError):
    """The cluster could not be started (or a daemon died): what, and the log's last lines."""


def free_port() -> int:
    """A TCP port free on the loopback interface now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory_mib() -> int:
    """90% of this machine's memory in MiB (/proc/meminfo), what the node declares (RealMemory)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(int(line.split()[1]) * 0.9 / 1024)
    except (OSError, ValueError, IndexError):
        pass
    return 1024


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} not written)"


def find_programs(prefix: Path | None) -> dict[str, Path] | str:
    """Paths of munged, slurmctld, slurmd, slurmstepd and the client commands, or why not found.

    prefix None: the installed packages (PATH, then /usr/sbin and /usr/bin); else the
    files dpkg -x put under prefix (Debian names the daemons *-wlm and links the plain
    names through update-alternatives, which dpkg -x does not run)."""
    found: dict[str, Path] = {}
    dirs = ([prefix / "usr" / "sbin", prefix / "usr" / "bin"] if prefix is not None else
            [Path(d) for d in os.environ.get("PATH", "").split(os.pathsep) if d] + [Path("/usr/sbin"),
                                                                                      Path("/usr/bin")])
    for name in ("munged", "slurmctld", "slurmd", "slurmstepd") + CLIENTS:
        for d in dirs:
            hit = next((d / n for n in (name, f"{name}-wlm") if (d / n).is_file()), None)
            if hit:
                found[name] = hit
                break
        else:
            if name not in ("sacct", "srun"):
                where = prefix if prefix is not None else "PATH, /usr/sbin or /usr/bin"
                return f"{name} not found in {where} (packages: slurmctld slurmd slurm-client munge)"
    return found


class MiniSlurm:
    """One controller and one compute node on this machine (module docstring)."""

    def __init__(self, workdir: str | Path, prefix: str | Path | None = None, gpus: list[str] | None = None,
                 cpus: int | None = None):
        self.work = Path(workdir).resolve()
        self.prefix = Path(prefix).resolve() if prefix else None
        self.gpus = list(gpus or [])
        self.cpus = cpus or os.cpu_count() or 1
        self.memory_mib = memory_mib()
        self.procs: dict[str, subprocess.Popen] = {}
        self.host = socket.gethostname().split(".")[0]
        self.conf = self.work / "etc" / "slurm.conf"
        self.bin = self.work / "bin"
        programs = find_programs(self.prefix)
        if isinstance(programs, str):
            raise MiniSlurmError(programs)
        self.programs = programs

    # ---------------------------------------------------------------- set-up
    def _lib_dirs(self) -> list[str]:
        if self.prefix is None:
            return []
        return sorted({str(p.parent) for p in self.prefix.rglob("*.so*") if p.is_file()})

    def _daemon_env(self) -> dict[str, str]:
        env = dict(os.environ, SLURM_CONF=str(self.conf))
        libs = self._lib_dirs()
        if libs:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
        return env

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for the client commands: SLURM_CONF, and workdir/bin first on PATH."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', os.defpath)}"
        return env

    def _write_clients(self) -> None:
        """workdir/bin/<client>: the installed program, or the prefix's through the loader."""
        self.bin.mkdir(parents=True, exist_ok=True)
        loader = next((l for l in LOADERS if Path(l).exists()), None)
        libs = os.pathsep.join(self._lib_dirs())
        for name in CLIENTS:
            if name not in self.programs:
                continue
            real = self.programs[name]
            if self.prefix is None:
                body = f'exec {real} "$@"\n'
            elif loader:
                body = f'exec {loader} --library-path "{libs}" {real} "$@"\n'
            else:
                body = f'LD_LIBRARY_PATH="{libs}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}" exec {real} "$@"\n'
            path = self.bin / name
            path.write_text(f"#!/bin/sh\n# {name} of the test cluster (tests/slurm/minislurm.py)\n{body}")
            path.chmod(0o755)

    def _link_daemons(self) -> None:
        """workdir/sbin/{slurmctld,slurmd,slurmstepd}: links to the programs under their plain names.

        Debian installs slurmctld-wlm (and so on) and links the plain names with
        update-alternatives, which dpkg -x does not run; but a Slurm daemon knows what it is
        from its program name (run_in_daemon()): slurmctld-wlm started as such ignores the
        nodes' Gres= lines of slurm.conf."""
        sbin = self.work / "sbin"
        sbin.mkdir(parents=True, exist_ok=True)
        for name in ("slurmctld", "slurmd", "slurmstepd"):
            link = sbin / name
            link.unlink(missing_ok=True)
            link.symlink_to(self.programs[name])
            self.programs[name] = link

    def _write_conf(self, ctld_port: int, slurmd_port: int) -> None:
        user = getpass.getuser()
        plugin_dir = ""
        if self.prefix is not None:
            dirs = sorted(p.parent for p in self.prefix.rglob("auth_munge.so"))
            if not dirs:
                raise MiniSlurmError(f"no Slurm plugins (auth_munge.so) under {self.prefix}")
            plugin_dir = f"PluginDir={dirs[0]}\n"
        gres = f" Gres=gpu:{len(self.gpus)}" if self.gpus else ""
        w = self.work
        self.conf.parent.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            "# A one-node Slurm for the stencil lab kit's tests (tests/slurm/minislurm.py)\n"
            f"ClusterName=stencil\nSlurmctldHost={self.host}(127.0.0.1)\n"
            f"SlurmctldPort={ctld_port}\nSlurmdPort={slurmd_port}\n"
            f"SlurmUser={user}\nSlurmdUser={user}\n"
            f"AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={w}/munge/munge.socket.2\n"
            f"{plugin_dir}"
            f"StateSaveLocation={w}/state\nSlurmdSpoolDir={w}/spool\n"
            f"SlurmctldPidFile={w}/run/slurmctld.pid\nSlurmdPidFile={w}/run/slurmd.pid\n"
            f"SlurmctldLogFile={w}/log/slurmctld.log\nSlurmdLogFile={w}/log/slurmd.log\n"
            "SlurmctldDebug=info\nSlurmdDebug=info\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
            "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
            "JobCompType=jobcomp/none\nMpiDefault=none\nMailProg=/bin/true\n"
            "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\n"
            "SchedulerType=sched/backfill\nSchedulerParameters=sched_interval=2\n"
            "ReturnToService=2\nMinJobAge=600\nKillWait=5\nInactiveLimit=0\n"
            + ("GresTypes=gpu\n" if self.gpus else "")
            + f"NodeName={NODE} NodeHostname={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} "
            f"RealMemory={self.memory_mib}{gres} State=UNKNOWN\n"
            f"PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP\n")
        # slurmd starts a cgroup plugin whatever the proctrack and task plugins; on a machine whose
        # cgroup v2 has no systemd (dbus) to ask for a scope, STENCIL_SLURM_CGROUP_CONF gives a
        # cgroup.conf that does without (e.g. "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes").
        cgroup_conf = self.conf.with_name("cgroup.conf")
        if os.environ.get("STENCIL_SLURM_CGROUP_CONF"):
            cgroup_conf.write_text(os.environ["STENCIL_SLURM_CGROUP_CONF"].replace("\\n", "\n") + "\n")
        else:
            cgroup_conf.unlink(missing_ok=True)
        gres_conf = self.conf.with_name("gres.conf")
        if self.gpus:
            gres_conf.write_text("".join(f"Name=gpu File={g}\n" for g in self.gpus))
        else:
            gres_conf.unlink(missing_ok=True)

    def _spawn(self, name: str, argv: list[str], log: Path) -> None:
        out = open(log.with_suffix(".stdout"), "wb")
        self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            env=self._daemon_env(), start_new_session=True)
        out.close()

    def _wait(self, what: str, ready, timeout_s: float, log: Path) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise MiniSlurmError(f"{name} exited with status {proc.returncode} while waiting for {what}; "
                                         f"{log}:\n{_tail(log)}\n{_tail(log.with_suffix('.stdout'))}")
            if ready():
                return
            time.sleep(0.3)
        raise MiniSlurmError(f"{what}: not ready after {timeout_s:g} s; {log}:\n{_tail(log)}")

    def start(self, timeout_s: float = 90.0) -> "MiniSlurm":
        """Start munged, slurmctld and slurmd and wait until the node is idle."""
        w = self.work
        for d in ("munge", "state", "spool", "run", "log", "etc"):
            (w / d).mkdir(parents=True, exist_ok=True)
        os.chmod(w / "munge", 0o700)
        key = w / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._write_clients()
        self._link_daemons()
        self._write_conf(free_port(), free_port())
        socket_path = w / "munge" / "munge.socket.2"
        self._spawn("munged", [str(self.programs["munged"]), "--foreground", "--force",
                               f"--key-file={key}", f"--socket={socket_path}",
                               f"--pid-file={w}/run/munged.pid", f"--log-file={w}/log/munged.log",
                               f"--seed-file={w}/munge/munged.seed"], w / "log" / "munged.log")
        self._wait("munged's socket", socket_path.exists, 30, w / "log" / "munged.log")
        self._spawn("slurmctld", [str(self.programs["slurmctld"]), "-D", "-f", str(self.conf)],
                    w / "log" / "slurmctld.log")
        self._spawn("slurmd", [str(self.programs["slurmd"]), "-D", "-f", str(self.conf), "-N", NODE,
                               "-d", str(self.programs["slurmstepd"])], w / "log" / "slurmd.log")
        self._wait("the node to be idle", lambda: self.node_state() in ("idle", "mixed", "allocated"), timeout_s,
                   w / "log" / "slurmctld.log")
        return self

    # ---------------------------------------------------------------- use
    def run(self, *argv: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        """Run a client command (sbatch, squeue, ...) of this cluster."""
        return subprocess.run([str(self.bin / argv[0]), *argv[1:]], capture_output=True, text=True,
                              timeout=timeout, env=self.env(), check=check)

    def node_state(self) -> str:
        done = self.run("sinfo", "-h", "-N", "-o", "%T", check=False, timeout=20)
        return done.stdout.strip().rstrip("*~#").lower() if done.returncode == 0 else ""

    def jobs(self) -> list[str]:
        """Job ids (array tasks as JOB_TASK) the controller still lists as pending or running."""
        done = self.run("squeue", "-h", "-o", "%i %T", check=False, timeout=20)
        return [line.split()[0] for line in done.stdout.splitlines()
                if line.split()[1:2] and line.split()[1] in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]

    def wait_idle(self, timeout_s: float = 300.0) -> None:
        """Wait until no job is pending or running."""
        deadline = time.monotonic() + timeout_s
        while self.jobs():
            if time.monotonic() > deadline:
                raise MiniSlurmError(f"jobs still queued after {timeout_s:g} s: {self.jobs()}\n"
                                     f"{_tail(self.work / 'log' / 'slurmctld.log')}")
            time.sleep(0.5)

    def log_tail(self) -> str:
        return "\n".join(f"== {n}.log\n{_tail(self.work / 'log' / f'{n}.log', 30)}" for n in ("slurmctld", "slurmd"))

    # ---------------------------------------------------------------- tear-down
    def stop(self) -> None:
        """Cancel every job of this cluster, then stop slurmd, slurmctld and munged by pid."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            queued = self.jobs()
            if queued:
                self.run("scancel", "--quiet", *queued, check=False, timeout=20)
                try:
                    self.wait_idle(30)
                except MiniSlurmError:
                    pass
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> "MiniSlurm":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":          # python3 tests/slurm/minislurm.py WORKDIR [PREFIX]: start, show, stop
    import sys
    with MiniSlurm(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None) as c:
        print(c.run("sinfo").stdout)
        print(c.run("sbatch", "--parsable", "--wrap", "hostname; env | grep ^SLURM_JOB_ID").stdout)
        c.wait_idle(60)
        print("ok")
    shutil.rmtree(sys.argv[1], ignore_errors=True)
