"""What a run of a lab's Check suite reports, read as it arrives: the cases `check --list` names,
the `seed:` and `device:` lines, Check's XML results (one flushed <test> element per case) and,
when every case passed and the grader asked, the line that starts the timed run in the same process
(protocol.BENCH_STARTED) and the bench's JSON after it, on the grader's private channel; and what
each result means (classify).

checkrun.py runs the suite and decides from these; CheckStream is the reader it hands each
process's channel (a process.Watch), with the watchdog that stops a stuck run.
"""

from __future__ import annotations

import codecs
import json
import re
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Callable

from ..base import protocol

CHECK_NS = "http://check.sourceforge.net/ns"
#: How Check 0.15 words the errors it makes itself (check_run.c and check_msg.c of its source);
#: tests/python/test_checkrun.py runs the real library to prove these are its words.
TIMEOUT_MESSAGE = "Test timeout expired"
SIGNAL_MESSAGE = "Received signal"
EARLY_EXIT_MESSAGE = "Early exit with return value"
#: One-process mode: a case running this much longer than the case timeout is stopped (Check
#: times nothing without fork); the rest of the run then happens in fork mode (checkrun.py).
NOFORK_SLACK_S = 2.0
#: Fork mode: without a new result for this many case timeouts (plus STALL_SLACK_S), the run is stopped.
STALL_CASE_TIMEOUTS = 2
STALL_SLACK_S = 10.0
_MAX_PENDING = 1 << 20       # bytes of stream kept while waiting for a </test> (a printf flood is cut)

_SEED_LINE = re.compile(r"^seed: (\d+)[ \t\r]*\n", re.MULTILINE)     # a whole line: the stream comes in pieces
_DEVICE_LINE = re.compile(r"^device: (\{.*\})[ \t\r]*\n", re.MULTILINE)
_TEST_ELEMENT = re.compile(r"<test\b[^>]*>.*?</test>", re.DOTALL)
_BENCH_LINE = re.compile(rf"^{re.escape(protocol.BENCH_STARTED)}[ \t\r]*\n", re.MULTILINE)


def bench_part(channel: str) -> str | None:
    """What follows the BENCH_STARTED line on a check run's channel (the timed run's JSON), or None
    when the run never started its timed run."""
    m = _BENCH_LINE.search(channel)
    return channel[m.end():] if m else None


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


def parse_list(text: str) -> list[ListedCase]:
    """Cases from `check --list` output (`<tcase>\\t<iteration>\\t<label>` lines; others ignored)."""
    rows = [line.split("\t", 2) for line in text.splitlines()]
    return [ListedCase(r[0], int(r[1]), r[2].strip()) for r in rows if len(r) == 3 and r[1].strip().isdigit()]


def parse_test_element(text: str) -> XmlTest | None:
    """One `<test ...>...</test>` element of Check's XML log (namespaced or not), or None when it
    does not parse."""
    try:
        node = ET.fromstring(text)
    except ET.ParseError:
        return None

    def child(tag: str) -> str:                     # in Check's namespace, or in none
        return getattr(node.find(f"{{*}}{tag}"), "text", None) or ""
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


class CheckStream:
    """Reads check's channel as it arrives (a process.Watch): the seed, the device line, each <test>
    result and its raw text, the start of the timed run (bench_started, monotonic seconds); asks the
    run to stop at the first case timeout (fork mode), when no result arrived for stall_s (STALL_* in
    fork mode, NOFORK_SLACK_S in one-process mode), when the cases ran past suite_timeout_s (given when
    the process's own limit also covers a timed run), or when the timed run ran past bench_timeout_s.
    Given `take`, it is also the run's process.Gate: the cases start once take() returned."""

    def __init__(self, case_timeout_s: float | None, on_start: Callable[[int, dict], None] | None = None,
                 nofork: bool = False, bench_timeout_s: float | None = None, suite_timeout_s: float | None = None,
                 on_bench: Callable[[], None] | None = None, take: Callable[[], None] | None = None):
        self.stall_s = None if not case_timeout_s else case_timeout_s + NOFORK_SLACK_S if nofork \
            else STALL_CASE_TIMEOUTS * case_timeout_s + STALL_SLACK_S
        self.nofork = nofork
        self.on_start = on_start             # called once with (seed, device) when the GPU is found
        self.on_bench = on_bench             # called once when the timed run starts
        self.take = take                     # with a gate: blocks until the GPU is held (open())
        self.seed: int | None = None
        self.device: dict | None = None
        self.tests: list[XmlTest] = []
        self.elements: list[str] = []       # each test's raw text
        self.bench_timeout_s, self.suite_timeout_s = bench_timeout_s, suite_timeout_s
        self.bench_started: float | None = None
        self.stop_kind: str | None = None      # "case_timeout", "stall", "suite_timeout" or "bench_timeout"
        self.stop_reason: str | None = None
        self._head, self._pending, self._last = "", "", time.monotonic()
        self._start = self._last
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lock = threading.Lock()

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
            if self.bench_started is not None:
                return                          # the bench's JSON: read whole from the channel (bench_part)
            self._pending += text
            last = 0
            for m in _TEST_ELEMENT.finditer(self._pending):
                last = m.end()
                test = parse_test_element(m.group(0))
                if test is None:
                    continue
                self.tests.append(test)
                self.elements.append(m.group(0))
                self._last = time.monotonic()
                if self.stop_kind is None and classify(test.result, test.message) == "timeout":
                    self.stop_kind, self.stop_reason = "case_timeout", f"case {test.tcase} #{test.iteration} timed out"
            self._pending = self._pending[last:]
            if _BENCH_LINE.search(self._pending):
                self.bench_started, self._pending = time.monotonic(), ""
                if self.on_bench:
                    self.on_bench()
            if len(self._pending) > _MAX_PENDING:
                start = self._pending.rfind("<test", len(self._pending) - _MAX_PENDING // 4)
                self._pending = self._pending[start:] if start >= 0 else self._pending[-256:]

    # A process.Gate for a one-process run whose cases start at the grader's go (run_check's `take`).
    ready_timeout_s = 60.0          # seconds a CUDA start may take, under contention on a big host

    def ready(self) -> bool:
        """Whether the run has made its CUDA start and waits for its go (its device line arrived)."""
        return self.device is not None

    def restart(self, now: float) -> None:
        """The go was given at now: the limits of the cases count from there."""
        with self._lock:
            self._start = self._last = now

    def open(self) -> None:
        """Blocks until this grading holds its GPU."""
        self.take()

    def poll(self, now: float) -> str | None:
        with self._lock:
            if self.stop_kind is None:
                self.stop_kind, self.stop_reason = self._overdue(now)
            return self.stop_reason

    def _overdue(self, now: float) -> tuple[str | None, str | None]:
        """(stop kind, reason) when a limit of poll's has passed, else (None, None)."""
        if self.bench_started is not None:               # timing: the timed run's limit alone
            if self.bench_timeout_s is not None and now - self.bench_started > self.bench_timeout_s:
                return "bench_timeout", f"the timed run passed its limit of {self.bench_timeout_s:g} s"
        elif self.suite_timeout_s is not None and now - self._start > self.suite_timeout_s:
            return "suite_timeout", f"the cases passed their limit of {self.suite_timeout_s:g} s"
        elif self.stall_s is not None and now - self._last > self.stall_s:
            return "stall", f"no result for {self.stall_s:g} s"
        return None, None


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
        return "crash"             # (a refused launch, protocol.LAUNCH_REFUSED, is a failure: "fail")
    if result == "failure":
        return "fail"
    if message.startswith(TIMEOUT_MESSAGE):
        return "timeout"
    return "crash"          # SIGNAL_MESSAGE, EARLY_EXIT_MESSAGE, anything else Check says
