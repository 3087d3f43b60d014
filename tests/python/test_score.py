"""score.py, the grading policy: ramp, cap, gates, implausible, constraint, not measured."""

from pathlib import Path

import pytest

from conftest import KIT_ROOT, fake_spec
from stencil_grader.base import labspec
from stencil_grader.grading import score
from stencil_grader.grading.bench import BenchRun
from stencil_grader.grading.build import BuildResult
from stencil_grader.grading.checkrun import CaseResult, CheckRun
from stencil_grader.grading.static import StaticCheck, StaticResult


@pytest.fixture
def spec(tmp_path):
    return fake_spec(tmp_path)     # 60 correctness + 40 performance; generic floor 0.30, target 0.60


OK_BUILD = BuildResult("ok", ["make"], Path("b"))
CLEAN = StaticResult([StaticCheck("forbidden calls", "pass", "forbidden", "none")])


def checked(*outcomes, status="ok", exit_status=None):
    cases = [CaseResult("t", i, f"case {i}", o, "" if o == "pass" else f"case {i}: {o}")
             for i, o in enumerate(outcomes)]
    if exit_status is None:
        exit_status = 0 if all(o == "pass" for o in outcomes) else 1
    return CheckRun(cases, seed=1, status=status, exit_status=exit_status)


def benched(ratio, output_ok=True, device="NVIDIA L4"):
    return BenchRun("ok", {"device": device, "ratio": ratio, "gbps": 3000 * ratio, "copy_gbps": 3000.0,
                           "ms_median": 1.0, "output_ok": output_ok, "output_message": "cell (1, 1): nan"})


ALL_PASS = checked("pass", "pass", "pass", "pass")


def test_ramp_and_cap():
    assert score.ramp(0.30, 0.30, 0.60) == 0.0
    assert score.ramp(0.45, 0.30, 0.60) == pytest.approx(0.5)
    assert score.ramp(0.60, 0.30, 0.60) == 1.0
    assert score.ramp(0.95, 0.30, 0.60) == 1.0               # capped
    assert score.ramp(0.10, 0.30, 0.60) == 0.0               # never negative


@pytest.mark.parametrize("ratio, perf, verdict", [
    (0.10, 0.0, "slow"), (0.30, 0.0, "slow"), (0.45, 20.0, "slow"), (0.599, 39.87, "slow"),
    (0.60, 40.0, "pass"), (0.99, 40.0, "pass"), (1.05, 40.0, "pass")])
def test_performance_points(spec, ratio, perf, verdict):
    s = score.score_lab(spec, OK_BUILD, CLEAN, ALL_PASS, benched(ratio))
    assert s.correctness.points == 60 and s.performance.points == pytest.approx(perf)
    assert s.verdict == verdict
    assert s.exit_code == (0 if verdict == "pass" else 1)
    assert s.target.table == "generic"


def test_device_table_is_used_when_the_name_matches(spec):
    s = score.score_lab(spec, OK_BUILD, CLEAN, ALL_PASS, benched(0.60, device="Fake GPU 80GB"))
    assert s.target.table == "Fake GPU 80GB"                 # floor 0.40, target 0.80 there
    assert s.performance.points == pytest.approx(20.0) and s.verdict == "slow"


def test_implausible_ratio_scores_zero(spec):
    s = score.score_lab(spec, OK_BUILD, CLEAN, ALL_PASS, benched(1.06))
    assert s.verdict == "implausible" and s.performance.points == 0 and s.correctness.points == 60
    assert "faster than the copy bandwidth is not possible" in s.performance.message
    assert "skipped work" in s.performance.message


def test_wrong_timed_output_is_incorrect(spec):
    s = score.score_lab(spec, OK_BUILD, CLEAN, ALL_PASS, benched(0.9, output_ok=False))
    assert s.verdict == "incorrect" and s.performance.points == 0 and s.correctness.points == 60
    assert "timed run" in s.performance.message and "cell (1, 1)" in s.performance.message


def test_compile_error_scores_zero(spec):
    s = score.score_lab(spec, BuildResult("compile_error", ["make"], Path("b"), message="error"))
    assert (s.verdict, s.points, s.exit_code) == ("compile_error", 0, 1)
    assert s.correctness.verdict == "not_run"
    assert score.may_run(BuildResult("timeout", ["make"], Path("b")), None)[0] is False


def test_forbidden_scores_zero_and_is_not_run(spec):
    bad = StaticResult([StaticCheck("forbidden calls", "fail", "forbidden", "1 use",
                                    ["line 3: cudaMemcpy: memory copy"])])
    assert score.may_run(OK_BUILD, bad) == (False, "not run: the student file uses a forbidden call")
    s = score.score_lab(spec, OK_BUILD, bad, ALL_PASS, benched(0.9))   # even if it had run
    assert (s.verdict, s.points) == ("forbidden", 0)
    assert "line 3: cudaMemcpy" in s.messages[0]


def test_kit_error_is_not_the_students_and_not_a_grade(spec):
    broken = BuildResult("kit_error", ["make"], Path("b"), message="kit error: the Check unit-testing library "
                                                                   "is not installed")
    assert score.may_run(broken, None)[0] is False and "kit error" in score.may_run(broken, None)[1]
    s = score.score_lab(spec, broken)
    assert (s.verdict, s.points) == ("kit_error", 0) and "Check" in s.messages[0]
    assert "kit_error" in score.NOT_GRADED and "not_measured" in score.NOT_GRADED


@pytest.mark.parametrize("outcomes, verdict, points", [
    (("pass", "timeout", "not_run", "not_run"), "timeout", 15.0),
    (("pass", "pass", "fail", "pass"), "incorrect", 45.0),
    (("pass", "crash", "fail", "pass"), "crash", 30.0),
    (("timeout", "crash", "fail", "pass"), "timeout", 15.0),
    (("fail", "fail", "fail", "fail"), "incorrect", 0.0),
])
def test_correctness_fraction_and_worst_outcome(spec, outcomes, verdict, points):
    assert score.may_bench(CLEAN, checked(*outcomes))[0] is False
    s = score.score_lab(spec, OK_BUILD, CLEAN, checked(*outcomes))
    assert s.verdict == verdict and s.correctness.points == points
    assert s.performance.points == 0 and s.performance.verdict == "not_run"
    assert "correctness gates performance" in s.performance.message


def test_constraint_keeps_correctness_zero_performance(spec):
    failed = StaticResult(CLEAN.checks + [StaticCheck("no div/rem", "fail", "constraint", "2 div")])
    assert score.may_bench(failed, ALL_PASS)[0] is False
    s = score.score_lab(spec, OK_BUILD, failed, ALL_PASS)
    assert (s.verdict, s.correctness.points, s.performance.points) == ("constraint", 60, 0)
    # an incorrect result is the worse verdict
    s = score.score_lab(spec, OK_BUILD, failed, checked("pass", "fail"))
    assert s.verdict == "incorrect"
    # without a GPU the constraint is known, but nothing was measured: no grade
    s = score.score_lab(spec, OK_BUILD, failed, None, not_measured="no GPU: none")
    assert s.verdict == "not_measured" and s.points == 0 and s.verdict in score.NOT_GRADED
    assert "a constraint of this lab failed" in " ".join(s.messages)


def test_no_gpu_is_not_measured(spec):
    s = score.score_lab(spec, OK_BUILD, CLEAN, None, None,
                        not_measured="no GPU: no CUDA-capable device is detected")
    assert (s.verdict, s.points, s.exit_code) == ("not_measured", 0, 1)
    assert s.correctness.message == "not measured: no GPU: no CUDA-capable device is detected"
    assert s.performance.verdict == "not_measured"


def test_skipped_or_unmeasurable_bench_is_not_measured(spec):
    s = score.score_lab(spec, OK_BUILD, CLEAN, ALL_PASS, None, not_measured="skipped (--skip-bench)")
    assert (s.verdict, s.correctness.points, s.performance.points) == ("not_measured", 60, 0)
    assert s.performance.message == "not measured: skipped (--skip-bench)"
    for status, verdict in (("no_gpu", "not_measured"), ("debug_build", "not_measured"),
                            ("timeout", "timeout"), ("cuda_error", "crash"), ("error", "crash")):
        s = score.score_lab(spec, OK_BUILD, CLEAN, ALL_PASS, BenchRun(status, message="why"))
        assert (s.verdict, s.performance.points) == (verdict, 0), status


def test_every_case_passed_but_run_did_not_end_cleanly_is_not_a_pass(spec):
    s = score.score_lab(spec, OK_BUILD, CLEAN, checked("pass", "pass", exit_status=1), benched(0.9))
    assert s.verdict == "crash" and s.performance.points == 0
    assert "every case reported success, but" in s.correctness.message
    s = score.score_lab(spec, OK_BUILD, CLEAN, checked("pass", status="timeout", exit_status=None))
    assert s.verdict == "timeout"


def test_no_case_at_all_is_a_crash(spec):
    s = score.score_lab(spec, OK_BUILD, CLEAN, CheckRun([], None, "crash", message="check died"))
    assert (s.verdict, s.correctness.points) == ("crash", 0)
    assert "no case ran" in s.correctness.message


def test_full_points_only_on_pass(spec):
    s = score.score_lab(spec, OK_BUILD, CLEAN, ALL_PASS, benched(0.7))
    assert (s.points, s.max_points, s.full_points, s.verdict) == (100, 100, True, "pass")
    assert set(score.VERDICTS) >= {"pass", "slow", "not_measured", "constraint", "implausible",
                                   "incorrect", "crash", "timeout", "forbidden", "compile_error"}


@pytest.fixture
def fused_spec(tmp_path):
    """A lab that fuses up to K = 8 sweeps per pass (lab 8's key): plausible up to 8 x 1.05."""
    return fake_spec(tmp_path, api="stencil2d_run", bench__steps=16, bench__max_fused_sweeps=8,
                     targets={"generic": {"floor": 1.0, "target": 2.0}})


@pytest.mark.parametrize("ratio, perf, verdict", [
    (1.0, 0.0, "slow"), (1.5, 20.0, "slow"), (2.5, 40.0, "pass"), (8.4, 40.0, "pass"),
    (8.41, 0.0, "implausible")])
def test_fused_sweeps_move_the_plausibility_bound(fused_spec, ratio, perf, verdict):
    s = score.score_lab(fused_spec, OK_BUILD, CLEAN, ALL_PASS, benched(ratio))
    assert s.verdict == verdict and s.performance.points == pytest.approx(perf)
    if verdict == "implausible":
        assert "ratio 8.410 > 8.4: faster than 8 x the copy bandwidth" in s.performance.message


def test_a_refused_launch_is_a_failure_counted_apart_not_a_crash(spec):
    """Launches the runtime refused are failures counted apart (incorrect), never a crash."""
    from stencil_grader.base import protocol
    cases = [CaseResult("t", i, f"case {i}", "fail", f"case {i}: 12 mismatches") for i in range(29)]
    cases += [CaseResult("large", 29 + i, "nx=4 ny=1100001", "fail",
                         f"{protocol.LAUNCH_REFUSED} stencil3d_sweep asked for a kernel launch of 1 x 137501 x 1 "
                         "blocks ...: gridDim.y = 137501 is more than the 65535 this GPU allows") for i in range(3)]
    s = score.score_lab(spec, OK_BUILD, CLEAN, CheckRun(cases, seed=1, status="ok", exit_status=1))
    assert s.verdict == "incorrect"
    assert s.correctness.message == ("0/32 cases passed; 29 wrong and 3 failed to launch (the runtime refused "
                                     "the configuration the launcher asked for) (worst: incorrect)")


def test_every_way_a_case_ends_is_counted(spec):
    s = score.score_lab(spec, OK_BUILD, CLEAN, checked("pass", "fail", "crash", "timeout", "not_run"))
    assert s.verdict == "timeout"
    assert s.correctness.message == "1/5 cases passed; 1 wrong, 1 crashed, 1 timed out and 1 not run (worst: timeout)"


# ---------------------------------------------------------------- the generic table

def test_every_lab_s_generic_table_is_at_most_its_calibrated_gpus():
    for lab_dir in labspec.discover_labs():
        spec = labspec.load(lab_dir / "lab.json")
        bound = score.generic_bound(spec)
        generic = spec.targets["generic"]
        if spec.targets_policy is None:
            assert bound is not None, lab_dir.name
            assert generic.floor <= bound[0] and generic.target <= bound[1], (lab_dir.name, generic, bound)


def test_target_meaning_tells_a_self_learner_which_table_graded_the_run():
    spec = labspec.load(KIT_ROOT / "labs" / "01-naive-5pt" / "lab.json")
    own = score.target_meaning(spec, spec.target_for("NVIDIA H100 80GB HBM3"), "NVIDIA H100 80GB HBM3")
    assert own.startswith("targets calibrated on this GPU model (the reference reached 0.700")
    other = score.target_meaning(spec, spec.target_for("Tesla T4"), "Tesla T4")
    assert other.startswith("Tesla T4 has no targets of its own, so the generic ones graded it")
    assert "NVIDIA H100 80GB HBM3, NVIDIA H200" in other and "make calibrate" in other
    bonus = labspec.load(KIT_ROOT / "labs" / "08-temporal-blocking" / "lab.json")
    assert score.target_meaning(bonus, bonus.target_for("Tesla T4"), "Tesla T4").startswith("the lab's stated policy")


MACHINE = "CUDA error: cudaStreamCreate(&s) failed at grid.c:40: OS call failed or operation not supported on this OS (cudaErrorOperatingSystem)"


@pytest.mark.parametrize("check, bench", [
    (CheckRun([], seed=1, status="error", message="check could not start: Exception occurred in preexec_fn"), None),
    (CheckRun([CaseResult("t", 0, "case 0", "pass"), CaseResult("t", 1, "case 1", "crash", MACHINE)], seed=1,
              status="ok", exit_status=1), None),
    (ALL_PASS, BenchRun("grader_error", message="the sandbox could not be set up: no free sandbox user id")),
])
def test_a_failure_of_the_graders_machinery_is_grader_error_never_a_zero(spec, check, bench):
    """The sandbox, the program start or a machine CUDA error failing: grader_error, never a 0."""
    s = score.score_lab(spec, OK_BUILD, CLEAN, check, bench)
    assert s.verdict == "grader_error" and "grader_error" in score.NOT_GRADED
    assert s.messages and "the grader's own machinery failed, not your code" in s.messages[0]


def test_a_students_cuda_error_stays_a_crash(spec):
    student = "CUDA error: kernel failed while running: an illegal memory access was encountered (cudaErrorIllegalAddress)"
    check = CheckRun([CaseResult("t", 0, "case 0", "crash", student)], seed=1, status="ok", exit_status=1)
    assert score.score_lab(spec, OK_BUILD, CLEAN, check).verdict == "crash"
