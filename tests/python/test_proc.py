"""proc.py: every program runs under a time limit and leaves no process behind."""

import json
import os
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
    program = write_script(tmp_path / "probe", PROBE)
    box = sandbox.plan_sandbox(10)
    assert list(box.layers) == list(sandbox.LAYERS)
    with sandbox.SandboxDir(box, [program]) as jail:
        run = process.run([jail.program("probe")], 30, env=jail.env({"EXTRA": "1"}), cwd=jail.work, sandbox=box)
        work = jail.work
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert not work.exists()                                   # removed afterwards
    assert seen["cwd"] == str(work)
    assert "SECRET_TOKEN" not in seen["env"] and seen["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert seen["env"]["EXTRA"] == "1" and seen["env"]["HOME"] == str(work)
    assert seen["limits"]["RLIMIT_FSIZE"][0] == sandbox.FILE_SIZE_LIMIT and seen["limits"]["RLIMIT_CORE"] == [0, 0]
    assert 0 < seen["limits"]["RLIMIT_CPU"][0] < 10 ** 6 and seen["limits"]["RLIMIT_NPROC"][0] > 0
    if os.geteuid() == 0 and box.uid is not None:
        assert seen["uid"] == box.uid != 0 and seen["etc"] == "refused"
        assert box.layers["user"].startswith("on: runs as")
    else:
        assert box.layers["user"].startswith("off:")
    if box.new_net:
        assert seen["interfaces"] == ["lo"] and seen["net"] != "reached"
    else:
        assert box.layers["network"].startswith("off:")


def test_layers_that_cannot_be_had_are_off_with_a_reason(monkeypatch):
    monkeypatch.setenv(sandbox.SANDBOX_USER_ENV, "")
    box = sandbox.plan_sandbox(10)
    assert box.uid is None and box.layers["user"].startswith("off:")
    assert any(line.startswith("user (") for line in box.off())
    monkeypatch.setenv(sandbox.SANDBOX_USER_ENV, "no-such-user-stencil")
    box = sandbox.plan_sandbox(10)
    if os.geteuid() == 0:
        assert "no user 'no-such-user-stencil'" in box.layers["user"]
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    box = sandbox.plan_sandbox(10)
    assert box.layers["user"].startswith("off: the grader is not root")
    assert box.layers["network"] == "off: a network namespace needs root" and not box.new_net
    assert box.layers["limits"].startswith("on:")


def test_the_sandbox_user_cannot_touch_the_build_directory(tmp_path):
    """The program is a copy: the build directory's binaries and files stay out of reach."""
    if os.geteuid() != 0 or sandbox.plan_sandbox(10).uid is None:
        pytest.skip("needs root and a sandbox user")
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
    """Issue 24: the kit measures what each stage's programs use (wait4's resource usage of the
    program and the children it waited for): CPU seconds and the largest resident set.  Linux keeps a
    process's peak across fork and exec, so a child's ru_maxrss is at least this (pytest) process's
    resident set when it forked: the grandchild allocates 150 MiB more than that."""
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
