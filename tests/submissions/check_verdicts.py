#!/usr/bin/env python3
"""Grade every known submission and compare its verdict with the expected one.

    python3 tests/submissions/check_verdicts.py [--lab 01-naive-5pt] [NAME ...]

For every tests/submissions/<lab>/expected.json, of the form

    {"<submission folder>": {"verdict": "pass", "needs_gpu": true, "why": "..."}, ...}

the folder tests/submissions/<lab>/<submission folder>/ (holding kernel.cu) is
graded by the lab pipeline in a temporary build directory.  "verdict" is one of
the grader's verdicts (stencil_grader/score.py), or "correct": every case
passes, and the timing may give "pass" or "slow".  One line per
submission, then `N passed, N failed, N skipped`; exit status 1 on any failure.

Without a GPU an entry with "needs_gpu": true is reported as not measured
(skipped): neither passed nor failed, unless its build or static check already
gives a verdict that differs from the expected one.  Without the build tooling
(grader/lab.mk, make, nvcc, Check) every entry is skipped, with the reason.

Plain Python, so it runs on a GPU machine without pytest; the pytest suite
parametrizes over collect() and calls check_entry() (tests/python/test_submissions.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

KIT_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(KIT_ROOT / "grader"))

from stencil_grader.base import labspec
from stencil_grader.grading import pipeline, score, symbols  # noqa: E402  (needs the path above)

#: Verdicts a build and static checks settle without a GPU.
_SETTLED_WITHOUT_GPU = ("compile_error", "forbidden")
#: Expected verdicts that stand for several of the grader's.
META_VERDICTS = {"correct": ("pass", "slow")}


@dataclass
class Entry:
    lab: str
    name: str
    path: Path
    verdict: str
    needs_gpu: bool
    why: str

    @property
    def id(self) -> str:
        return f"{self.lab}/{self.name}"


@dataclass
class Outcome:
    """status: "passed", "failed" or "skipped"; verdict: what the grader said (None if not graded)."""

    status: str
    verdict: str | None
    message: str


class ExpectedError(ValueError):
    """An expected.json that is not JSON or does not follow the format above."""


def collect(kit_root: Path = KIT_ROOT, lab: str | None = None) -> list[Entry]:
    """Every entry of every tests/submissions/<lab>/expected.json (sorted); raises ExpectedError."""
    entries = []
    for expected in sorted((Path(kit_root) / "tests" / "submissions").glob("*/expected.json")):
        lab_name = expected.parent.name
        if lab and lab_name != lab:
            continue
        try:
            table = json.loads(expected.read_text())
        except json.JSONDecodeError as err:
            raise ExpectedError(f"{expected}: not valid JSON: {err.msg} at line {err.lineno}") from None
        if not isinstance(table, dict):
            raise ExpectedError(f"{expected}: must be an object of submission folder -> expectation")
        for name, item in sorted(table.items()):
            allowed = score.VERDICTS + tuple(META_VERDICTS)
            if not isinstance(item, dict) or item.get("verdict") not in allowed \
                    or not isinstance(item.get("needs_gpu"), bool):
                raise ExpectedError(f"{expected}: {name} must be {{\"verdict\": one of "
                                    f"{', '.join(allowed)}, \"needs_gpu\": true|false, "
                                    f"\"why\": text}}, got {json.dumps(item)}")
            entries.append(Entry(lab_name, name, expected.parent / name, item["verdict"],
                                 item["needs_gpu"], str(item.get("why", ""))))
    return entries


def tooling_missing(kit_root: Path = KIT_ROOT) -> str | None:
    """Why real lab builds cannot run here (None when they can)."""
    if not (Path(kit_root) / "grader" / "lab.mk").is_file():
        return "grader/lab.mk does not exist yet"
    if not shutil.which("make"):
        return "make is not installed"
    if not symbols.find_nvcc():
        return "nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)"
    try:
        found = subprocess.run(["pkg-config", "--exists", "check"], timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        found = False
    if not found:
        return "the Check library is not installed (pkg-config check)"
    return None


def check_entry(entry: Entry, kit_root: Path = KIT_ROOT, check_tooling: bool = True) -> Outcome:
    """Grade one submission and compare its verdict with the expected one.

    check_tooling: skip (with the reason) when tooling_missing() says real builds cannot run.
    """
    missing = tooling_missing(kit_root) if check_tooling else None
    if missing:
        return Outcome("skipped", None, f"build tooling missing: {missing}")
    lab_dir = Path(kit_root) / "labs" / entry.lab
    if not (lab_dir / "lab.json").is_file():
        return Outcome("failed", None, f"no lab {entry.lab} (labs/{entry.lab}/lab.json)")
    if not (entry.path / "kernel.cu").is_file():
        return Outcome("failed", None, f"{entry.path}/kernel.cu does not exist")
    with tempfile.TemporaryDirectory(prefix=f"verdict-{entry.lab}-") as tmp:
        run = pipeline.grade_lab(lab_dir, str(entry.path), Path(tmp) / "build")
    got = run.score.verdict
    matched = got in META_VERDICTS.get(entry.verdict, (entry.verdict,))
    detail = f"verdict {got}, expected {entry.verdict}"
    no_gpu = run.probe is not None and run.probe.status == "no_gpu"
    if no_gpu and entry.needs_gpu and not (got in _SETTLED_WITHOUT_GPU and not matched):
        return Outcome("skipped", got, f"not measured ({run.not_measured}); {detail}")
    if matched:
        return Outcome("passed", got, detail)
    messages = [run.score.correctness.message, run.score.performance.message] + run.score.messages
    said = " ".join("; ".join(m for m in messages if m).split())      # one line
    return Outcome("failed", got, f"{detail} ({entry.why}): {said[:400]}")


def main(argv: list[str] | None = None, kit_root: Path = KIT_ROOT, check_tooling: bool = True) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", help="only this lab's submissions")
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these submission folders")
    args = parser.parse_args(argv)
    try:
        entries = collect(kit_root, args.lab)
    except ExpectedError as err:
        print(f"check_verdicts.py: {err}", file=sys.stderr)
        return 2
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    words = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
    for entry in entries:
        if args.names and entry.name not in args.names:
            continue
        try:
            outcome = check_entry(entry, kit_root, check_tooling)
        except labspec.LabSpecError as err:
            outcome = Outcome("failed", None, str(err))
        counts[outcome.status] += 1
        print(f"{words[outcome.status]}  {entry.id:<48} {outcome.message}", flush=True)
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
