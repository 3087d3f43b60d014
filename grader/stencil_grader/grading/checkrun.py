"""Run a lab's Check suite (BUILD_DIR/check) in the sandbox and judge each case; grader/README.md,
section 2, says how.

`check --list` names the cases; phase 1 runs them all in one process (CK_FORK=no), watched by
checkstream.CheckStream; phase 2, only when phase 1 did not end every case cleanly, runs each case
that did not pass from the first unclean one on again in fork mode (to_rerun, rerun_split), and its
results replace phase 1's.  Asked to (bench_timeout_s), phase 1 goes on, once every case has
passed, to the timed run in the same process (bench.c), judged by bench.judge: CheckRun.bench; the
process's ending is then the timed run's, and its cases stand as reported.  Outcomes: pass, fail
(incorrect), timeout, crash (a signal, an early exit, a "CUDA error:" failure, no result, a case
reported more often than listed), not_run (after an earlier case's timeout).  A case never reported
is never a pass; a result for a case `--list` did not name is never counted.
"""

from __future__ import annotations

import collections
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..base import process, protocol, sandbox
from . import bench
from .checkstream import (STALL_CASE_TIMEOUTS, CheckStream, ListedCase, XmlTest, bench_part, classify,
                          parse_list, xml_log)

LIST_TIMEOUT_S = 30.0
#: Phase 2: check processes at once, each forking its cases one at a time.
RERUN_PROCESSES = 8
OUTCOMES = ("pass", "fail", "timeout", "crash", "not_run")
STDERR_TAIL_LINES = 40
NOT_RUN = "not run: an earlier case timed out"


@dataclass
class CaseResult:
    tcase: str
    iteration: int
    label: str
    outcome: str        # one of OUTCOMES
    message: str = ""
    duration_s: float | None = None


@dataclass
class CheckRun:
    """Everything one `check` run told us.  status: "ok" (every run ended by itself with exit status
    0 or 1), "no_gpu" (phase 1 found none, nothing ran; no_gpu says why), "timeout" (a case timed
    out), "crash" (any other ending) or "error" (the program could not be run); exit_status: phase
    1's (None when killed or not started); device: phase 1's `device:` line; output: what the
    student's code printed (capped); reruns: the cases run again in fork mode; phases: wall seconds
    (before_go: phase 1's CUDA start and wait for the GPU, given `take`);
    bench: the timed run phase 1 went on to, when asked and every case passed (else None)."""

    cases: list[CaseResult]
    seed: int | None
    status: str
    message: str = ""
    exit_status: int | None = None
    stderr_tail: str = ""
    list_error: str | None = None
    seconds: float = 0.0
    xml_log: Path | None = None
    stopped_early: bool = False
    notes: list[str] = field(default_factory=list)
    sandbox: dict[str, str] = field(default_factory=dict)
    no_gpu: str | None = None
    device: dict | None = None
    output: str = ""
    reruns: list[int] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    bench: bench.BenchRun | None = None

    @property
    def passed(self) -> int:
        return sum(c.outcome == "pass" for c in self.cases)

    @property
    def total(self) -> int:
        return len(self.cases)


def list_cases(check: Path, jail: sandbox.SandboxDir) -> tuple[list[ListedCase], str | None]:
    """Run `check --list` in the sandbox directory jail (LIST_TIMEOUT_S at most); returns (cases, None)
    or ([], why it failed)."""
    run = process.run([jail.program(check.name), "--list"], LIST_TIMEOUT_S, env=jail.env(check_env(None)),
                      cwd=jail.work, sandbox=jail.box)
    if run.error or run.timed_out or run.returncode != 0:
        return [], f"`check --list` {run.describe()}: {process.tail_lines(run.stderr, 5)}".rstrip(": ")
    cases = parse_list(run.stdout)
    if not cases:
        return [], "`check --list` printed no case"
    return cases, None


def merge(listed: list[ListedCase], tests: list[XmlTest], missing_outcome: str,
          missing_reason: str, first_missing: tuple[str, str] | None = None) -> tuple[list[CaseResult], list[str]]:
    """One CaseResult per listed case, matched to the XML by (tcase, iteration); and notes.  A listed
    case without a result gets missing_outcome and missing_reason (the first one first_missing, when
    given: the case a stalled run was stuck in); one reported more often than listed is a crash;
    results for unlisted cases are dropped (a note counts them) unless nothing was listed."""
    reported: dict[tuple[str, int], list[XmlTest]] = {}
    for test in tests:
        reported.setdefault((test.tcase, test.iteration), []).append(test)
    listed_count = collections.Counter((item.tcase, item.iteration) for item in listed)
    cases, notes = [], []
    for item in listed:
        key = (item.tcase, item.iteration)
        matches = reported.get(key)
        if matches and len(matches) > listed_count[key]:
            cases.append(CaseResult(item.tcase, item.iteration, item.label, "crash",
                                    f"{item.label}: reported {len(matches)} times for {listed_count[key]} "
                                    "listed: something besides Check wrote results to its output"))
        elif matches:
            test = matches.pop(0)
            cases.append(CaseResult(item.tcase, item.iteration, item.label,
                                    classify(test.result, test.message), test.message, test.duration_s))
        elif first_missing is not None:
            cases.append(CaseResult(item.tcase, item.iteration, item.label, *first_missing))
            first_missing = None
        else:
            cases.append(CaseResult(item.tcase, item.iteration, item.label, missing_outcome, missing_reason))
    extra = [t for key, rest in reported.items() if key not in listed_count for t in rest]
    if listed and extra:
        notes.append(f"{len(extra)} result(s) for cases `check --list` did not name were ignored")
    elif extra:
        cases += [CaseResult(t.tcase, t.iteration, f"{t.tcase} #{t.iteration}", classify(t.result, t.message),
                             t.message, t.duration_s) for t in extra]
    return cases, notes


def check_env(seed: int | None, nofork: bool = False, cases: list[int] | None = None,
              then_bench: bool = False) -> dict[str, str]:
    """The Check variables of a run: the mode (CK_FORK), SEED only when replaying,
    STENCIL_CASES when only some cases run, and protocol.THEN_BENCH_ENV when a one-process run is
    to time the kernel after its cases.  Every other CK_* variable is left out (the sandbox's
    environment starts empty)."""
    env = {"CK_FORK": "no" if nofork else "yes"}
    if then_bench:
        env[protocol.THEN_BENCH_ENV] = "1"
    if seed is not None:
        env["SEED"] = str(seed)
    if cases is not None:
        env["STENCIL_CASES"] = ",".join(map(str, cases))
    return env


@dataclass
class _Phase:
    """One check process: what came back, and the cases it was asked to run (None: all)."""

    run: process.Completed
    stream: CheckStream
    cases: list[int] | None = None


def _run_one(jail, box, seconds: float, env: dict[str, str], stream: CheckStream,
             cases: list[int] | None = None, threads: int | None = None) -> _Phase:
    run = process.run([jail.program("check")], seconds, env=jail.env(env, threads), cwd=jail.work, sandbox=box,
                      watch=stream, channel=True, gate=stream if stream.take is not None else None)
    return _Phase(run, stream, cases)


def to_rerun(listed: list[ListedCase], tests: list[XmlTest]) -> list[int]:
    """The cases (table indices) phase 2 runs again alone: from the first case phase 1 did not end
    cleanly (a crash, a timeout, no result) on, each that did not pass.  A case that failed cleanly
    before it stands: alone it would cost a CUDA context for the same verdict."""
    seen = {(t.tcase, t.iteration): classify(t.result, t.message) for t in tests}
    rerun, damaged = [], False
    for case in listed:
        outcome = seen.get((case.tcase, case.iteration))
        damaged = damaged or outcome not in ("pass", "fail")
        if damaged and outcome != "pass":
            rerun.append(case.iteration)
    return rerun


def rerun_split(cases: int, threads: int) -> tuple[int, int]:
    """(check processes, OpenMP threads each) of phase 2 for `cases` cases to run again within a
    grading's budget of `threads` CPU threads: at most RERUN_PROCESSES processes, never more
    threads in all than the budget (each process has at least one)."""
    processes = max(1, min(RERUN_PROCESSES, cases, threads))
    return processes, max(1, threads // processes)


def run_check(build_dir: Path, suite_timeout_s: float, seed: int | None = None,
              case_timeout_s: float | None = None,
              on_start: Callable[[int, dict], None] | None = None,
              env: dict[str, str] | None = None, bench_timeout_s: float | None = None,
              on_bench: Callable[[], None] | None = None, take: Callable[[], None] | None = None) -> CheckRun:
    """List and run BUILD_DIR/check in a sandbox, in the two phases of the module docstring; the
    results used are kept as BUILD_DIR/check.xml.  suite_timeout_s, case_timeout_s: lab.json's
    check limits (seconds); on_start(seed, device) once phase 1 found its GPU; env: added to the
    sandbox's environment (a pool's CUDA_VISIBLE_DEVICES); bench_timeout_s (lab.json
    bench.timeout_s): phase 1 times the kernel once every case passed (CheckRun.bench; its JSON
    kept as BUILD_DIR/bench.json), on_bench() called when it starts.  take: blocks until the GPU
    is held for this grading (locks.Slot.take; may be called again): phase 1 makes its CUDA start
    first and runs its cases once take() returned (protocol.GO_FD_ENV), and phase 2 runs after it.
    Never raises for the program's behaviour (CheckRun.status)."""
    build_dir = Path(build_dir)
    check = build_dir / "check"
    (build_dir / "check.xml").unlink(missing_ok=True)     # no stale log from an earlier run
    (build_dir / "bench.json").unlink(missing_ok=True)
    try:
        box = sandbox.plan_sandbox(suite_timeout_s + (bench_timeout_s or 0.0))
        with sandbox.SandboxDir(box, [check], prefix="stencil-check-") as jail:
            return _run_phases(build_dir, check, jail, box, suite_timeout_s, seed, case_timeout_s, on_start,
                               dict(env or {}), bench_timeout_s, on_bench, take)
    except sandbox.SandboxError as err:
        return CheckRun(cases=[], seed=seed, status="error", message=f"the sandbox could not be set up: {err}",
                        list_error=f"not run: {err}")


def _run_phases(build_dir: Path, check: Path, jail, box, suite_timeout_s: float, seed: int | None,
                case_timeout_s: float | None, on_start, extra: dict[str, str],
                bench_timeout_s: float | None, on_bench, take: Callable[[], None] | None) -> CheckRun:
    """run_check's two phases, in the sandbox directory jail."""
    phases: dict[str, float] = {}
    listed, list_error = list_cases(check, jail)
    start = time.monotonic()
    first = _run_one(jail, box, suite_timeout_s + (bench_timeout_s or 0.0),
                     {**extra, **check_env(seed, nofork=True, then_bench=bench_timeout_s is not None)},
                     CheckStream(case_timeout_s, on_start, nofork=True, bench_timeout_s=bench_timeout_s,
                                 suite_timeout_s=suite_timeout_s if bench_timeout_s is not None else None,
                                 on_bench=on_bench, take=take))
    ended = time.monotonic()
    if take is not None:
        take()                         # phase 1 ended before its go (no GPU, a crash): the GPU, for phase 2
    start += first.run.gated_s         # its CUDA start, and the wait for the GPU, are not the cases'
    if first.run.gated_s:
        phases["before_go"] = first.run.gated_s
    phases["one_process"] = ended - start
    timed = None
    if first.stream.bench_started is not None:
        # The harness wrote the line only after every case passed: what follows is the timed run's, whose
        # ending (an exit status, a stop, a kill) is its own; the cases' part of the run ended there, cleanly.
        timed = bench.judge(first.run, bench_part(first.run.channel) or "", build_dir, box.layers,
                            ended - first.stream.bench_started, program="check")
        timed.output = ""                  # one process: what it printed is the check run's (CheckRun.output)
        phases["one_process"] = first.stream.bench_started - start
        first = replace(first, run=replace(first.run, returncode=protocol.EXIT_OK, timed_out=False, stopped=None))
    seed_used = first.stream.seed if first.stream.seed is not None else seed
    if first.run.returncode == protocol.EXIT_NO_GPU:
        why = process.tail_lines(first.run.stderr, 1).strip() or "check found no GPU"
        return CheckRun(cases=[], seed=seed_used, status="no_gpu", message=why, no_gpu=why,
                        exit_status=first.run.returncode, list_error=list_error,
                        seconds=first.run.seconds, sandbox=dict(box.layers), phases=phases,
                        output=process.program_output(first.run.stdout))
    rerun = to_rerun(listed, first.stream.tests)
    if first.run.error or (first.stream.stop_kind == "stall" and first.stream.device is not None):
        rerun = []                     # nothing can run: phase 1 says why; or a case ran past its timeout there
    later: list[_Phase] = []
    if rerun:
        start = time.monotonic()
        processes, threads = rerun_split(len(rerun), box.threads)
        groups = [rerun[i::processes] for i in range(processes)]
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            later = list(pool.map(lambda cases: _run_one(
                jail, box, suite_timeout_s, {**extra, **check_env(seed_used, cases=sorted(cases))},
                CheckStream(case_timeout_s), sorted(cases), threads), groups))
        phases["reruns"] = time.monotonic() - start
    checked = _combine(build_dir, listed, list_error, first, later, rerun, seed_used, box, phases)
    checked.bench = timed
    return checked


def _combine(build_dir: Path, listed: list[ListedCase], list_error: str | None, first: _Phase,
             later: list[_Phase], rerun: list[int], seed: int | None, box, phases: dict) -> CheckRun:
    """The CheckRun of phase 1's passes and phase 2's results (module docstring)."""
    again = set(rerun)
    tests = [t for t in first.stream.tests if t.iteration not in again or not listed]
    elements = [e for t, e in zip(first.stream.tests, first.stream.elements) if t in tests]
    runs = [first] + later
    ignored = 0
    for phase in later:
        pairs = list(zip(phase.stream.tests, phase.stream.elements))
        if phase.stream.stop_kind == "case_timeout":
            # Whatever arrived after its first timeout (before the kill landed) is not used:
            # the rule does not depend on how fast the stop was.
            cut = next(i for i, (t, _) in enumerate(pairs) if classify(t.result, t.message) == "timeout")
            pairs = pairs[:cut + 1]
        # Only the cases this process was asked to run count.
        asked = [(t, e) for t, e in pairs if phase.cases is None or t.iteration in phase.cases]
        ignored += len(pairs) - len(asked)
        tests += [t for t, _ in asked]
        elements += [e for _, e in asked]
    judged = later if rerun else [first]          # the runs whose endings decide the missing cases
    status, missing, reason, first_missing = "ok", "crash", "", None
    for phase in judged:
        s, m, why, fm = _ending(phase)
        if _WORSE.index(s) > _WORSE.index(status):
            status, missing, reason, first_missing = s, m, why, fm
    if not reason:
        ended = judged[0].run
        reason = f"no result: check {ended.describe()} without reporting this case"
    cases, notes = merge(listed, tests, missing, reason, first_missing)
    # One run stops at its first timeout, so the cases after it (in the table) did not run;
    # with the reruns spread over several processes the same rule is applied here.
    timeouts = [c.iteration for c in cases if c.outcome == "timeout"]
    stopped = any(p.run.stopped is not None or p.stream.stop_kind == "case_timeout" for p in judged)
    if timeouts and rerun:
        cases = [CaseResult(c.tcase, c.iteration, c.label, "not_run", NOT_RUN)
                 if c.iteration > min(timeouts) else c for c in cases]
    if not tests and status == "ok" and not first.run.error:
        status = "crash"
    if status == "ok" and any(c.outcome == "timeout" for c in cases):
        status = "timeout"
    message = "" if status == "ok" else f"check {judged[0].run.describe()}"
    stop = next((p.stream for p in judged if p.stream.stop_kind == "case_timeout"), None)
    if stop is not None:
        message = f"stopped at the first case timeout ({stop.stop_reason}); the cases after it did not run"
    if not tests and not first.run.error:
        message = (message + "; " if message else "") + "no test result was written"
    if elements:
        (build_dir / "check.xml").write_text(xml_log(elements))
    if ignored:
        notes.append(f"{ignored} result(s) for cases a rerun was not asked to run were ignored")
    if any(p.run.channel_overflow for p in runs):
        notes.append("check wrote more than the channel keeps; the rest was ignored")
    stderr = "\n".join(process.tail_lines(p.run.stderr, STDERR_TAIL_LINES) for p in runs if p.run.stderr.strip())
    return CheckRun(cases=cases, seed=seed, status=status, message=message,
                    exit_status=first.run.returncode, stderr_tail=process.tail_lines(stderr, STDERR_TAIL_LINES),
                    list_error=list_error if not first.run.error else (list_error or f"not run: {first.run.error}"),
                    seconds=sum(p.run.seconds for p in runs),
                    xml_log=build_dir / "check.xml" if elements else None,
                    stopped_early=stopped or bool(timeouts and rerun), notes=notes, sandbox=dict(box.layers),
                    device=first.stream.device, output=process.program_output("".join(p.run.stdout for p in runs)),
                    reruns=sorted(rerun), phases=phases)


#: Endings from best to worst; a combined run takes the worst of its processes'.
_WORSE = ("ok", "crash", "timeout", "error")


def _ending(phase: _Phase) -> tuple[str, str, str, tuple[str, str] | None]:
    """(status, outcome of a case it never reported, why, outcome of the first such case)."""
    run, stream = phase.run, phase.stream
    if run.error:
        return "error", "crash", f"not run: {run.error}", None
    if stream.stop_kind == "suite_timeout":       # the process's limit covers a timed run too
        return _suite_timeout(stream.suite_timeout_s)
    if run.stopped is not None or stream.stop_kind == "case_timeout":
        if stream.stop_kind == "stall" and stream.nofork:
            return ("timeout", "not_run", NOT_RUN,
                    ("timeout", f"no result: this case ran past its timeout ({stream.stop_reason}; lab.json "
                                "check.case_timeout_s) and the run was stopped"))
        if stream.stop_kind == "stall":
            return ("timeout", "not_run", NOT_RUN,
                    ("timeout", f"no result: the run was stuck ({stream.stop_reason}, "
                                f"{STALL_CASE_TIMEOUTS}x the case timeout) and was stopped"))
        return "timeout", "not_run", NOT_RUN, None
    if run.timed_out:
        return _suite_timeout(run.timeout_s)
    if run.returncode not in (protocol.EXIT_OK, protocol.EXIT_FAILED):
        return "crash", "crash", f"no result: check {run.describe()} before reporting this case", None
    return "ok", "crash", f"no result: check {run.describe()} without reporting this case", None


def _suite_timeout(limit_s: float) -> tuple[str, str, str, None]:
    return ("timeout", "timeout", f"no result: the check run passed its limit of {limit_s:g} s "
            "(lab.json check.suite_timeout_s) and was killed", None)
