"""Run a lab's Check suite (BUILD_DIR/check) and read what it reported.

`check --list` gives the cases (tcase, iteration, label) without touching the
GPU; `check` runs them, each in a forked child with Check's per-case timeout,
prints `seed: N` first, and writes Check's XML log to its standard output
(CK_XML_LOG_FILE_NAME=-, which Check 0.15 reads as stdout and flushes after
every test).  The grader reads that stream as it arrives, through a pipe the
run cannot rewrite afterwards, and stops the run at the first case that times
out: a hang costs one case timeout, not one per case.  Outcome of each case:

    pass     Check: success
    fail     Check: failure (an incorrect result; the message starts with the case label)
    timeout  Check: error "Test timeout expired", or the whole run passed its limit
    crash    Check: error "Received signal N (...)" or "Early exit with return value N",
             a failure whose message starts "CUDA error:", no result at all, or a case
             reported more often than it was listed (something else wrote to the stream)
    not_run  the run was stopped at an earlier case's timeout

A case the run never reported is never a pass, and a result for a case that
`--list` did not name is never counted.  Both programs run in the sandbox of
proc.py.
"""

from __future__ import annotations

import codecs
import re
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..base import process, sandbox

CHECK_NS = "http://check.sourceforge.net/ns"
LIST_TIMEOUT_S = 30.0
OUTCOMES = ("pass", "fail", "timeout", "crash", "not_run")
STDERR_TAIL_LINES = 40
NOT_RUN = "not run: an earlier case timed out"
#: Without a new result for this many case timeouts (plus STALL_SLACK_S), the run is stopped.
STALL_CASE_TIMEOUTS = 2
STALL_SLACK_S = 10.0
_MAX_PENDING = 1 << 20       # bytes of stream kept while waiting for a </test> (a printf flood is cut)

_SEED = re.compile(r"^seed: (\d+)\s*$", re.MULTILINE)
_SEED_LINE = re.compile(r"^seed: (\d+)[ \t\r]*\n", re.MULTILINE)     # a whole line: the stream comes in pieces
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

    status: "ok" (the run ended by itself with exit status 0 or 1), "timeout"
        (a case timed out and the run was stopped, or the run passed its limit),
        "crash" (any other ending) or "error" (the program could not be run).
    sandbox: the sandbox layers the run had (sandbox.Sandbox.layers).
    exit_status: check's exit status (None when killed or not started).
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
    """Reads check's standard output as it arrives (a process.Watch).

    Keeps the seed, each complete <test> result and its raw text (for the XML
    log kept in BUILD_DIR), and asks the run to stop at the first case that
    times out, or when no result arrived for STALL_CASE_TIMEOUTS case timeouts
    (Check's own timer did not fire: the run is stuck).
    """

    def __init__(self, case_timeout_s: float | None, on_seed: Callable[[int], None] | None = None):
        self.stall_s = (STALL_CASE_TIMEOUTS * case_timeout_s + STALL_SLACK_S) if case_timeout_s else None
        self.on_seed = on_seed
        self.seed: int | None = None
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
            if self.seed is None and len(self._head) < 4096:
                self._head += text
                if m := _SEED_LINE.search(self._head):
                    self.seed = int(m.group(1))
                    if self.on_seed:
                        self.on_seed(self.seed)
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
        body = "".join(f"    {e}\n" for e in self.elements)
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
    if message.startswith("Test timeout expired"):
        return "timeout"
    return "crash"


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


def check_env(seed: int | None) -> dict[str, str]:
    """The Check variables of a run: fork mode forced, the XML log on stdout, SEED only when
    replaying.  Every other CK_* variable is left out (the sandbox's environment starts empty)."""
    env = {"CK_FORK": "yes", "CK_XML_LOG_FILE_NAME": "-"}
    if seed is not None:
        env["SEED"] = str(seed)
    return env


def run_check(build_dir: Path, suite_timeout_s: float, seed: int | None = None,
              case_timeout_s: float | None = None,
              on_seed: Callable[[int], None] | None = None,
              env: dict[str, str] | None = None) -> CheckRun:
    """List and run BUILD_DIR/check in a sandbox; the XML log is kept as BUILD_DIR/check.xml.

    suite_timeout_s: seconds the whole run may take (lab.json check.suite_timeout_s);
    case_timeout_s: Check's per-case timeout (lab.json check.case_timeout_s), for the
    stall watchdog; on_seed: called with the seed as soon as check prints it.
    Never raises for the program's behaviour; see CheckRun.status.
    """
    build_dir = Path(build_dir)
    check = build_dir / "check"
    (build_dir / "check.xml").unlink(missing_ok=True)     # no stale log from an earlier run
    box = sandbox.plan_sandbox(suite_timeout_s)
    with sandbox.SandboxDir(box, [check], prefix="stencil-check-") as jail:
        listed, list_error = list_cases(check, jail)
        stream = CheckStream(case_timeout_s, on_seed)
        run = process.run([jail.program("check")], suite_timeout_s, env=jail.env({**(env or {}), **check_env(seed)}),
                       cwd=jail.work, sandbox=box, watch=stream)
    if stream.elements:
        (build_dir / "check.xml").write_text(stream.xml_log())
    tests = stream.tests
    stopped = run.stopped is not None or stream.stop_kind == "case_timeout"
    if stream.stop_kind == "case_timeout":
        # Whatever arrived after the first timeout (before the kill landed) is not used:
        # the rule does not depend on how fast the stop was.
        first = next(i for i, t in enumerate(tests) if classify(t.result, t.message) == "timeout")
        tests = tests[:first + 1]

    first_missing = None
    if run.error:
        status, missing = "error", "crash"
        reason = f"not run: {run.error}"
    elif stopped:
        status, missing, reason = "timeout", "not_run", NOT_RUN
        if stream.stop_kind == "stall":
            first_missing = ("timeout", f"no result: the run was stuck ({stream.stop_reason}, "
                                        f"{STALL_CASE_TIMEOUTS}x the case timeout) and was stopped")
    elif run.timed_out:
        status, missing = "timeout", "timeout"
        reason = (f"no result: the check run passed its limit of {suite_timeout_s:g} s "
                  "(lab.json check.suite_timeout_s) and was killed")
    elif run.returncode not in (0, 1):
        status, missing = "crash", "crash"
        reason = f"no result: check {run.describe()} before reporting this case"
    else:
        status, missing = "ok", "crash"
        reason = f"no result: check {run.describe()} without reporting this case"
    if not tests and not run.error and status == "ok":
        status = "crash"

    message = "" if status == "ok" else f"check {run.describe()}"
    if stopped and stream.stop_kind == "case_timeout":
        message = f"stopped at the first case timeout ({stream.stop_reason}); the cases after it did not run"
    if not tests and not run.error:
        message = (message + "; " if message else "") + "no test result was written"
    cases, notes = merge(listed, tests, missing, reason, first_missing)
    return CheckRun(cases=cases, seed=stream.seed, status=status, message=message,
                    exit_status=run.returncode, stderr_tail=process.tail_lines(run.stderr, STDERR_TAIL_LINES),
                    list_error=list_error, seconds=run.seconds,
                    xml_log=build_dir / "check.xml" if stream.elements else None,
                    stopped_early=stopped, notes=notes, sandbox=dict(box.layers))
