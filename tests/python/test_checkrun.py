"""checkrun.py: Check's XML log, case outcomes, and runs that time out or die."""

import json
import shutil
import subprocess
import sys
import time

import pytest

from conftest import DATA, GRADE_PY, HAVE_CHECK, HAVE_GPU, KIT_ROOT, write_script
from test_bench import GOOD as GOOD_BENCH        # a good bench JSON
from stencil_grader.grading import checkrun, checkstream, score
from stencil_grader.grading.checkstream import ListedCase, XmlTest


def alive(pid: int) -> bool:
    """True while pid runs (a zombie counts as gone)."""
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def parsed(text: str) -> list[checkstream.XmlTest]:
    """The results a CheckStream reads from text (a Check XML log, whole or cut short)."""
    stream = checkstream.CheckStream(None)
    stream.feed(text.encode())
    return stream.tests


def test_real_xml_log_outcomes():
    tests = parsed((DATA / "check_log.xml").read_text())
    got = [(t.tcase, t.iteration, t.test_id, checkstream.classify(t.result, t.message)) for t in tests]
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
    assert checkstream.classify(result, message) == outcome


def test_truncated_log_keeps_complete_tests():
    text = (DATA / "check_log.xml").read_text()
    cut = text.index("<id>t_hang</id>")                      # killed while writing the 4th test
    tests = parsed(text[:cut])
    assert [t.test_id for t in tests] == ["t_pass", "t_fail", "t_segv"]
    assert parsed("") == []
    assert parsed("<?xml version='1.0'?>\n<testsuites xmlns=") == []


def test_list_parsing():
    listed = checkstream.parse_list("basic\t0\tnx=1 ny=1\nnoise\nedges\t3\tnx=33 ny=9\n\n")
    assert [(c.tcase, c.iteration, c.label) for c in listed] == [("basic", 0, "nx=1 ny=1"),
                                                                  ("edges", 3, "nx=33 ny=9")]


def test_merge_fills_unreported_cases_and_ignores_unlisted_results():
    listed = checkstream.parse_list("a\t0\tfirst\na\t0\tsecond\nb\t0\tthird\n")
    tests = [checkstream.XmlTest("a", 0, "success", "Passed", 0.1),
             checkstream.XmlTest("a", 0, "failure", "second: wrong", 0.1),
             checkstream.XmlTest("z", 5, "success", "Passed", 0.1)]
    cases, notes = checkrun.merge(listed, tests, "timeout", "no result: killed")
    assert [(c.label, c.outcome, c.message) for c in cases] == [
        ("first", "pass", "Passed"), ("second", "fail", "second: wrong"),
        ("third", "timeout", "no result: killed")]
    assert notes == ["1 result(s) for cases `check --list` did not name were ignored"]
    cases, notes = checkrun.merge([], tests[2:], "crash", "none")            # nothing listed: kept
    assert [(c.label, c.outcome) for c in cases] == [("z #5", "pass")] and notes == []


def test_a_case_reported_twice_is_a_crash_never_a_pass():
    """A forged success printed into the stream ahead of Check's own result is caught."""
    listed = checkstream.parse_list("a\t0\tfirst\nb\t1\tsecond\n")
    tests = [checkstream.XmlTest("b", 1, "success", "Passed", 0.1),            # forged, early
             checkstream.XmlTest("a", 0, "success", "Passed", 0.1),
             checkstream.XmlTest("b", 1, "failure", "second: wrong", 0.1)]     # Check's own
    cases, _ = checkrun.merge(listed, tests, "crash", "none")
    assert [c.outcome for c in cases] == ["pass", "crash"]
    assert "reported 2 times for 1 listed" in cases[1].message


def test_first_missing_case_gets_its_own_outcome():
    listed = checkstream.parse_list("a\t0\tfirst\na\t1\tsecond\na\t2\tthird\n")
    cases, _ = checkrun.merge(listed, [checkstream.XmlTest("a", 0, "success", "Passed", 0.1)], "not_run",
                              checkrun.NOT_RUN, ("timeout", "stuck"))
    assert [(c.outcome, c.message) for c in cases] == [("pass", "Passed"), ("timeout", "stuck"),
                                                       ("not_run", "not run: an earlier case timed out")]


def test_stream_reads_seed_and_results_across_chunk_boundaries():
    started = []
    stream = checkstream.CheckStream(10, on_start=lambda seed, device: started.append((seed, device)), nofork=True)
    text = ('seed: 99\ndevice: {"name": "G"}\n' + (DATA / "check_log.xml").read_text()
            + "Running suite(s): x\n100%: Checks: 10\n")
    data = text.encode()
    for i in range(0, len(data), 7):                          # 7-byte chunks
        stream.feed(data[i:i + 7])
    assert started == [(99, {"name": "G"})] and stream.seed == 99     # once, when the GPU is found
    assert [t.test_id for t in stream.tests][:4] == ["t_pass", "t_fail", "t_segv", "t_hang"]
    assert stream.stop_kind == "case_timeout" and "crashes #0 timed out" in stream.stop_reason
    assert stream.poll(0.0) == stream.stop_reason
    assert parsed(checkstream.xml_log(stream.elements))[0].test_id == "t_pass"


def test_stream_without_a_gpu_announces_no_cases():
    started = []
    stream = checkstream.CheckStream(10, on_start=lambda *a: started.append(a), nofork=True)
    stream.feed(b"seed: 5\n")
    assert stream.seed == 5 and started == []                 # no device line: no case will run


def test_stream_stall_watchdog():
    stream = checkstream.CheckStream(2)
    assert stream.poll(time.monotonic()) is None
    assert "no result for 14 s" in stream.poll(time.monotonic() + 15)
    assert stream.stop_kind == "stall"
    assert checkstream.CheckStream(None).poll(time.monotonic() + 1e6) is None


# ---------------------------------------------------------------- fake check programs

LIST = "basic\\t0\\tnx=1 ny=1\\nbasic\\t1\\tnx=2 ny=2\\nedges\\t2\\tnx=3 ny=3"   # iterations: table indices
HEADER = ('<?xml version=\\"1.0\\"?>\\n<testsuites xmlns=\\"http://check.sourceforge.net/ns\\">\\n'
          '<suite><title>s</title>\\n')
PASS0 = ('<test result=\\"success\\"><id>t</id><iteration>0</iteration><duration>0.1</duration>'
         '<description>basic</description><message>Passed</message></test>\\n')


#: A fake check's body writing a pass for each of the three listed cases.
ALL_PASS = f"""for tcase, it in (("basic", 0), ("basic", 1), ("edges", 2)):
    log.write("{PASS0}".replace("<iteration>0", f"<iteration>{{it}}").replace(">basic<", f">{{tcase}}<"))
"""
#: A fake check's body printing its environment on stderr.
PRINT_ENV = 'print("env:", json.dumps(dict(os.environ)), file=sys.stderr)\n'


def fake_check(build_dir, body):
    """BUILD_DIR/check: --list prints three cases; a run executes body (log: the grader's channel)."""
    write_script(build_dir / "check", f"""import os, sys, time, signal, json
if sys.argv[1:] == ["--list"]:
    print("{LIST}")
    sys.exit(0)
log = os.fdopen(int(os.environ["STENCIL_CHANNEL_FD"]), "w")
{body}
""")


def envs(run) -> list:
    """The environments a PRINT_ENV check printed, phase 1 first."""
    return [json.loads(line.split("env:", 1)[1]) for line in run.stderr_tail.splitlines() if "env:" in line]


def test_all_cases_pass(tmp_path):
    fake_check(tmp_path, f"""log.write("seed: 31\\n"); log.flush()
log.write("{HEADER}")
{ALL_PASS}log.write("</suite></testsuites>\\n")
""")
    run = checkrun.run_check(tmp_path, 30)
    assert (run.status, run.exit_status, run.seed, run.passed, run.total) == ("ok", 0, 31, 3, 3)
    assert [c.label for c in run.cases] == ["nx=1 ny=1", "nx=2 ny=2", "nx=3 ny=3"]
    assert (tmp_path / "check.xml").is_file() and run.xml_log == tmp_path / "check.xml"
    assert len(parsed((tmp_path / "check.xml").read_text())) == 3
    assert run.sandbox["directory"].startswith("on")


def test_suite_timeout_is_timeout_never_pass_and_kills_every_process(tmp_path):
    """A hung check and its hung forked case child (own process group) are both gone when run_check returns."""
    fake_check(tmp_path, f"""log.write("seed: 5\\n"); log.flush()
log.write("{HEADER}{PASS0}")
log.flush()
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    time.sleep(3600)
    os._exit(0)
print("child:", pid, file=sys.stderr, flush=True)
time.sleep(3600)
""")
    start = time.monotonic()
    run = checkrun.run_check(tmp_path, 1.5)
    assert time.monotonic() - start < 15
    assert run.status == "timeout" and run.seed == 5
    assert [c.outcome for c in run.cases] == ["pass", "timeout", "not_run"]
    assert "passed its limit of 1.5 s" in run.cases[1].message
    child = int(run.stderr_tail.split("child:")[1].split()[0])
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the hung case process was left running"


def test_first_case_timeout_stops_the_run_at_once(tmp_path):
    """Check reports the second case timed out and hangs in the third: the run stops at once."""
    timeout = PASS0.replace("success", "error").replace("<iteration>0", "<iteration>1").replace(
        "Passed", "Test timeout expired")
    fake_check(tmp_path, f"""log.write("seed: 5\\n{HEADER}{PASS0}{timeout}")
log.flush()
time.sleep(3600)
""")
    start = time.monotonic()
    run = checkrun.run_check(tmp_path, 120, case_timeout_s=10)
    assert time.monotonic() - start < 10
    assert run.status == "timeout" and run.stopped_early
    assert [(c.outcome, c.message) for c in run.cases] == [
        ("pass", "Passed"), ("timeout", "Test timeout expired"), ("not_run", checkrun.NOT_RUN)]
    assert "stopped at the first case timeout" in run.message


def test_a_stuck_run_is_stopped_after_two_case_timeouts(tmp_path, monkeypatch):
    monkeypatch.setattr(checkstream, "STALL_SLACK_S", 0.5)
    fake_check(tmp_path, f"""log.write("seed: 5\\n"); log.flush()
log.write("{HEADER}{PASS0}")
log.flush()
time.sleep(3600)
""")
    start = time.monotonic()
    run = checkrun.run_check(tmp_path, 120, case_timeout_s=1)
    assert time.monotonic() - start < 10
    assert [c.outcome for c in run.cases] == ["pass", "timeout", "not_run"]
    assert "the run was stuck" in run.cases[1].message


def test_a_case_past_its_timeout_in_one_process_is_judged_there_and_not_run_again(tmp_path, monkeypatch):
    """Phase 1 times each case from the result before it (from the GPU found, for the first): a case that runs
    past the case timeout there is a timeout as it stands, the cases after it not run, and no rerun holds the
    GPU for another case timeout."""
    monkeypatch.setattr(checkstream, "NOFORK_SLACK_S", 0.5)
    fake_check(tmp_path, f"""log.write("seed: 5\\ndevice: {{\\"name\\": \\"Fake GPU\\"}}\\n{HEADER}{PASS0}")
log.flush()
time.sleep(3600)
""")
    start = time.monotonic()
    run = checkrun.run_check(tmp_path, 120, case_timeout_s=1)
    assert time.monotonic() - start < 8
    assert run.status == "timeout" and run.stopped_early and run.reruns == [] and "reruns" not in run.phases
    assert [c.outcome for c in run.cases] == ["pass", "timeout", "not_run"]
    assert "this case ran past its timeout (no result for 1.5 s" in run.cases[1].message


@pytest.mark.parametrize("body, said", [
    ('print("Running suite(s): fake", file=sys.stderr)\nos.kill(os.getpid(), signal.SIGSEGV)\n',
     "killed by signal 11 (SIGSEGV)"),
    ("sys.exit(0)\n", ""),
], ids=["signal", "clean_exit"])
def test_a_run_without_results_is_a_crash_never_a_pass(tmp_path, body, said):
    fake_check(tmp_path, 'log.write("seed: 8\\n"); log.flush()\n' + body)
    run = checkrun.run_check(tmp_path, 30)
    assert run.status == "crash" and run.passed == 0
    assert [c.outcome for c in run.cases] == ["crash"] * 3 and said in run.cases[0].message
    assert "no test result was written" in run.message
    assert "Running suite(s): fake" in run.stderr_tail or not said


def test_missing_program(tmp_path):
    run = checkrun.run_check(tmp_path, 30)
    assert run.status == "error" and run.total == 0
    assert "could not start" in run.list_error


def test_environment_is_the_sandbox_one_with_the_mode_cases_and_seed(tmp_path, monkeypatch):
    """Phase 1: one process (CK_FORK=no), the channel; reruns fork, naming their cases; no CK_* of the grader's."""
    monkeypatch.setenv("CK_FORK", "yes")
    monkeypatch.setenv("CK_RUN_CASE", "edges")
    monkeypatch.setenv("SEED", "1")
    monkeypatch.setenv("SECRET_TOKEN", "x")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("STENCIL_THREADS", "8")
    fake_check(tmp_path, PRINT_ENV)
    run = checkrun.run_check(tmp_path, 30, seed=77)
    first, *reruns = envs(run)
    assert first["CK_FORK"] == "no" and first["SEED"] == "77" and "STENCIL_CASES" not in first
    assert first["STENCIL_CHANNEL_FD"].isdigit() and "CK_XML_LOG_FILE_NAME" not in first
    assert "CK_RUN_CASE" not in first and "SECRET_TOKEN" not in first
    assert first["CUDA_VISIBLE_DEVICES"] == "0" and first["HOME"] == first["TMPDIR"]
    assert sorted(e["STENCIL_CASES"] for e in reruns) == ["0", "1", "2"]     # nothing reported: all again
    assert all(e["CK_FORK"] == "yes" and e["SEED"] == "77" for e in reruns)
    assert run.reruns == [0, 1, 2]
    assert first["OMP_NUM_THREADS"] == "8" and {e["OMP_NUM_THREADS"] for e in reruns} == {"2"}
    assert "SEED" not in envs(checkrun.run_check(tmp_path, 30))[0]


def test_the_reruns_share_the_gradings_thread_budget(tmp_path, monkeypatch):
    """Phase 2's processes times their OpenMP threads stay within the grading's STENCIL_THREADS."""
    assert checkrun.rerun_split(3, 2) == (2, 1) and checkrun.rerun_split(30, 64) == (8, 8)
    assert checkrun.rerun_split(5, 1) == (1, 1) and checkrun.rerun_split(1, 16) == (1, 16)
    monkeypatch.setenv("STENCIL_THREADS", "2")
    fake_check(tmp_path, PRINT_ENV)
    seen = envs(checkrun.run_check(tmp_path, 30))
    assert sorted(e["STENCIL_CASES"] for e in seen[1:]) == ["0,2", "1"]
    assert [e["OMP_NUM_THREADS"] for e in seen] == ["2", "1", "1"]


def test_a_correct_run_is_one_process_and_printf_is_the_students_output(tmp_path):
    """All pass in phase 1: no rerun; what the code printed on stdout is kept."""
    fake_check(tmp_path, f"""log.write("seed: 3\\ndevice: {{\\"name\\": \\"Fake GPU\\"}}\\n{HEADER}")
print("kernel says hi", flush=True)
{ALL_PASS}log.flush()
""")
    run = checkrun.run_check(tmp_path, 30)
    assert run.passed == 3 and run.reruns == [] and "reruns" not in run.phases
    assert run.device == {"name": "Fake GPU"} and run.output == "kernel says hi\n"


def test_only_the_cases_that_did_not_pass_run_again_each_judged_alone(tmp_path):
    """Pass, clean failure, then a crash in phase 1: only case 2 reruns, alone; case 1's failure stands."""
    fail1 = PASS0.replace("success", "failure").replace("<iteration>0", "<iteration>1").replace(
        "Passed", "nx=2 ny=2: wrong in phase 1")
    fake_check(tmp_path, f"""log.write("seed: 3\\n{HEADER}")
cases = os.environ.get("STENCIL_CASES")
if os.environ["CK_FORK"] == "no":
    log.write("{PASS0}{fail1}")
    log.flush()
    os.kill(os.getpid(), signal.SIGSEGV)
for it in cases.split(","):
    tcase = "edges" if it == "2" else "basic"
    log.write("{PASS0}".replace("<iteration>0", f"<iteration>{{it}}").replace(">basic<", f">{{tcase}}<"))
log.flush()
""")
    run = checkrun.run_check(tmp_path, 30)
    assert run.reruns == [2] and run.status == "ok"
    assert [(c.outcome, c.message) for c in run.cases] == [
        ("pass", "Passed"), ("fail", "nx=2 ny=2: wrong in phase 1"), ("pass", "Passed")]
    assert "reruns" in run.phases and "one_process" in run.phases


def test_every_case_from_the_first_that_did_not_end_cleanly_runs_again():
    """From the first crash, timeout or missing result on, every case not passed reruns; earlier failures stand."""
    listed = [ListedCase("t", i, f"case {i}") for i in range(5)]

    def xml(i, result, message=""):
        return XmlTest("t", i, result, message, None)
    tests = [xml(0, "failure", "case 0: wrong"), xml(1, "success"), xml(2, "error", "CUDA error: x"),
             xml(3, "failure", "case 3: wrong")]
    assert checkrun.to_rerun(listed, tests) == [2, 3, 4]
    assert checkrun.to_rerun(listed, [xml(i, "failure", "wrong") for i in range(5)]) == []
    assert checkrun.to_rerun(listed, []) == [0, 1, 2, 3, 4]


def test_no_gpu_in_phase_1_runs_nothing(tmp_path):
    fake_check(tmp_path, """print("no NVIDIA GPU or driver found on this machine", file=sys.stderr)
sys.exit(2)
""")
    run = checkrun.run_check(tmp_path, 30)
    assert run.status == "no_gpu" and run.cases == [] and run.no_gpu.startswith("no NVIDIA GPU")


# ---------------------------------------------------------------- the real Check library

@pytest.mark.skipif(not (shutil.which("gcc") and HAVE_CHECK), reason="gcc or the Check library (pkg-config check) not installed")
def test_real_check_suite_end_to_end(tmp_path):
    """Check itself, both phases: its own words for a signal and a timeout; cases after the hang not run."""
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "check"], capture_output=True, text=True,
                           timeout=10).stdout.split()
    built = subprocess.run(["gcc", str(DATA / "check_suite.c"), "-o", str(tmp_path / "check"), *flags],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    start = time.monotonic()
    run = checkrun.run_check(tmp_path, 60, case_timeout_s=1)
    assert time.monotonic() - start < 20
    assert (run.status, run.seed, run.stopped_early) == ("timeout", 4242, True)
    assert [(c.label, c.outcome) for c in run.cases] == [
        ("pass", "pass"), ("fail", "fail"), ("segv", "crash"), ("hang", "timeout"), ("exit", "not_run"),
        ("cuda", "not_run"), ("nx=1 ny=9", "not_run"), ("nx=2 ny=9", "not_run"), ("nx=33 ny=9", "not_run"),
        ("nx=64 ny=9", "not_run")]
    messages = {c.label: c.message for c in run.cases}
    assert messages["segv"].startswith(checkstream.SIGNAL_MESSAGE + " 11")
    assert messages["hang"] == checkstream.TIMEOUT_MESSAGE
    assert run.reruns == list(range(2, 10)) and run.device["name"].startswith("no GPU")
    assert list(dict.fromkeys(c.tcase for c in run.cases)) == ["basic", "crashes", "edges"]   # as listed
    assert (tmp_path / "check.xml").is_file()
    assert len(parsed((tmp_path / "check.xml").read_text())) >= 4   # what Check sent


@pytest.mark.skipif(not (HAVE_GPU and HAVE_CHECK), reason="needs a GPU and the Check library: a real lab's check program")
def test_a_real_check_program_makes_its_cuda_start_then_waits_for_its_go(tmp_path):
    """Lab 1's reference, built by the kit: the check program writes its device line, then runs no case until
    take() returned (a class grading's place next in line); the limits and the cases' time count from the go."""
    build_dir = tmp_path / "build"
    built = subprocess.run([sys.executable, str(GRADE_PY), "lab", str(KIT_ROOT / "labs" / "01-naive-5pt"),
                            "--impl", "reference", "--build-dir", str(build_dir), "--stage", "build"],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode in (0, 1) and (build_dir / "check").is_file(), built.stdout + built.stderr
    events = []

    def take():
        if not events or events[-1][0] != "took":
            events.append(("asked", time.monotonic()))
            time.sleep(2.0)                              # the grading before this one still holds the GPU
            events.append(("took", time.monotonic()))
    run = checkrun.run_check(build_dir, 60, case_timeout_s=5,
                             on_start=lambda seed, device: events.append(("device", time.monotonic())), take=take)
    assert run.status == "ok" and run.passed == run.total > 0, run.message
    assert [e[0] for e in events] == ["device", "asked", "took"]
    assert run.phases["before_go"] >= 2.0 and run.phases["one_process"] < run.phases["before_go"] + 30
    assert run.seconds < 30                             # the run's own seconds: from the go


# ---------------------------------------------------------------- the timed run after the cases

THEN_BENCH = """if os.environ.get("STENCIL_THEN_BENCH") == "1" and os.environ.get("CK_FORK") == "no":
    log.write("bench:\\n"); log.flush()
    print("timing on", os.environ.get("SEED", "?"), file=sys.stderr, flush=True)
    BENCH_BODY
"""


def bench_after_cases(tmp_path, cases_body: str, bench_body: str) -> None:
    fake_check(tmp_path, f"""log.write("seed: 31\\n"); log.flush()
log.write('device: {{"name": "G"}}\\n')
log.write("{HEADER}")
{cases_body}log.write("</suite></testsuites>\\n"); log.flush()
""" + THEN_BENCH.replace("BENCH_BODY", bench_body))


def test_the_timed_run_follows_the_cases_in_the_same_process(tmp_path):
    """Asked to, a one-process run that passed every case times the kernel itself: one CUDA start."""
    bench_after_cases(tmp_path, ALL_PASS, f"log.write({json.dumps(json.dumps(GOOD_BENCH))}); log.flush()")
    run = checkrun.run_check(tmp_path, 30, case_timeout_s=5, bench_timeout_s=20)
    assert (run.status, run.exit_status, run.passed, run.total) == ("ok", 0, 3, 3)
    assert run.bench.status == "ok" and run.bench.program == "check" and run.bench.data == GOOD_BENCH
    assert json.loads((tmp_path / "bench.json").read_text()) == GOOD_BENCH
    assert run.reruns == [] and not run.stopped_early
    assert len(parsed((tmp_path / "check.xml").read_text())) == 3
    # Not asked: no timed run, and the program is not told to.
    run = checkrun.run_check(tmp_path, 30, case_timeout_s=5)
    assert run.bench is None and run.passed == 3 and not (tmp_path / "bench.json").exists()
    # A timed run after a failed case never counts: the grader's rule reads the cases, not the line.
    fail2 = PASS0.replace("success", "failure").replace(">basic<", ">edges<").replace("<iteration>0", "<iteration>2")
    bench_after_cases(tmp_path, ALL_PASS.replace('("edges", 2)', "") + f'log.write("{fail2}")\n',
                      f"log.write({json.dumps(json.dumps(GOOD_BENCH))}); log.flush()")
    run = checkrun.run_check(tmp_path, 30, case_timeout_s=5, bench_timeout_s=20)
    assert [c.outcome for c in run.cases] == ["pass", "pass", "fail"]
    assert run.bench.status == "ok" and not score.may_bench(None, run)[0]


def test_a_timed_run_that_hangs_or_fails_is_the_benchs_verdict_not_the_cases(tmp_path):
    bench_after_cases(tmp_path, ALL_PASS, "time.sleep(3600)")
    start = time.monotonic()
    run = checkrun.run_check(tmp_path, 30, case_timeout_s=5, bench_timeout_s=1.5)
    assert time.monotonic() - start < 15
    assert (run.status, run.exit_status, run.passed) == ("ok", 0, 3) and not run.stopped_early
    assert run.bench.status == "timeout" and "passed its limit of 1.5 s" in run.bench.message
    bench_after_cases(tmp_path, ALL_PASS, 'print("CUDA error: too many resources requested for launch '
                                          '(cudaErrorLaunchOutOfResources)", file=sys.stderr); sys.exit(3)')
    run = checkrun.run_check(tmp_path, 30, case_timeout_s=5, bench_timeout_s=20)
    assert run.status == "ok" and run.passed == 3
    assert run.bench.status == "cuda_error" and "cudaErrorLaunchOutOfResources" in run.bench.message
    bench_after_cases(tmp_path, ALL_PASS, 'print("no NVIDIA GPU left", file=sys.stderr); sys.exit(2)')
    run = checkrun.run_check(tmp_path, 30, case_timeout_s=5, bench_timeout_s=20)
    assert (run.status, run.exit_status, run.passed, run.total) == ("ok", 0, 3, 3)   # the cases stand
    assert run.bench.status == "no_gpu" and "no NVIDIA GPU left" in run.bench.message
    bench_after_cases(tmp_path, ALL_PASS, "sys.exit(70)")           # the exit guard: exit() while timed
    run = checkrun.run_check(tmp_path, 30, case_timeout_s=5, bench_timeout_s=20)
    assert run.bench.status == "error" and "called exit()" in run.bench.message
    bench_after_cases(tmp_path, ALL_PASS, 'print("CUDA error: cudaStreamCreate failed: OS call failed '
                                          '(cudaErrorOperatingSystem)", file=sys.stderr); sys.exit(3)')
    run = checkrun.run_check(tmp_path, 30, case_timeout_s=5, bench_timeout_s=20)
    assert run.bench.status == "grader_error"                      # the machine's failure, not the student's


def test_cases_keep_their_own_limit_when_a_timed_run_may_follow(tmp_path):
    """The process may run suite + bench seconds; the cases alone still stop at the suite's limit."""
    fake_check(tmp_path, f"""log.write("seed: 5\\n"); log.flush()
log.write('device: {{"name": "G"}}\\n')
log.write("{HEADER}{PASS0}"); log.flush()
time.sleep(3600)
""")
    start = time.monotonic()
    run = checkrun.run_check(tmp_path, 1.5, bench_timeout_s=60)
    assert time.monotonic() - start < 20
    assert run.status == "timeout" and run.bench is None
    assert run.cases[1].outcome == "timeout" and "passed its limit of 1.5 s" in run.cases[1].message


def test_the_timed_run_line_is_read_across_chunks_and_watched():
    said = []
    stream = checkstream.CheckStream(10, nofork=True, bench_timeout_s=5, on_bench=lambda: said.append("timing"))
    text = 'seed: 1\ndevice: {"name": "G"}\n' + (DATA / "check_log.xml").read_text().split("<test")[0]
    for piece in (text, "</testsuites>\nben", "ch:\n", '{"ratio": 1}\n'):
        stream.feed(piece.encode())
    assert stream.bench_started is not None and said == ["timing"]           # once, when it starts
    assert stream.poll(stream.bench_started + 4) is None           # no case stall once it is timing
    assert "timed run passed its limit of 5 s" in stream.poll(stream.bench_started + 6)
    assert stream.stop_kind == "bench_timeout"
    assert checkstream.bench_part("x\nbench:\n{}\n") == "{}\n" and checkstream.bench_part("<t>bench:") is None
