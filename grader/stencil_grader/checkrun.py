"""Run a lab's Check suite (BUILD_DIR/check) and read what it reported.

`check --list` gives the cases (tcase, iteration, label) without touching the
GPU; `check` runs them, each in a forked child with Check's per-case timeout,
prints `seed: N` first, and writes Check's XML log where CK_XML_LOG_FILE_NAME
says.  Outcome of each case:

    pass     Check: success
    fail     Check: failure (an incorrect result; the message starts with the case label)
    timeout  Check: error "Test timeout expired", or the whole run passed its limit
    crash    Check: error "Received signal N (...)" or "Early exit with return value N",
             a failure whose message starts "CUDA error:", or no result at all

A case the run never reported is never a pass.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from . import proc

CHECK_NS = "http://check.sourceforge.net/ns"
LIST_TIMEOUT_S = 30.0
OUTCOMES = ("pass", "fail", "timeout", "crash")
STDERR_TAIL_LINES = 40

_SEED = re.compile(r"^seed: (\d+)\s*$", re.MULTILINE)


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

    status: "ok" (the run ended by itself with exit status 0 or 1), "timeout",
        "crash" (any other ending) or "error" (the program could not be run).
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


def list_cases(check: Path) -> tuple[list[ListedCase], str | None]:
    """Run `check --list` (30 s at most); returns (cases, None) or ([], why it failed)."""
    run = proc.run([check, "--list"], LIST_TIMEOUT_S, env=check_env(None, None))
    if run.error or run.timed_out or run.returncode != 0:
        return [], f"`check --list` {run.describe()}: {proc.tail_lines(run.stderr, 5)}".rstrip(": ")
    cases = parse_list(run.stdout)
    if not cases:
        return [], "`check --list` printed no case"
    return cases, None


def parse_seed(stdout: str) -> int | None:
    """N from the first `seed: N` line, or None."""
    m = _SEED.search(stdout)
    return int(m.group(1)) if m else None


def parse_check_xml(text: str) -> list[XmlTest]:
    """The <test> results of a Check XML log, in file order.

    Check writes the log as the run goes, so a run that was killed leaves it
    cut short: everything up to the last complete </test> is still read.
    Returns [] when nothing can be read.
    """
    root = _parse_xml(text)
    if root is None:
        return []
    tests = []
    for node in root.iter(f"{{{CHECK_NS}}}test"):
        def child(tag: str) -> str:
            element = node.find(f"{{{CHECK_NS}}}{tag}")
            return (element.text or "") if element is not None else ""
        try:
            iteration = int(child("iteration") or 0)
        except ValueError:
            iteration = 0
        try:
            duration = float(child("duration"))
        except ValueError:
            duration = None
        tests.append(XmlTest(child("description"), iteration, node.get("result", ""),
                             child("message"), duration if duration is None or duration >= 0 else None,
                             child("id")))
    return tests


def _parse_xml(text: str) -> ET.Element | None:
    try:
        return ET.fromstring(text)
    except ET.ParseError:
        pass
    end = text.rfind("</test>")
    start = text.find("<testsuites")
    if end < 0 or start < 0:
        return None
    try:
        return ET.fromstring(text[start:end + len("</test>")] + "</suite></testsuites>")
    except ET.ParseError:
        return None


def classify(result: str, message: str) -> str:
    """The outcome of one Check result (see the module docstring)."""
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
          missing_reason: str) -> list[CaseResult]:
    """One CaseResult per listed case, matched to the XML by (tcase, iteration).

    A listed case with no XML result gets missing_outcome and missing_reason;
    an XML result for a case that was not listed is added at the end.
    """
    reported: dict[tuple[str, int], list[XmlTest]] = {}
    for test in tests:
        reported.setdefault((test.tcase, test.iteration), []).append(test)
    cases = []
    for item in listed:
        matches = reported.get((item.tcase, item.iteration))
        if matches:
            test = matches.pop(0)
            cases.append(CaseResult(item.tcase, item.iteration, item.label,
                                    classify(test.result, test.message), test.message, test.duration_s))
        else:
            cases.append(CaseResult(item.tcase, item.iteration, item.label, missing_outcome, missing_reason))
    for (tcase, iteration), rest in reported.items():
        for test in rest:
            cases.append(CaseResult(tcase, iteration, f"{tcase} #{iteration}",
                                    classify(test.result, test.message), test.message, test.duration_s))
    return cases


def check_env(xml_log: Path | None, seed: int | None, tap_log: Path | None = None) -> dict[str, str]:
    """The environment of a check run: Check's own switches cleared (fork mode forced),
    the log files set, SEED set only when replaying."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CK_") and k != "SEED"}
    env["CK_FORK"] = "yes"
    if xml_log is not None:
        env["CK_XML_LOG_FILE_NAME"] = str(xml_log)
    if tap_log is not None:
        env["CK_TAP_LOG_FILE_NAME"] = str(tap_log)
    if seed is not None:
        env["SEED"] = str(seed)
    return env


def run_check(build_dir: Path, suite_timeout_s: float, seed: int | None = None) -> CheckRun:
    """List and run BUILD_DIR/check; its logs are kept as BUILD_DIR/check.xml and check.tap.

    suite_timeout_s: seconds the whole run may take (lab.json check.suite_timeout_s).
    Never raises for the program's behaviour; see CheckRun.status.
    """
    build_dir = Path(build_dir)
    check = build_dir / "check"
    listed, list_error = list_cases(check)
    for name in ("check.xml", "check.tap"):      # no stale log from an earlier run
        (build_dir / name).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="stencil-check-") as tmp:
        xml_path, tap_path = Path(tmp) / "check.xml", Path(tmp) / "check.tap"
        run = proc.run([check], suite_timeout_s, env=check_env(xml_path, seed, tap_path))
        xml_text = xml_path.read_text(errors="replace") if xml_path.is_file() else ""
        for path in (xml_path, tap_path):
            if path.is_file():
                shutil.copyfile(path, build_dir / path.name)
    tests = parse_check_xml(xml_text)

    if run.error:
        status, missing = "error", "crash"
        reason = f"not run: {run.error}"
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
    if not xml_text and not run.error:
        message = (message + "; " if message else "") + "no XML log was written"
    return CheckRun(cases=merge(listed, tests, missing, reason), seed=parse_seed(run.stdout),
                    status=status, message=message, exit_status=run.returncode,
                    stderr_tail=proc.tail_lines(run.stderr, STDERR_TAIL_LINES),
                    list_error=list_error, seconds=run.seconds,
                    xml_log=build_dir / "check.xml" if xml_text else None)
