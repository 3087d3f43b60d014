"""Run a lab's Check suite (BUILD_DIR/check) and read what it reported.

`check --list` gives the cases (tcase, iteration, label) without touching the
GPU.  `check` then reports on the grader's private channel (base/process.py):
`seed: N`, in one-process mode `device: {...}` (the GPU), and Check's XML log,
one flushed <test> element per case.  The grader reads that stream as it
arrives, through a pipe the run cannot rewrite afterwards; stdout belongs to
the student's code (a kernel's printf), and is kept as their program's output.

Two phases, so that a correct submission pays for one CUDA context, not one
per case, while every case that goes wrong is judged exactly as alone:

1. one process (CK_FORK=no): every case in turn, CUDA initialised once.  It
   first looks for a GPU (exit status EXIT_NO_GPU: none, and nothing runs).
   Check has no timeouts in this mode, so the grader stops the run when a
   case has gone on longer than the case timeout (plus NOFORK_SLACK_S).
2. fork mode, only when phase 1 did not pass every case: each case that did
   not pass (failed, crashed, timed out, or never reported because the process
   died or was stopped) runs again in a child process of its own, with Check's
   per-case timeout, in up to RERUN_PROCESSES check processes at once
   (STENCIL_CASES names each one's cases).  Its result replaces phase 1's: a
   crash costs only its case, and a case after an out-of-bounds write or a
   sticky CUDA error is judged on its own.  A case that passed in phase 1
   passed every cell against the CPU reference on its own fresh input; it
   stands.

Outcome of each case:

    pass     Check: success
    fail     Check: failure (an incorrect result; the message starts with the case label)
    timeout  Check: error TIMEOUT_MESSAGE, or the whole run passed its limit
    crash    Check: error SIGNAL_MESSAGE... or EARLY_EXIT_MESSAGE..., a failure whose
             message starts "CUDA error:", no result at all, or a case reported more
             often than it was listed (something else wrote to the stream)
    not_run  an earlier case (in the lab's table) timed out: as with one run that
             stops at its first timeout, the cases after it count as not run

A case the runs never reported is never a pass, and a result for a case that
`--list` did not name is never counted.  Every program runs in the sandbox of
base/sandbox.py.
"""

from __future__ import annotations

import codecs
import json
import re
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..base import process, sandbox

from ..base import protocol

CHECK_NS = "http://check.sourceforge.net/ns"
LIST_TIMEOUT_S = 30.0
#: How Check 0.15 words the errors it makes itself (check_run.c and check_msg.c of its source);
#: tests/python/test_checkrun.py runs the real library to prove these are its words.
TIMEOUT_MESSAGE = "Test timeout expired"
SIGNAL_MESSAGE = "Received signal"
EARLY_EXIT_MESSAGE = "Early exit with return value"
#: Phase 1: a case running this much longer than the case timeout is stopped (Check times
#: nothing without fork); the rest of the run then happens in phase 2.
NOFORK_SLACK_S = 2.0
#: Phase 2: check processes at once, each forking its cases one at a time.
RERUN_PROCESSES = 8
#: The student's own output (stdout of the runs) kept for the report.
OUTPUT_MAX_BYTES = 16 * 1024
OUTCOMES = ("pass", "fail", "timeout", "crash", "not_run")
STDERR_TAIL_LINES = 40
NOT_RUN = "not run: an earlier case timed out"
#: Without a new result for this many case timeouts (plus STALL_SLACK_S), the run is stopped.
STALL_CASE_TIMEOUTS = 2
STALL_SLACK_S = 10.0
_MAX_PENDING = 1 << 20       # bytes of stream kept while waiting for a </test> (a printf flood is cut)

_SEED = re.compile(r"^seed: (\d+)\s*$", re.MULTILINE)
_SEED_LINE = re.compile(r"^seed: (\d+)[ \t\r]*\n", re.MULTILINE)     # a whole line: the stream comes in pieces
_DEVICE_LINE = re.compile(r"^device: (\{.*\})[ \t\r]*\n", re.MULTILINE)
_TEST_ELEMENT = re.compile(r"<test\b[^>]*>.*?</test>", re.DOTALL)


@dataclass
class ListedCase:
    tcase: str
    iteration: int
    label: str


@dataclass
class XmlTest:
    """One <test> element of Check's XML log."""

    tcase: str          # <description>
    iteration: int
    result: str         # success, failure or error
    message: str
    duration_s: float | None   # Check writes -1 for a test that did not finish normally
    test_id: str = ""   # <id>: the test function


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
    """Everything one `check` run told us.

    status: "ok" (every run ended by itself with exit status 0 or 1), "no_gpu"
        (phase 1 found no GPU: nothing ran), "timeout" (a case timed out), "crash"
        (any other ending) or "error" (the program could not be run).
    no_gpu: why there is no GPU, when status is "no_gpu".
    device: the GPU phase 1 ran on (the `device:` line: name, cc, sm_count, ...).
    sandbox: the sandbox layers the runs had (sandbox.Sandbox.layers).
    exit_status: phase 1's exit status (None when killed or not started).
    output: what the student's code printed (stdout of the runs), at most OUTPUT_MAX_BYTES.
    reruns: the cases run again in fork mode (table indices); phases: wall seconds of each.
    """

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

    @property
    def passed(self) -> int:
        return sum(c.outcome == "pass" for c in self.cases)

    @property
    def total(self) -> int:
        return len(self.cases)

    def by_tcase(self) -> dict[str, list[CaseResult]]:
        """Cases grouped by tcase, in the order they were listed."""
        groups: dict[str, list[CaseResult]] = {}
        for case in self.cases:
            groups.setdefault(case.tcase, []).append(case)
        return groups


def parse_list(text: str) -> list[ListedCase]:
    """Cases from `check --list` output: one `<tcase>\\t<iteration>\\t<label>` per line.

    Lines of any other shape are ignored.
    """
    cases = []
    for line in text.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3 and parts[1].strip().isdigit():
            cases.append(ListedCase(parts[0], int(parts[1]), parts[2].strip()))
    return cases


def list_cases(check: Path, box: sandbox.SandboxDir | None = None) -> tuple[list[ListedCase], str | None]:
    """Run `check --list` (30 s at most; in box when given); returns (cases, None) or ([], why it failed)."""
    if box is None:
        run = process.run([check, "--list"], LIST_TIMEOUT_S, env=check_env(None))
    else:
        run = process.run([box.program(check.name), "--list"], LIST_TIMEOUT_S, env=box.env(check_env(None)),
                       cwd=box.work, sandbox=box.box)
    if run.error or run.timed_out or run.returncode != 0:
        return [], f"`check --list` {run.describe()}: {process.tail_lines(run.stderr, 5)}".rstrip(": ")
    cases = parse_list(run.stdout)
    if not cases:
        return [], "`check --list` printed no case"
    return cases, None


def parse_seed(stdout: str) -> int | None:
    """N from the first `seed: N` line, or None."""
    m = _SEED.search(stdout)
    return int(m.group(1)) if m else None


def parse_test_element(text: str) -> XmlTest | None:
    """One `<test ...>...</test>` element of Check's XML log, or None when it does not parse.

    Works on an element cut out of the log (no namespace declaration) as well
    as on one inside it.
    """
    try:
        node = ET.fromstring(text)
    except ET.ParseError:
        return None

    def child(tag: str) -> str:
        element = node.find(f"{{{CHECK_NS}}}{tag}")
        if element is None:
            element = node.find(tag)
        return (element.text or "") if element is not None else ""
    try:
        iteration = int(child("iteration") or 0)
    except ValueError:
        iteration = 0
    try:
        duration = float(child("duration"))
    except ValueError:
        duration = None
    return XmlTest(child("description"), iteration, node.get("result", ""), child("message"),
                   duration if duration is None or duration >= 0 else None, child("id"))


def parse_check_xml(text: str) -> list[XmlTest]:
    """The <test> results of a Check XML log (or of a stream holding one), in order.

    Every complete `<test>` element counts, whatever surrounds it: the seed line
    and Check's own summary share the stream, and a run that was killed leaves
    the log cut short.  Returns [] when there is none.
    """
    tests = []
    for m in _TEST_ELEMENT.finditer(text):
        test = parse_test_element(_qualified(m.group(0)))
        if test is not None:
            tests.append(test)
    return tests


def _qualified(element: str) -> str:
    """The element with Check's namespace declared on it, so that it parses on its own."""
    return element.replace("<test", f'<test xmlns="{CHECK_NS}"', 1) if "xmlns" not in element[:200] \
        else element


class CheckStream:
    """Reads check's channel as it arrives (a process.Watch).

    Keeps the seed, the device line, each complete <test> result and its raw
    text (for the XML log kept in BUILD_DIR), and asks the run to stop:
      - fork mode: at the first case that times out, or when no result arrived
        for STALL_CASE_TIMEOUTS case timeouts plus STALL_SLACK_S (Check's own
        timer did not fire: the run is stuck);
      - one-process mode (nofork=True): when no result arrived for one case
        timeout plus NOFORK_SLACK_S (Check times nothing there).
    """

    def __init__(self, case_timeout_s: float | None, on_start: Callable[[int, dict], None] | None = None,
                 nofork: bool = False):
        if not case_timeout_s:
            self.stall_s = None
        elif nofork:
            self.stall_s = case_timeout_s + NOFORK_SLACK_S
        else:
            self.stall_s = STALL_CASE_TIMEOUTS * case_timeout_s + STALL_SLACK_S
        self.nofork = nofork
        self.on_start = on_start             # called once with (seed, device) when the GPU is found
        self.seed: int | None = None
        self.device: dict | None = None
        self.tests: list[XmlTest] = []
        self.elements: list[str] = []
        self.stop_kind: str | None = None      # "case_timeout" or "stall"
        self.stop_reason: str | None = None
        self._head = ""
        self._pending = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lock = threading.Lock()
        self._last = time.monotonic()

    def feed(self, chunk: bytes) -> None:
        text = self._decoder.decode(chunk)
        with self._lock:
            if (self.seed is None or (self.nofork and self.device is None)) and len(self._head) < 16384:
                self._head += text
                if self.seed is None and (m := _SEED_LINE.search(self._head)):
                    self.seed = int(m.group(1))
                if self.device is None and (m := _DEVICE_LINE.search(self._head)):
                    try:
                        self.device = json.loads(m.group(1))
                    except json.JSONDecodeError:
                        self.device = {}
                    self._last = time.monotonic()          # the cases start after the GPU is found
                    if self.on_start and self.seed is not None:
                        self.on_start(self.seed, self.device if isinstance(self.device, dict) else {})
            self._pending += text
            last = 0
            for m in _TEST_ELEMENT.finditer(self._pending):
                last = m.end()
                test = parse_test_element(_qualified(m.group(0)))
                if test is None:
                    continue
                self.tests.append(test)
                self.elements.append(m.group(0))
                self._last = time.monotonic()
                if self.stop_kind is None and classify(test.result, test.message) == "timeout":
                    self.stop_kind = "case_timeout"
                    self.stop_reason = f"case {test.tcase} #{test.iteration} timed out"
            self._pending = self._pending[last:]
            if len(self._pending) > _MAX_PENDING:
                start = self._pending.rfind("<test", len(self._pending) - _MAX_PENDING // 4)
                self._pending = self._pending[start:] if start >= 0 else self._pending[-256:]

    def poll(self, now: float) -> str | None:
        with self._lock:
            if self.stop_kind is None and self.stall_s is not None and now - self._last > self.stall_s:
                self.stop_kind = "stall"
                self.stop_reason = f"no result for {self.stall_s:g} s"
            return self.stop_reason

    def xml_log(self) -> str:
        """A well-formed Check XML log of the results received."""
        return xml_log(self.elements)


def xml_log(elements: list[str]) -> str:
    """A well-formed Check XML log of these <test> elements."""
    body = "".join(f"    {e}\n" for e in elements)
    return (f'<?xml version="1.0"?>\n<testsuites xmlns="{CHECK_NS}">\n  <suite>\n'
            f"    <title>check</title>\n{body}  </suite>\n</testsuites>\n")


def classify(result: str, message: str) -> str:
    """The outcome of one Check result (see the module docstring; never "not_run")."""
    if result == "success":
        return "pass"
    if message.startswith("CUDA error:"):
        return "crash"
    if result == "failure":
        return "fail"
    if message.startswith(TIMEOUT_MESSAGE):
        return "timeout"
    return "crash"          # SIGNAL_MESSAGE, EARLY_EXIT_MESSAGE, anything else Check says


def merge(listed: list[ListedCase], tests: list[XmlTest], missing_outcome: str,
          missing_reason: str, first_missing: tuple[str, str] | None = None) -> tuple[list[CaseResult], list[str]]:
    """One CaseResult per listed case, matched to the XML by (tcase, iteration); and notes.

    A listed case with no XML result gets missing_outcome and missing_reason,
    except the first such case, which gets first_missing (outcome, reason) when
    given (the case a stalled run was stuck in).  A case reported more often
    than listed is a crash (something besides Check wrote results to its
    stream).  Results for cases that were not listed are left out (a note says
    how many), unless nothing was listed, when every result is kept.
    """
    reported: dict[tuple[str, int], list[XmlTest]] = {}
    for test in tests:
        reported.setdefault((test.tcase, test.iteration), []).append(test)
    listed_count: dict[tuple[str, int], int] = {}
    for item in listed:
        key = (item.tcase, item.iteration)
        listed_count[key] = listed_count.get(key, 0) + 1
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


def check_env(seed: int | None, nofork: bool = False, cases: list[int] | None = None) -> dict[str, str]:
    """The Check variables of a run: the mode (CK_FORK), SEED only when replaying, and
    STENCIL_CASES when only some cases run.  Every other CK_* variable is left out (the
    sandbox's environment starts empty)."""
    env = {"CK_FORK": "no" if nofork else "yes"}
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
             cases: list[int] | None = None) -> _Phase:
    run = process.run([jail.program("check")], seconds, env=jail.env(env), cwd=jail.work, sandbox=box,
                      watch=stream, channel=True)
    return _Phase(run, stream, cases)


def _cut_output(parts: list[str]) -> str:
    text = "".join(parts)
    if len(text) <= OUTPUT_MAX_BYTES:
        return text
    return text[:OUTPUT_MAX_BYTES] + f"\n[... {len(text) - OUTPUT_MAX_BYTES} more bytes not shown ...]\n"


def run_check(build_dir: Path, suite_timeout_s: float, seed: int | None = None,
              case_timeout_s: float | None = None,
              on_start: Callable[[int, dict], None] | None = None,
              env: dict[str, str] | None = None) -> CheckRun:
    """List and run BUILD_DIR/check in a sandbox, in the two phases of the module docstring;
    the XML log of the results used is kept as BUILD_DIR/check.xml.

    suite_timeout_s: seconds each check process may take (lab.json check.suite_timeout_s);
    case_timeout_s: Check's per-case timeout (lab.json check.case_timeout_s), for the
    watchdogs; on_start: called with the seed and the device (check's `device:` line, a dict) once
    the one-process run has found its GPU, before the first case (never without a GPU); env: added to the
    sandbox's environment (CUDA_VISIBLE_DEVICES of the GPU a pool handed out).
    Never raises for the program's behaviour; see CheckRun.status.
    """
    build_dir = Path(build_dir)
    check = build_dir / "check"
    (build_dir / "check.xml").unlink(missing_ok=True)     # no stale log from an earlier run
    box = sandbox.plan_sandbox(suite_timeout_s)
    extra = dict(env or {})
    phases: dict[str, float] = {}
    with sandbox.SandboxDir(box, [check], prefix="stencil-check-") as jail:
        listed, list_error = list_cases(check, jail)
        start = time.monotonic()
        first = _run_one(jail, box, suite_timeout_s, {**extra, **check_env(seed, nofork=True)},
                         CheckStream(case_timeout_s, on_start, nofork=True))
        phases["one_process"] = time.monotonic() - start
        seed_used = first.stream.seed if first.stream.seed is not None else seed
        if first.run.returncode == protocol.EXIT_NO_GPU:
            why = process.tail_lines(first.run.stderr, 1).strip() or "check found no GPU"
            return CheckRun(cases=[], seed=seed_used, status="no_gpu", message=why, no_gpu=why,
                            exit_status=first.run.returncode, list_error=list_error,
                            seconds=first.run.seconds, sandbox=dict(box.layers), phases=phases,
                            output=_cut_output([first.run.stdout]))
        good = {(t.tcase, t.iteration) for t in first.stream.tests if t.result == "success"}
        rerun = [c.iteration for c in listed if (c.tcase, c.iteration) not in good]
        if first.run.error:
            rerun = []                                      # nothing can run: phase 1 says why
        later: list[_Phase] = []
        if rerun:
            start = time.monotonic()
            groups = [rerun[i::RERUN_PROCESSES] for i in range(min(RERUN_PROCESSES, len(rerun)))]
            with ThreadPoolExecutor(max_workers=len(groups)) as pool:
                later = list(pool.map(lambda cases: _run_one(
                    jail, box, suite_timeout_s, {**extra, **check_env(seed_used, cases=sorted(cases))},
                    CheckStream(case_timeout_s), sorted(cases)), groups))
            phases["reruns"] = time.monotonic() - start
    return _combine(build_dir, listed, list_error, first, later, rerun, seed_used, box, phases)


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
        s, m, why, fm = _ending(phase, len(later) > 0)
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
                    device=first.stream.device, output=_cut_output([p.run.stdout for p in runs]),
                    reruns=sorted(rerun), phases=phases)


#: Endings from best to worst; a combined run takes the worst of its processes'.
_WORSE = ("ok", "crash", "timeout", "error")


def _ending(phase: _Phase, forked: bool) -> tuple[str, str, str, tuple[str, str] | None]:
    """(status, outcome of a case it never reported, why, outcome of the first such case)."""
    run, stream = phase.run, phase.stream
    if run.error:
        return "error", "crash", f"not run: {run.error}", None
    if run.stopped is not None or stream.stop_kind == "case_timeout":
        if stream.stop_kind == "stall":
            return ("timeout", "not_run", NOT_RUN,
                    ("timeout", f"no result: the run was stuck ({stream.stop_reason}, "
                                f"{STALL_CASE_TIMEOUTS}x the case timeout) and was stopped"))
        return "timeout", "not_run", NOT_RUN, None
    if run.timed_out:
        return ("timeout", "timeout", f"no result: the check run passed its limit of {run.timeout_s:g} s "
                "(lab.json check.suite_timeout_s) and was killed", None)
    if run.returncode not in (protocol.EXIT_OK, protocol.EXIT_FAILED):
        return "crash", "crash", f"no result: check {run.describe()} before reporting this case", None
    return "ok", "crash", f"no result: check {run.describe()} without reporting this case", None
