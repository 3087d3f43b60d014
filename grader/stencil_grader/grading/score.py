"""The grading policy: which stages run, verdicts and points.  The only place for it.

Rules, in order:

1. A build that fails (or times out) scores 0: "compile_error"; when lab.mk says the machine or
   the kit is at fault (`kit error: ...`), "kit_error": 0 points that are not a grade.
2. A forbidden use in the student file or its compiled object (static.py) scores 0 and nothing
   is run: "forbidden".
3. Correctness points = points.correctness * passed / total cases.  When any case did not pass,
   the verdict is the worst outcome seen: timeout > crash > incorrect (cases not run after a
   timeout count as the timeout; a launch the runtime refused is incorrect, counted apart).
   Performance is not measured (0 points).
4. A failed static constraint keeps the correctness points and gives performance 0:
   "constraint".  A "signal" costs nothing: the launch audit judges those rules (6).
5. With no GPU nothing is measured: 0 points, verdict "not_measured", even when rule 4 already
   failed (its message says so).
6. Performance, only when every case passed and no constraint failed, from the bench's ratio =
   effective / copy bandwidth of the same run: the timed run's output wrong: "incorrect"; ratio
   above 1.05 (K x 1.05 for K fused sweeps: bench.max_fused_sweeps): "implausible"; a failed
   launch-audit rule (launches.py): "constraint"; a rule that needs the audit where it could not
   run: "not_measured" (each performance 0); else points.performance * ramp(ratio, floor,
   target) with the device's table in lab.json (else generic).
7. "pass" only with full points; "slow" when correct but short of them.  grade.py exits 0 only
   with full points.
8. A failure of the grader's own machinery (the sandbox or a program could not start, a CUDA
   error of the machine: protocol.MACHINERY_CUDA_ERRORS) is "grader_error": no grade, never final.

Points are rounded to 0.01; "full" is decided on the rounded figures.  Calibration: a target is
95% of the reference's ratio and its floor half of it (calibrated_target); the generic table is at
most the calibrated GPUs' lowest floor and target (generic_bound).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from ..base import protocol
from .bench import BenchRun
from .build import BuildResult
from .checkrun import CheckRun
from ..base.labspec import LabSpec, TargetChoice
from .static import StaticCheck, StaticResult

#: Verdicts from best to worst-known; a report shows one per lab.
VERDICTS = ("pass", "slow", "not_measured", "constraint", "implausible", "incorrect",
            "crash", "timeout", "forbidden", "compile_error", "kit_error", "pending", "grader_error")
#: Verdicts whose 0 points are no grade: nothing about the student's code was measured, or the
#: grader's own machinery failed (never final: the next run grades it again).
NOT_GRADED = ("not_measured", "kit_error", "pending", "grader_error")
#: The verdict of a class's lab that no file was submitted for: a grade of 0 (classes/plan.py).
MISSING = "missing"
#: The verdict of a grading the grader's own machinery failed (one of NOT_GRADED: graded again).
GRADER_ERROR = "grader_error"
#: The verdicts of a correct kernel: grades that are no failure, the only ones a leaderboard shows.
CORRECT = ("pass", "slow")


def is_grade(report: dict | None) -> bool:
    """True when a report's verdict is a grade, its points counting: not one of NOT_GRADED, and not
    "missing" (a class's lab never submitted: 0 in class.csv, no grade of a kernel)."""
    return bool(report) and report.get("verdict") not in NOT_GRADED + (MISSING,)


#: Case outcome -> verdict, and their order of badness (worst first).
_CASE_VERDICT = {"timeout": "timeout", "crash": "crash", "fail": "incorrect", "not_run": "timeout"}
_BENCH_VERDICT = {"timeout": "timeout", "cuda_error": "crash", "error": "crash",
                  "no_gpu": "not_measured", "debug_build": "not_measured", GRADER_ERROR: GRADER_ERROR}
_MACHINERY = "the grader's own machinery failed, not your code (this is no grade; the next run grades it again): "
_CONSTRAINT_ZERO = "0 points: a constraint of this lab failed (see static checks)"


@dataclass
class StageScore:
    """Points of one stage (correctness or performance) and what decided them."""

    verdict: str
    points: float
    max_points: float
    message: str

    @property
    def full(self) -> bool:
        return round(self.points, 2) >= round(self.max_points, 2)


@dataclass
class Score:
    verdict: str
    correctness: StageScore
    performance: StageScore
    target: TargetChoice | None = None
    ratio: float | None = None
    messages: list[str] = field(default_factory=list)

    @property
    def points(self) -> float:
        return round(self.correctness.points + self.performance.points, 2)

    @property
    def max_points(self) -> float:
        return round(self.correctness.max_points + self.performance.max_points, 2)

    @property
    def full_points(self) -> bool:
        return self.points >= self.max_points

    @property
    def exit_code(self) -> int:
        """0 only when the lab got full points, else 1."""
        return 0 if self.full_points else 1


def may_run(build: BuildResult, static: StaticResult | None) -> tuple[bool, str]:
    """Whether the student's code may be run at all; (False, why) when not."""
    if build.outcome == "kit_error":
        return False, "not run: the machine or the kit is broken (kit error), not the submission"
    if not build.ok:
        return False, "not run: the build failed"
    if static is not None and static.forbidden:
        return False, "not run: the student file uses a forbidden call"
    return True, ""


def may_bench(static: StaticResult | None, check: CheckRun | None) -> tuple[bool, str]:
    """Whether performance is measured; (False, why) when not."""
    if check is None:
        return False, "not measured: correctness was not measured"
    if not _all_passed(check):
        return False, "not run: correctness gates performance (every case must pass)"
    if not may_time_after_cases(static):
        return False, _CONSTRAINT_ZERO
    return True, ""


def may_time_after_cases(static: StaticResult | None) -> bool:
    """Whether the check run is asked to time the kernel once every case passed (may_bench's rule,
    the cases aside: the static checks allow a performance score)."""
    return static is None or not static.constraint_failed


def ramp(ratio: float, floor: float, target: float) -> float:
    """Fraction of the performance points for a ratio: 0 at floor, 1 at target, linear between, capped."""
    return min(1.0, max(0.0, (ratio - floor) / (target - floor)))


def performance_points(maximum: float, ratio: float, floor: float, target: float) -> float:
    """The performance points a measured, plausible ratio earns (rule 6): maximum x ramp, rounded
    to 0.01 as every figure shown."""
    return round(maximum * ramp(ratio, floor, target), 2)


def performance_message(ratio: float, floor: float, target: float, table: str) -> str:
    """The performance stage's message of a graded ratio: the figures its points came from."""
    return f"ratio {ratio:.3f} (floor {floor:g}, target {target:g}, table {table})"


def _all_passed(check: CheckRun) -> bool:
    return (check.total > 0 and check.passed == check.total
            and check.status == "ok" and check.exit_status == 0)


def _correctness(spec: LabSpec, check: CheckRun) -> StageScore:
    total_points = spec.points.correctness
    points = round(total_points * check.passed / check.total, 2) if check.total else 0.0
    if machinery := _machinery_failure(check):
        return StageScore("grader_error", 0.0, total_points, _MACHINERY + machinery)
    if check.total == 0:
        why = check.message or check.list_error or "the suite reported no case"
        return StageScore("crash", 0.0, total_points, f"no case ran: {why}")
    if check.passed < check.total:
        worst = next(o for o in ("timeout", "crash", "fail", "not_run")
                     if any(c.outcome == o for c in check.cases))
        return StageScore(_CASE_VERDICT[worst], points, total_points,
                          f"{check.passed}/{check.total} cases passed; {_failures(check)} "
                          f"(worst: {_CASE_VERDICT[worst]})")
    if check.status != "ok" or check.exit_status != 0:
        # Every case reported success, but the run itself did not end cleanly.
        verdict = "timeout" if check.status == "timeout" else "crash"
        how = check.message or f"check exited with status {check.exit_status}"
        return StageScore(verdict, points, total_points, f"every case reported success, but {how}")
    return StageScore("pass", points, total_points, f"{check.passed}/{check.total} cases passed")


def _machinery_failure(check: CheckRun) -> str | None:
    """What failed of the grader's machinery in a check run (it could not start, or a case ended on
    one of protocol.MACHINERY_CUDA_ERRORS), else None."""
    if check.status == "error":
        return check.message or check.list_error or "the check program could not start"
    for case in check.cases:
        if case.outcome != "pass" and (name := protocol.machinery_error(case.message)):
            return f"{case.label}: {name}: {case.message}"
    return None


def _failures(check: CheckRun) -> str:
    """How the cases that did not pass ended, counted: '26 wrong and 3 failed to launch'
    (protocol.LAUNCH_REFUSED counted apart from wrong answers)."""
    n = collections.Counter(c.outcome for c in check.cases)
    refused = sum(c.outcome == "fail" and c.message.startswith(protocol.LAUNCH_REFUSED) for c in check.cases)
    counts = ((n["fail"] - refused, "wrong"),
              (refused, "failed to launch (the runtime refused the configuration the launcher asked for)"),
              (n["crash"], "crashed"), (n["timeout"], "timed out"), (n["not_run"], "not run"))
    parts = [f"{k} {what}" for k, what in counts if k]
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _performance(spec: LabSpec, bench: BenchRun, choice: TargetChoice) -> tuple[StageScore, float | None]:
    maximum = spec.points.performance
    if bench.status != "ok":
        verdict = _BENCH_VERDICT.get(bench.status, "crash")
        prefix = "not measured: " if verdict == "not_measured" else ""
        return StageScore(verdict, 0.0, maximum, prefix + bench.message), None
    data = bench.data
    ratio = float(data["ratio"])
    if not data["output_ok"]:
        why = data.get("output_message") or "output differs from the CPU reference"
        return StageScore("incorrect", 0.0, maximum, f"the timed run's output was wrong: {why}"), ratio
    bound, fused = spec.max_plausible_ratio, spec.bench.max_fused_sweeps
    if ratio > bound:
        limit = ("faster than the copy bandwidth is not possible for a sweep that reads and writes "
                 "every cell" if fused == 1 else
                 f"faster than {fused} x the copy bandwidth is not possible: even {fused} sweeps fused "
                 "into one pass read and write every cell once")
        return StageScore("implausible", 0.0, maximum,
                          f"ratio {ratio:.3f} > {bound:g}: {limit}; suspect skipped "
                          "work (cells not computed, or computed in an earlier call)"), ratio
    t = choice.target
    stage = StageScore("pass", performance_points(maximum, ratio, t.floor, t.target), maximum,
                       performance_message(ratio, t.floor, t.target, choice.table))
    stage.verdict = "pass" if stage.full else "slow"
    return stage, ratio


def score_lab(spec: LabSpec, build: BuildResult, static: StaticResult | None = None,
              check: CheckRun | None = None, bench: BenchRun | None = None,
              not_measured: str | None = None, device_name: str | None = None,
              launches: list[StaticCheck] | None = None) -> Score:
    """Verdict and points of one lab (module docstring).  check / bench: None when that stage did not
    run; not_measured: why they were not (no GPU, --skip-bench); device_name picks the target
    table; launches: the launch audit's checks (launches.py)."""
    p = spec.points
    runnable, why_not = may_run(build, static)
    if not runnable:
        verdict = ("kit_error" if build.outcome == "kit_error" else "compile_error") if not build.ok \
            else "forbidden"
        detail = build.message if not build.ok else "; ".join(
            d for c in static.failed("forbidden") for d in (c.details or [c.message]))
        return Score(verdict, StageScore("not_run", 0.0, p.correctness, why_not),
                     StageScore("not_run", 0.0, p.performance, why_not), messages=[detail])

    if check is None:
        # Nothing ran: whatever else is known (a failed constraint), no grade is (rule 5).
        reason = f"not measured: {not_measured or 'correctness did not run'}"
        failed = static is not None and static.constraint_failed
        return Score("not_measured", StageScore("not_measured", 0.0, p.correctness, reason),
                     StageScore("not_measured", 0.0, p.performance,
                                f"{reason}; and {_CONSTRAINT_ZERO}" if failed else reason),
                     messages=[reason] + (["a constraint of this lab failed (see static checks): performance will "
                                           "get 0 once measured"] if failed else []))

    corr = _correctness(spec, check)
    benchable, why_not = may_bench(static, check)
    if corr.verdict == "grader_error":
        return Score("grader_error", corr, StageScore("not_run", 0.0, p.performance, corr.message),
                     messages=[corr.message])
    if corr.verdict != "pass":
        return Score(corr.verdict, corr, StageScore("not_run", 0.0, p.performance, why_not))
    if not benchable:
        return Score("constraint", corr, StageScore("constraint", 0.0, p.performance, why_not))

    bench_device = bench.data.get("device") if bench is not None and bench.data else None
    choice = spec.target_for(bench_device or device_name)
    if bench is None:
        reason = f"not measured: {not_measured or 'the bench did not run'}"
        return Score("not_measured", corr, StageScore("not_measured", 0.0, p.performance, reason), choice)
    perf, ratio = _performance(spec, bench, choice)
    if perf.verdict == "grader_error":
        perf.message = _MACHINERY + perf.message
        return Score("grader_error", corr, perf, choice, messages=[perf.message])
    if perf.verdict in CORRECT:
        failed = [c for c in launches or [] if c.status == "fail"]
        unverified = [c for c in launches or [] if c.status == "skipped"
                      and c.name not in ("launch stream", "host memory")]
        if failed:
            perf = StageScore("constraint", 0.0, p.performance,
                              f"0 points: the launch audit found: {failed[0].message}")
        elif unverified:
            perf = StageScore("not_measured", 0.0, p.performance,
                              f"not measured: the {unverified[0].name} constraint needs the launch "
                              f"audit ({unverified[0].message})")
    verdict = perf.verdict if perf.verdict != "pass" else ("pass" if corr.full else "slow")
    return Score(verdict, corr, perf, choice, ratio)


def generic_bound(spec: LabSpec) -> tuple[float, float] | None:
    """(floor, target) the generic table may not exceed: the lowest floor and the lowest target of
    the GPUs lab.json calibrated (entries with a reference_ratio); None when none is."""
    calibrated = [t for name, t in spec.targets.items() if name != "generic" and t.reference_ratio is not None]
    return (min(t.floor for t in calibrated), min(t.target for t in calibrated)) if calibrated else None


def target_meaning(spec: LabSpec, choice: TargetChoice, device: str | None) -> str:
    """What the target table that graded a run means for the student, in one sentence."""
    if spec.targets_policy is not None:
        return (f"the lab's stated policy, the same on every GPU: {spec.targets_policy.why}")
    if choice.table != "generic":
        t = choice.target
        measured = f" (the reference reached {t.reference_ratio:.3f} of the copy bandwidth here)" \
            if t.reference_ratio is not None else ""
        return f"targets calibrated on this GPU model{measured}: your points compare your kernel with the reference's"
    known = sorted(name for name, t in spec.targets.items() if name != "generic" and t.reference_ratio is not None)
    return (f"{device or 'this GPU'} has no targets of its own, so the generic ones graded it: at most the lowest of "
            f"the calibrated GPUs' ({', '.join(known) or 'none yet'}). Your points measure your kernel against "
            "those GPUs' references, not against what yours can do: compare your ratio with the reference ratios "
            "the README records, or have an instructor give this GPU its own targets (make calibrate, in the "
            "full kit)")


#: Calibration policy: target and floor as fractions of the reference's measured ratio.
CALIBRATION_TARGET_FRACTION = 0.95
CALIBRATION_FLOOR_FRACTION = 0.50


def calibrated_target(reference_ratio: float) -> tuple[float, float]:
    """(floor, target) for a GPU on which the reference reaches reference_ratio of the copy
    bandwidth; rounded down to 0.01 so the reference itself always reaches the target."""
    return tuple(int(f * reference_ratio * 100 + 1e-9) / 100
                 for f in (CALIBRATION_FLOOR_FRACTION, CALIBRATION_TARGET_FRACTION))
