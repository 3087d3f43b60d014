"""The timed run of a lab (grader/harness/bench.c) and what it means (judge): run inside the check
program once every case has passed (checkrun.py, one CUDA start per grading), or by the bench program
(BUILD_DIR/bench --json - [--seed N], run_bench) when it was not, both in the sandbox of
base/sandbox.py.  Its one JSON object comes back on the private channel (base/process.py), which the
student's code cannot reach; its stdout (a kernel's printf) is the student's program output.  Exit
statuses and JSON keys: base/protocol.py (protocol.h to the C side).  Units: GB/s (1e9 bytes),
milliseconds.  grader/README.md, section 3.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..base import files, process, protocol, sandbox

STDERR_TAIL_LINES = 20

#: Keys of the timed run's JSON that must be finite numbers >= 0 (their types and the rest of the
#: schema, nested objects included: base/protocol.py BENCH_KEYS).
FINITE_KEYS = ("ms_median", "gbps", "copy_gbps", "ratio")


class BenchFormatError(ValueError):
    """The bench JSON is not an object of protocol.BENCH_KEYS with sensible values."""


@dataclass
class BenchRun:
    """status: "ok", "no_gpu", "cuda_error", "debug_build", "timeout", "error", or "grader_error"
    (the grader's own machinery failed: the sandbox or the program could not start, or a CUDA
    error of the machine, protocol.MACHINERY_CUDA_ERRORS); data: the bench JSON when status is
    "ok"; message: why not ok."""

    status: str
    data: dict | None = None
    message: str = ""
    stderr_tail: str = ""
    seconds: float = 0.0
    sandbox: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    output: str = ""            # what the student's code printed (the bench's stdout), capped
    program: str = "bench"      # the program that ran it: "bench", or "check" after its cases


def validate(data) -> dict:
    """Check a timed run's JSON object against protocol.BENCH_KEYS (nested objects included);
    returns it, or raises BenchFormatError naming the key."""
    try:
        protocol.check_object(data, protocol.BENCH_KEYS)
    except protocol.SchemaError as err:
        raise BenchFormatError(str(err)) from None
    for key in FINITE_KEYS:
        if not math.isfinite(data[key]) or data[key] < 0:
            raise BenchFormatError(f"bench JSON key {key!r} must be a finite number >= 0, got {data[key]!r}")
    if data["copy_gbps"] <= 0:
        raise BenchFormatError(f"bench JSON copy_gbps must be > 0, got {data['copy_gbps']!r}")
    return data


def parse_json_output(text: str) -> dict:
    """The one JSON object a bench wrote on its channel; raises BenchFormatError when the channel
    holds anything else (nothing, two objects), or json.JSONDecodeError."""
    stripped = text.strip()
    if not stripped:
        raise BenchFormatError("the bench wrote no JSON on its channel")
    data, end = json.JSONDecoder().raw_decode(stripped)
    if stripped[end:].strip():
        raise BenchFormatError("the bench's channel holds more than one JSON object")
    return data


def run_bench(build_dir: Path, timeout_s: float, seed: int | None = None,
              env: dict[str, str] | None = None) -> BenchRun:
    """Time the launcher with BUILD_DIR/bench in a sandbox, keeping the JSON as BUILD_DIR/bench.json.
    timeout_s: lab.json bench.timeout_s; env: added to the sandbox's environment (a pool's
    CUDA_VISIBLE_DEVICES).  Never raises for the program's behaviour (BenchRun.status)."""
    build_dir = Path(build_dir)
    (build_dir / "bench.json").unlink(missing_ok=True)      # no stale figures from an earlier run
    try:
        box = sandbox.plan_sandbox(timeout_s)
        with sandbox.SandboxDir(box, [build_dir / "bench"], prefix="stencil-bench-") as jail:
            argv = [jail.program("bench"), "--json", "-"] + (["--seed", str(seed)] if seed is not None else [])
            run = process.run(argv, timeout_s, env=jail.env(env), cwd=jail.work, sandbox=box, channel=True)
    except sandbox.SandboxError as err:
        return BenchRun("grader_error", message=f"the sandbox could not be set up: {err}")
    return judge(run, run.channel, build_dir, box.layers, run.seconds)


def judge(run: process.Completed, text: str, build_dir: Path, layers: dict[str, str],
          seconds: float, program: str = "bench") -> BenchRun:
    """What a timed run gave: run is the process that ran it (the bench program, or the check program
    that ran it after its cases: its ending is then the timed run's), text the channel's part that
    holds the JSON, seconds the timed run's wall seconds, program the file in BUILD_DIR that ran it
    (the launch audit reads its machine code).  A good JSON is kept as
    BUILD_DIR/bench.json.  Never raises."""
    notes = ["the bench wrote more than the channel keeps; the rest was ignored"] if run.channel_overflow else []
    tail = process.tail_lines(run.stderr, STDERR_TAIL_LINES)
    result = BenchRun("error", stderr_tail=tail, seconds=seconds, sandbox=dict(layers), notes=notes,
                      output=process.program_output(run.stdout), program=program)
    reason = process.tail_lines(run.stderr, 1).strip()
    if run.error or protocol.machinery_error(reason):
        result.status = "grader_error"                      # the grader's machinery, not the student
        result.message = run.error or reason
    elif run.timed_out or run.stopped:
        result.status = "timeout"
        result.message = f"bench {run.describe()} (lab.json bench.timeout_s)"
    elif run.returncode == protocol.EXIT_NO_GPU:
        result.status, result.message = "no_gpu", reason or "no GPU"
    elif run.returncode == protocol.EXIT_CUDA_ERROR:
        result.status, result.message = "cuda_error", reason or "CUDA error"
    elif run.returncode == protocol.EXIT_DEBUG_BUILD:
        result.status = "debug_build"
        result.message = "debug build (-G): not timed; build without DEBUG to measure"
    elif run.returncode == protocol.EXIT["EARLY_EXIT"]:
        result.message = "bench: the kernel's code called exit() while it was being timed"
    elif run.returncode != 0:
        result.message = f"bench {run.describe()}" + (f": {reason}" if reason else "")
    else:
        try:
            result.data = validate(parse_json_output(text))
            result.status = "ok"
            files.write_json(Path(build_dir) / "bench.json", result.data)
        except json.JSONDecodeError as err:
            result.message = f"the bench JSON does not parse: {err.msg}"
        except BenchFormatError as err:
            result.message = str(err)
    return result
