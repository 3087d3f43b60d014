"""checkrun.py: Check's XML log, case outcomes, and runs that time out or die."""

import json
import shutil
import subprocess
import time

import pytest

from conftest import DATA, write_script
from stencil_grader import checkrun


def alive(pid: int) -> bool:
    """True while pid runs (a zombie counts as gone)."""
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_real_xml_log_outcomes():
    tests = checkrun.parse_check_xml((DATA / "check_log.xml").read_text())
    got = [(t.tcase, t.iteration, t.test_id, checkrun.classify(t.result, t.message)) for t in tests]
    assert got == [("basic", 0, "t_pass", "pass"), ("basic", 0, "t_fail", "fail"),
                   ("crashes", 0, "t_segv", "crash"), ("crashes", 0, "t_hang", "timeout"),
                   ("crashes", 0, "t_exit", "crash"), ("crashes", 0, "t_cuda", "crash"),
                   ("edges", 0, "t_edges", "pass"), ("edges", 1, "t_edges", "fail"),
                   ("edges", 2, "t_edges", "pass"), ("edges", 3, "t_edges", "pass")]
    messages = {t.test_id + str(t.iteration): t.message for t in tests}
    assert messages["t_segv0"] == "Received signal 11 (Segmentation fault)"
    assert messages["t_hang0"] == "Test timeout expired"
    assert messages["t_exit0"] == "Early exit with return value 3"
    assert messages["t_cuda0"].startswith("CUDA error: an illegal memory access")
    assert messages["t_edges1"] == "nx=2 ny=9: 1 mismatch; first at (x=0, y=4): got nan want <0.5>"
    assert tests[0].duration_s == pytest.approx(0.000014)
    assert tests[1].duration_s is None                        # Check writes -1 when it did not finish


@pytest.mark.parametrize("result, message, outcome", [
    ("success", "Passed", "pass"),
    ("failure", "nx=33 ny=9: 3 mismatches; first at (x=1, y=2)", "fail"),
    ("failure", "CUDA error: unspecified launch failure", "crash"),
    ("error", "Test timeout expired", "timeout"),
    ("error", "Received signal 6 (Aborted)", "crash"),
    ("error", "Early exit with return value 1", "crash"),
    ("error", "something Check has not said before", "crash"),
])
def test_classify(result, message, outcome):
    assert checkrun.classify(result, message) == outcome


def test_truncated_log_keeps_complete_tests():
    text = (DATA / "check_log.xml").read_text()
    cut = text.index("<id>t_hang</id>")                      # killed while writing the 4th test
    tests = checkrun.parse_check_xml(text[:cut])
    assert [t.test_id for t in tests] == ["t_pass", "t_fail", "t_segv"]
    assert checkrun.parse_check_xml("") == []
    assert checkrun.parse_check_xml("<?xml version='1.0'?>\n<testsuites xmlns=") == []


def test_list_and_seed_parsing():
    listed = checkrun.parse_list("basic\t0\tnx=1 ny=1\nnoise\nedges\t3\tnx=33 ny=9\n\n")
    assert [(c.tcase, c.iteration, c.label) for c in listed] == [("basic", 0, "nx=1 ny=1"),
                                                                  ("edges", 3, "nx=33 ny=9")]
    assert checkrun.parse_seed("Running suite\nseed: 123456\nseed: 9\n") == 123456
    assert checkrun.parse_seed("no seed here") is None


def test_merge_fills_unreported_cases_and_keeps_extra_results():
    listed = checkrun.parse_list("a\t0\tfirst\na\t0\tsecond\nb\t0\tthird\n")
    tests = [checkrun.XmlTest("a", 0, "success", "Passed", 0.1),
             checkrun.XmlTest("a", 0, "failure", "second: wrong", 0.1),
             checkrun.XmlTest("z", 5, "success", "Passed", 0.1)]
    cases = checkrun.merge(listed, tests, "timeout", "no result: killed")
    assert [(c.label, c.outcome, c.message) for c in cases] == [
        ("first", "pass", "Passed"), ("second", "fail", "second: wrong"),
        ("third", "timeout", "no result: killed"), ("z #5", "pass", "Passed")]


# ---------------------------------------------------------------- fake check programs

LIST = "basic\\t0\\tnx=1 ny=1\\nbasic\\t1\\tnx=2 ny=2\\nedges\\t0\\tnx=3 ny=3"
HEADER = ('<?xml version=\\"1.0\\"?>\\n<testsuites xmlns=\\"http://check.sourceforge.net/ns\\">\\n'
          '<suite><title>s</title>\\n')
PASS0 = ('<test result=\\"success\\"><id>t</id><iteration>0</iteration><duration>0.1</duration>'
         '<description>basic</description><message>Passed</message></test>\\n')


def fake_check(build_dir, body):
    """A fake BUILD_DIR/check: --list prints three cases; a run executes body."""
    write_script(build_dir / "check", f"""import os, sys, time, signal, json
if sys.argv[1:] == ["--list"]:
    print("{LIST}")
    sys.exit(0)
{body}
""")


def test_all_cases_pass(tmp_path):
    fake_check(tmp_path, f"""print("seed: 31", flush=True)
log = open(os.environ["CK_XML_LOG_FILE_NAME"], "w")
log.write("{HEADER}")
for tcase, it in (("basic", 0), ("basic", 1), ("edges", 0)):
    log.write("{PASS0}".replace("<iteration>0", f"<iteration>{{it}}").replace(">basic<", f">{{tcase}}<"))
log.write("</suite></testsuites>\\n")
""")
    run = checkrun.run_check(tmp_path, 30)
    assert (run.status, run.exit_status, run.seed, run.passed, run.total) == ("ok", 0, 31, 3, 3)
    assert [c.label for c in run.cases] == ["nx=1 ny=1", "nx=2 ny=2", "nx=3 ny=3"]
    assert (tmp_path / "check.xml").is_file() and run.xml_log == tmp_path / "check.xml"


def test_suite_timeout_is_timeout_never_pass_and_kills_every_process(tmp_path):
    """The check parent hangs after one case; its forked case child (own process group, as
    Check makes them) hangs too.  Both must be gone when run_check returns."""
    fake_check(tmp_path, f"""print("seed: 5", flush=True)
log = open(os.environ["CK_XML_LOG_FILE_NAME"], "w")
log.write("{HEADER}{PASS0}")
log.flush()
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    time.sleep(3600)
    os._exit(0)
open(os.path.join(os.path.dirname(__file__), "child.pid"), "w").write(str(pid))
time.sleep(3600)
""")
    start = time.monotonic()
    run = checkrun.run_check(tmp_path, 1.5)
    assert time.monotonic() - start < 15
    assert run.status == "timeout" and run.seed == 5
    assert [c.outcome for c in run.cases] == ["pass", "timeout", "timeout"]
    assert "passed its limit of 1.5 s" in run.cases[1].message
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the hung case process was left running"


def test_death_by_signal_without_xml_is_crash(tmp_path):
    fake_check(tmp_path, """print("seed: 8", flush=True)
print("Running suite(s): fake", file=sys.stderr)
os.kill(os.getpid(), signal.SIGSEGV)
""")
    run = checkrun.run_check(tmp_path, 30)
    assert run.status == "crash"
    assert [c.outcome for c in run.cases] == ["crash"] * 3
    assert "killed by signal 11 (SIGSEGV)" in run.cases[0].message
    assert "no XML log was written" in run.message
    assert "Running suite(s): fake" in run.stderr_tail


def test_clean_exit_without_results_is_crash_not_pass(tmp_path):
    fake_check(tmp_path, 'print("seed: 8")\nsys.exit(0)\n')
    run = checkrun.run_check(tmp_path, 30)
    assert run.status == "crash" and run.passed == 0
    assert all(c.outcome == "crash" for c in run.cases)


def test_missing_program(tmp_path):
    run = checkrun.run_check(tmp_path, 30)
    assert run.status == "error" and run.total == 0
    assert "could not start" in run.list_error


def test_environment_forces_fork_mode_and_passes_the_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("CK_FORK", "no")
    monkeypatch.setenv("CK_RUN_CASE", "edges")
    monkeypatch.setenv("SEED", "1")
    fake_check(tmp_path, """json.dump({k: v for k, v in os.environ.items() if k.startswith("CK_") or k == "SEED"},
          open(os.path.join(os.path.dirname(__file__), "env.json"), "w"))
""")
    checkrun.run_check(tmp_path, 30, seed=77)
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["CK_FORK"] == "yes" and env["SEED"] == "77" and "CK_RUN_CASE" not in env
    assert env["CK_XML_LOG_FILE_NAME"].endswith("check.xml")
    checkrun.run_check(tmp_path, 30)
    assert "SEED" not in json.loads((tmp_path / "env.json").read_text())


# ---------------------------------------------------------------- the real Check library

def _have_check() -> bool:
    if not shutil.which("gcc") or not shutil.which("pkg-config"):
        return False
    return subprocess.run(["pkg-config", "--exists", "check"], timeout=10).returncode == 0


@pytest.mark.skipif(not _have_check(), reason="gcc or the Check library (pkg-config check) not installed")
def test_real_check_suite_end_to_end(tmp_path):
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "check"], capture_output=True, text=True,
                           timeout=10).stdout.split()
    built = subprocess.run(["gcc", str(DATA / "check_suite.c"), "-o", str(tmp_path / "check"), *flags],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    run = checkrun.run_check(tmp_path, 60)
    assert (run.status, run.exit_status, run.seed) == ("ok", 1, 4242)
    assert [(c.label, c.outcome) for c in run.cases] == [
        ("pass", "pass"), ("fail", "fail"), ("segv", "crash"), ("hang", "timeout"), ("exit", "crash"),
        ("cuda", "crash"), ("nx=1 ny=9", "pass"), ("nx=2 ny=9", "fail"), ("nx=33 ny=9", "pass"),
        ("nx=64 ny=9", "pass")]
    assert list(run.by_tcase()) == ["basic", "crashes", "edges"]
    assert (tmp_path / "check.xml").is_file() and (tmp_path / "check.tap").is_file()
