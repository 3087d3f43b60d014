"""proc.py: every program runs under a time limit and leaves no process behind."""

import errno
import json
import subprocess
import resource
import os
import signal
import sys
import time

import pytest

from conftest import write_script
from stencil_grader.base import process, sandbox
from test_checkrun import alive


def test_timeout_is_reported_and_quick(tmp_path):
    start = time.monotonic()
    run = process.run([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], 1)
    assert run.timed_out and run.returncode is None
    assert run.stdout == "started\n"
    assert "timed out after 1 s" in run.describe()
    assert time.monotonic() - start < 10


def test_background_children_are_killed_when_the_program_ends(tmp_path):
    """The child sits in a process group of its own, as Check's case processes do."""
    script = write_script(tmp_path / "spawn", f"""import subprocess
child = subprocess.Popen([{sys.executable!r}, "-c", "import time; time.sleep(600)"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=0)
open({str(tmp_path / 'pid')!r}, "w").write(str(child.pid))
""")
    run = process.run([script], 30)
    assert run.returncode == 0, run.stderr
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_processes_in_other_sessions_are_found_by_their_mark(tmp_path):
    """As when instructor mode kills a grading process whose check runs in a session of its own."""
    script = write_script(tmp_path / "nested", f"""import subprocess, time
child = subprocess.Popen([{sys.executable!r}, "-c", "import time; time.sleep(600)"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
open({str(tmp_path / 'pid')!r}, "w").write(str(child.pid))
time.sleep(600)
""")
    run = process.run([script], 1.5)
    assert run.timed_out
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_output_is_bounded_head_and_tail_kept():
    code = ("import sys\nsys.stdout.write('seed: 1\\n')\n"
            "for i in range(200000): sys.stdout.write('x' * 20 + '\\n')\nsys.stdout.write('the end\\n')\n")
    run = process.run([sys.executable, "-c", code], 60)
    assert run.returncode == 0
    assert run.stdout.startswith("seed: 1\n") and run.stdout.endswith("the end\n")
    assert "bytes of output left out" in run.stdout
    assert len(run.stdout) < process.HEAD_BYTES + process.TAIL_BYTES + 200


def test_missing_program_and_signals(tmp_path):
    run = process.run([tmp_path / "nope"], 5)
    assert run.error and "could not start" in run.describe() and run.returncode is None
    run = process.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"], 5)
    assert run.returncode == -6 and run.describe() == "was killed by signal 6 (SIGABRT)"


def test_tail_lines():
    assert process.tail_lines("a\nb\nc\n", 2) == "b\nc"
    assert process.tail_lines("", 3) == ""


# ---------------------------------------------------------------- watching and stopping a run

class StopAtWord:
    def __init__(self, word):
        self.word, self.seen = word.encode(), b""

    def feed(self, chunk):
        self.seen += chunk

    def poll(self, now):
        return f"saw {self.word.decode()}" if self.word in self.seen else None


def test_a_watcher_stops_the_run_early():
    start = time.monotonic()
    run = process.run([sys.executable, "-c", "import time; print('STOP', flush=True); time.sleep(60)"], 30,
                   watch=StopAtWord("STOP"))
    assert time.monotonic() - start < 5
    assert run.stopped == "saw STOP" and run.returncode is None and not run.timed_out
    assert "was stopped (saw STOP)" in run.describe()


# A program with a gate: it says "ready" on stdout, waits for its go, then works for `after` seconds.
GATED = r"""import os, sys, time
print("ready", flush=True)
got = os.read(int(os.environ["STENCIL_GO_FD"]), 1)
print("go" if got == b"g" else "no go", flush=True)
time.sleep(float(sys.argv[1]))
sys.exit(0 if got == b"g" else 65)
"""


class Gate:
    """A process.Gate: ready once the program printed "ready"; opens after `hold` seconds (the GPU's
    grading before this one)."""

    def __init__(self, hold: float, ready_timeout_s: float = 30.0):
        self.hold, self.ready_timeout_s = hold, ready_timeout_s
        self.seen, self.opened, self.restarted = b"", None, None

    def feed(self, chunk):
        self.seen += chunk

    def poll(self, now):
        return None

    def ready(self):
        return b"ready" in self.seen

    def open(self):
        time.sleep(self.hold)
        self.opened = time.monotonic()

    def restart(self, now):
        self.restarted = now


def test_a_gated_runs_limit_starts_at_its_go():
    gate = Gate(hold=1.5)
    run = process.run([sys.executable, "-c", GATED, "0.5"], 1.0, watch=gate, gate=gate)
    assert run.returncode == 0 and not run.timed_out and run.stdout == "ready\ngo\n"
    assert run.gated_s >= 1.5 and run.seconds < 1.0 and gate.restarted == pytest.approx(gate.opened, abs=0.05)


def test_a_gated_run_still_has_its_limit_after_the_go():
    gate = Gate(hold=0.1)
    run = process.run([sys.executable, "-c", GATED, "30"], 0.5, watch=gate, gate=gate)
    assert run.timed_out and run.error is None and 0.4 < run.seconds < 5


def test_a_program_never_ready_is_the_graders_error_not_a_timeout():
    gate = Gate(hold=0.0, ready_timeout_s=0.5)
    run = process.run([sys.executable, "-c", "import time; time.sleep(30)"], 60, watch=gate, gate=gate)
    assert run.returncode is None and gate.opened is None
    assert "was not ready for its go within 0.5 s" in run.error and "not the program" in run.error


def test_a_program_that_ends_before_its_go_is_never_opened():
    gate = Gate(hold=0.0)
    run = process.run([sys.executable, "-c", "import sys; sys.exit(2)"], 30, watch=gate, gate=gate)
    assert run.returncode == 2 and gate.opened is None and run.gated_s == 0.0


def test_a_program_whose_grader_fails_before_the_go_reads_end_of_file(tmp_path):
    """The grader fails while waiting for the GPU (open() raises): the go pipe closes, and the program,
    which reads end of file, ends by itself (the harness: EXIT_NO_GO) instead of waiting forever."""
    gate = Gate(hold=0.0)

    def fails():
        raise RuntimeError("the grader failed")
    gate.open = fails
    said = tmp_path / "said"
    probe = ("import os, sys\nprint('ready', flush=True)\n"               # written whole, then named
             f"open({str(said) + '.part'!r}, 'w').write(repr(os.read(int(os.environ['STENCIL_GO_FD']), 1)))\n"
             f"os.replace({str(said) + '.part'!r}, {str(said)!r})\n")
    with pytest.raises(RuntimeError):
        process.run([sys.executable, "-c", probe], 30, watch=gate, gate=gate)
    deadline = time.monotonic() + 10
    while not said.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert said.read_text() == "b''"


def test_stdin_text():
    run = process.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], 30, stdin_text="abc")
    assert run.stdout == "ABC\n"


# ---------------------------------------------------------------- the sandbox

PROBE = r'''import json, os, resource, socket, sys
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    net = "reached"
except OSError as err:
    net = type(err).__name__
try:
    open("/etc/passwd-stencil-test", "w").close()
    etc = "written"
except OSError:
    etc = "refused"
json.dump({"uid": os.getuid(), "cwd": os.getcwd(), "env": dict(os.environ), "net": net, "etc": etc,
           "interfaces": [name for _, name in socket.if_nameindex()],
           "limits": {name: resource.getrlimit(getattr(resource, name))
                      for name in ("RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_CORE")}},
          sys.stdout)
'''


def test_sandbox_layers_and_what_the_program_sees(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "do not pass")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv(sandbox.THREADS_ENV, "3")
    program = write_script(tmp_path / "probe", PROBE)
    box = sandbox.plan_sandbox(10)
    assert list(box.layers) == list(sandbox.LAYERS) and box.threads == 3
    with sandbox.SandboxDir(box, [program]) as jail:
        run = process.run([jail.program("probe")], 30, env=jail.env({"EXTRA": "1"}), cwd=jail.work, sandbox=box)
        work, uid = jail.work, box.uid
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert not work.exists() and box.uid is None               # removed afterwards, its user id released
    assert seen["cwd"] == str(work)
    assert "SECRET_TOKEN" not in seen["env"] and seen["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert seen["env"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"          # the shorter CUDA start
    assert seen["env"]["EXTRA"] == "1" and seen["env"]["HOME"] == str(work)
    assert seen["env"]["OMP_NUM_THREADS"] == "3" and seen["env"]["OMP_WAIT_POLICY"] == "PASSIVE"
    assert seen["limits"]["RLIMIT_FSIZE"][0] == sandbox.FILE_SIZE_LIMIT and seen["limits"]["RLIMIT_CORE"] == [0, 0]
    assert 0 < seen["limits"]["RLIMIT_CPU"][0] < 10 ** 6
    if box.pool is not None:
        first, last = box.pool
        assert seen["uid"] == uid and first <= uid <= last and seen["etc"] == "refused"
        assert seen["limits"]["RLIMIT_NPROC"][0] == sandbox.PROCESS_BASE + 3 * sandbox.PROCESS_PER_THREAD
        assert box.layers["user"].startswith("on: a user id of its own")
    else:
        assert box.layers["user"].startswith("off:") and "no thread limit" in box.layers["limits"]
    if box.new_net:
        assert seen["interfaces"] == ["lo"] and seen["net"] != "reached"
    else:
        assert box.layers["network"].startswith("off:")


def test_a_refused_network_namespace_is_off_with_the_kernels_reason(monkeypatch):
    """The probe is a forked child (no interpreter started while a GPU waits): its errno is the reason."""
    def refused(flags):
        raise PermissionError(errno.EPERM, "Operation not permitted")
    monkeypatch.setattr(sandbox, "_unshare", refused)
    sandbox._network_unavailable.cache_clear()
    try:
        assert sandbox._network_unavailable() == "unshare(CLONE_NEWNET) failed: Operation not permitted"
        monkeypatch.setattr(sandbox, "_unshare", lambda flags: None)
        sandbox._network_unavailable.cache_clear()
        assert sandbox._network_unavailable() is None
    finally:
        sandbox._network_unavailable.cache_clear()


def test_a_run_learns_at_once_that_its_program_ended():
    """The wait between looks at a running program ends when the program does, not at its length."""
    child = subprocess.Popen(["sleep", "0.2"])
    wait = process._end_watch(child.pid)
    start = time.monotonic()
    wait(30.0)
    wait(None)
    assert time.monotonic() - start < 5.0 and child.wait() == 0


def test_layers_that_cannot_be_had_are_off_with_a_reason(monkeypatch):
    monkeypatch.setenv(sandbox.SANDBOX_UIDS_ENV, "")
    box = sandbox.plan_sandbox(10)
    assert box.pool is None and box.layers["user"].startswith("off:")
    assert any(line.startswith("user (") for line in box.off())
    assert "no thread limit" in box.layers["limits"]            # never a per-user limit shared by gradings
    monkeypatch.setenv(sandbox.SANDBOX_UIDS_ENV, "7-3")
    assert "is not FIRST-LAST" in sandbox.plan_sandbox(10).layers["user"]
    monkeypatch.setenv(sandbox.THREADS_ENV, "many")
    with pytest.raises(sandbox.SandboxError, match="STENCIL_THREADS='many'"):
        sandbox.plan_sandbox(10)
    monkeypatch.delenv(sandbox.THREADS_ENV)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    box = sandbox.plan_sandbox(10)
    assert box.layers["user"].startswith("off: the grader is not root")
    assert box.layers["network"] == "off: a network namespace needs root" and not box.new_net
    assert box.layers["limits"].startswith("on:")


def _root_with_pool() -> sandbox.Sandbox:
    box = sandbox.plan_sandbox(10)
    if box.pool is None:
        pytest.skip(f"needs root and the sandbox's user ids: {box.layers['user']}")
    return box


def test_gradings_at_once_get_user_ids_of_their_own_and_cannot_reach_each_other(tmp_path):
    """Two sandboxes at once: other user ids; neither can signal, trace or read the other's program."""
    victim = write_script(tmp_path / "victim", """import os, sys, time
open("secret.txt", "w").write("answers")
print(os.getpid(), flush=True)
time.sleep(30)
""")
    attacker = write_script(tmp_path / "attacker", """import ctypes, json, os, signal, sys
pid, work = int(sys.argv[1]), sys.argv[2]
tried = {}
def attempt(name, call):
    try:
        call()
        tried[name] = "done"
    except OSError as err:
        tried[name] = type(err).__name__
attempt("kill", lambda: os.kill(pid, signal.SIGTERM))
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH = 16
def trace():
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")
attempt("ptrace", trace)
attempt("read", lambda: open(os.path.join(work, "secret.txt")).read())
attempt("list", lambda: os.listdir(work))
attempt("environ", lambda: open(f"/proc/{pid}/environ", "rb").read())
attempt("mem", lambda: open(f"/proc/{pid}/mem", "rb").read(1))
print(json.dumps(tried))
""")
    first, second = _root_with_pool(), _root_with_pool()
    with sandbox.SandboxDir(first, [victim]) as jail_a, sandbox.SandboxDir(second, [attacker]) as jail_b:
        assert first.uid != second.uid
        child = subprocess.Popen([str(jail_a.program("victim"))], cwd=jail_a.work, env=jail_a.env(),
                                 stdout=subprocess.PIPE, text=True, preexec_fn=first.enter)
        try:
            pid = int(child.stdout.readline())
            run = process.run([jail_b.program("attacker"), str(pid), str(jail_a.work)], 30, env=jail_b.env(),
                              cwd=jail_b.work, sandbox=second)
            assert child.poll() is None                          # still running: not killed
        finally:
            child.kill()
            child.wait()
    tried = json.loads(run.stdout)
    assert tried == {k: "PermissionError" for k in ("kill", "ptrace", "read", "list", "environ", "mem")}, tried


def test_the_sandbox_kills_what_its_user_left_running(tmp_path):
    """A process that escaped its session is killed by user id when the sandbox ends."""
    escaper = write_script(tmp_path / "escaper", """import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True, env={},
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
""")
    box = _root_with_pool()
    with sandbox.SandboxDir(box, [escaper]) as jail:
        uid = box.uid
        run = process.run([jail.program("escaper")], 30, env=jail.env(), cwd=jail.work, sandbox=box)
        assert run.returncode == 0, run.stderr
        time.sleep(0.3)
        left = sandbox.processes_of(uid)
    assert left and not sandbox.processes_of(uid)


def test_a_user_id_whose_last_run_did_not_end_cleanly_is_not_taken_while_it_has_a_process(tmp_path, monkeypatch):
    """A killed grader leaves its id's lock file without the clean mark: the next claim reads /proc and
    passes over an id with a process left; an id released cleanly is marked so, and taken again."""
    locks = tmp_path / "locks"
    monkeypatch.setattr(sandbox, "LOCK_DIRS", (str(locks),))
    monkeypatch.setenv(sandbox.SANDBOX_UIDS_ENV, f"{sandbox.DEFAULT_FIRST_UID + 200}-{sandbox.DEFAULT_FIRST_UID + 201}")
    box = _root_with_pool()
    first = box.pool[0]
    leftover = subprocess.Popen(["sleep", "60"], user=first, group=first, extra_groups=[])
    try:
        with sandbox.SandboxDir(box, []):
            assert box.uid == first + 1                        # the first id still has a process
            assert (locks / f"uid-{first + 1}.lock").read_bytes() == b""      # in use
        assert (locks / f"uid-{first + 1}.lock").read_bytes() == b"clean"
        (locks / f"uid-{first}.lock").write_bytes(b"clean")   # a lying mark is trusted: root's folder alone
        with sandbox.SandboxDir(box, []):
            assert box.uid == first
        assert leftover.wait(5) == -signal.SIGKILL             # which the end of that run killed
    finally:
        leftover.kill()
        leftover.wait()


def test_a_sandbox_that_cannot_be_set_up_raises_sandbox_error(tmp_path, monkeypatch):
    """No lock folder or free user id: SandboxError (the grader's failure, never the student's)."""
    box = _root_with_pool()
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setattr(sandbox, "LOCK_DIRS", (str(blocker),))
    with pytest.raises(sandbox.SandboxError, match="no folder for the sandbox's user-id locks"):
        with sandbox.SandboxDir(box, []):
            pass


def test_a_program_that_cannot_start_in_its_sandbox_is_an_error_not_a_crash(tmp_path):
    """An exception between fork and exec (a layer the kernel refused) is Completed.error."""
    program = write_script(tmp_path / "p", "print('hi')")
    box = sandbox.Sandbox(limits=[(resource.RLIMIT_NOFILE, 2 ** 62, 2 ** 62)])
    run = process.run([program], 30, sandbox=box)
    assert run.returncode is None and run.error and "could not start" in run.error


def test_the_sandbox_user_cannot_touch_the_build_directory(tmp_path):
    """The program is a copy: the build directory's binaries and files stay out of reach."""
    _root_with_pool()
    build = tmp_path / "build"
    build.mkdir()
    (build / "report.json").write_text("{}")
    program = write_script(build / "evil", f"""import os
for path in ({str(build / 'report.json')!r}, os.path.join(os.path.dirname(__file__), "evil")):
    try:
        open(path, "a").write("x")
        print("wrote", path)
    except OSError:
        print("refused", path)
""")
    box = sandbox.plan_sandbox(10)
    with sandbox.SandboxDir(box, [program]) as jail:
        run = process.run([jail.program("evil")], 30, env=jail.env(), cwd=jail.work, sandbox=box)
    assert run.stdout.split().count("refused") == 2, run.stdout + run.stderr
    assert (build / "report.json").read_text() == "{}"


def test_what_a_run_used_is_measured(tmp_path):
    """A run's CPU seconds and peak resident set include its children (a grandchild's 150 MiB)."""
    import resource
    mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 + 150
    child = f"x = bytearray({mib} << 20); x[::4096] = b'1' * len(x[::4096]); sum(range(3 * 10 ** 6))"
    parent = ("import subprocess, sys; subprocess.run([sys.executable, '-c', " + repr(child) + "], check=True)")
    with process.metered() as outer:
        with process.metered() as inner:
            run = process.run([sys.executable, "-c", parent], 60)
        short = process.run([sys.executable, "-c", "pass"], 60)
    assert run.returncode == 0, run.stderr
    assert run.peak_rss_kib >= mib << 10                     # the grandchild's bytes, touched page by page
    assert run.cpu_s > 0.05 and short.peak_rss_kib < run.peak_rss_kib
    assert (inner.runs, outer.runs) == (1, 2)
    assert outer.cpu_s == pytest.approx(run.cpu_s + short.cpu_s) and outer.peak_rss_kib == run.peak_rss_kib
    killed = process.run([sys.executable, "-c", "while True: pass"], 1)
    assert killed.timed_out and killed.cpu_s > 0.3            # a program killed at its limit is measured too
