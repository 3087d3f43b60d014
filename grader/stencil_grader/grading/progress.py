"""A student's progress over their attempts at one lab: the history of every grading (JSON Lines:
entry, append, read; its section of the report page is html.py's).

Histories: BUILD_DIR/history.jsonl (a student's make check) and
OUT/students/<student>/<lab>.history.jsonl (a class grading).  Only ever appended to: one write()
of a whole line, O_APPEND, under a POSIX lock (fcntl.lockf, which NFS passes between nodes); a line
cut short by a killed writer is skipped when read.  Units: ratio = effective / copy bandwidth.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import math
import os
from pathlib import Path

from ..base.files import sha256_of

#: The history of a build directory (a student's own make check).
BUILD_HISTORY = "history.jsonl"
#: What one line of a history holds (entry()).
HISTORY_KEYS = ("graded_at", "verdict", "points", "max_points", "ratio", "gbps", "copy_gbps", "gpu", "passed",
                "total", "source_sha256", "seed", "grader_version", "final")
#: Reports that are no grading of their own: nothing is appended for them.
NOT_AN_ATTEMPT = ("pending", "missing")
#: The longest line read back (a history line is about 400 bytes).
MAX_LINE = 1 << 16


def number(value) -> float | None:
    """value as a float when it is a finite number (not a bool), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def gpu_name(report: dict) -> str:
    """The model of the GPU a report's GPU stages ran on ("" when none ran): the name the pool
    handed out, else the one the check or bench program found."""
    section = report.get("gpu") or {}
    assigned, device = section.get("assigned") or {}, section.get("device") or {}
    return str(assigned.get("name") or device.get("name") or device.get("device") or "")


def entry(report: dict) -> dict:
    """One line of a history (HISTORY_KEYS), from a report (report.to_dict()'s dict, or a class
    placeholder); the ratio and bandwidths None when not timed."""
    perf, corr, mark = report.get("performance") or {}, report.get("correctness") or {}, report.get("class") or {}
    bench = perf.get("bench") or {}
    when = report.get("generated_at") or mark.get("graded_at") \
        or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {"graded_at": str(when), "verdict": str(report.get("verdict")),
            "points": number(report.get("points")) or 0.0, "max_points": number(report.get("max_points")),
            "ratio": number(perf.get("ratio")), "gbps": number(bench.get("gbps")),
            "copy_gbps": number(bench.get("copy_gbps")), "gpu": gpu_name(report),
            "passed": corr.get("passed"), "total": corr.get("total"),
            "source_sha256": str(mark.get("source_sha256") or sha256_of(report.get("source"))),
            "seed": report.get("seed"), "grader_version": report.get("grader_version"),
            "final": bool(report.get("final", False))}


def append(path: str | Path, report: dict) -> dict | None:
    """Append the report's entry() to the history at path (created with its folder when missing),
    as the module docstring says; returns the entry, or None for a report that is no attempt
    (NOT_AN_ATTEMPT).  Raises OSError when the file cannot be written."""
    if report.get("verdict") in NOT_AN_ATTEMPT:
        return None
    line = entry(report)
    data = (json.dumps(line, sort_keys=True) + "\n").encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One descriptor for everything: closing any other descriptor of the file would release this
    # process's POSIX lock on it (fcntl(2), "Advisory record locking").
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data               # a line cut short by a killed writer stays a line of its own
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)                          # closing releases the lock
    return line


def read(path: str | Path) -> list[dict]:
    """The entries of the history at path, oldest first ([] when there is none); a line that is
    no JSON object (cut short by a killed writer) is skipped."""
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError:
        return []
    found = []
    for raw in lines:
        if len(raw) > MAX_LINE:
            continue
        try:
            data = json.loads(raw.decode("utf-8"))
        except ValueError:                    # not UTF-8, or no JSON
            continue
        if isinstance(data, dict) and "verdict" in data:
            found.append(data)
    return found
