"""proc.py: every program runs under a time limit and leaves no process behind."""

import sys
import time

from conftest import write_script
from stencil_grader import proc
from test_checkrun import alive


def test_timeout_is_reported_and_quick(tmp_path):
    start = time.monotonic()
    run = proc.run([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], 1)
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
    run = proc.run([script], 30)
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
    run = proc.run([script], 1.5)
    assert run.timed_out
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_output_is_bounded_head_and_tail_kept():
    code = ("import sys\nsys.stdout.write('seed: 1\\n')\n"
            "for i in range(200000): sys.stdout.write('x' * 20 + '\\n')\nsys.stdout.write('the end\\n')\n")
    run = proc.run([sys.executable, "-c", code], 60)
    assert run.returncode == 0
    assert run.stdout.startswith("seed: 1\n") and run.stdout.endswith("the end\n")
    assert "bytes of output left out" in run.stdout
    assert len(run.stdout) < proc.HEAD_BYTES + proc.TAIL_BYTES + 200


def test_missing_program_and_signals(tmp_path):
    run = proc.run([tmp_path / "nope"], 5)
    assert run.error and "could not start" in run.describe() and run.returncode is None
    run = proc.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"], 5)
    assert run.returncode == -6 and run.describe() == "was killed by signal 6 (SIGABRT)"


def test_tail_lines():
    assert proc.tail_lines("a\nb\nc\n", 2) == "b\nc"
    assert proc.tail_lines("", 3) == ""
