"""Run a lab's bench program (BUILD_DIR/bench): the timed run (and the GPU probe).

    bench --json - [--seed N]           times the student's launcher(s) and writes one JSON
                                        object to the grader's private channel
    bench --probe                       one JSON object describing the GPU, on the channel;
                                        exit EXIT_NO_GPU with the reason on stderr without one

Exit statuses and JSON keys are base/protocol.py's, which the C side gets as
protocol.h.  Bandwidths in the JSON are GB/s with 1 GB = 1e9 bytes; times are
milliseconds.

Both run in the sandbox of base/sandbox.py.  The figures come back on the
private channel (base/process.py), a pipe the student's code cannot reach:
nothing the process does after it exits can change them, and a kernel's
printf, which lands on stdout, is the student's program output (kept, shown to
them), not a broken report.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..base import process, protocol, sandbox

PROBE_TIMEOUT_S = 60.0
EXIT_NO_GPU = protocol.EXIT_NO_GPU
EXIT_CUDA_ERROR = protocol.EXIT_CUDA_ERROR
EXIT_DEBUG_BUILD = protocol.EXIT_DEBUG_BUILD
STDERR_TAIL_LINES = 20

#: Keys of the timed run's JSON that must be finite numbers >= 0 (their types and the rest of the
#: schema, nested objects included: base/protocol.py BENCH_KEYS).
FINITE_KEYS = ("ms_median", "gbps", "copy_gbps", "ratio")


class BenchFormatError(ValueError):
    """The bench JSON is not an object holding REQUIRED_KEYS with sensible values."""


@dataclass
class Probe:
    """status: "ok" (device holds the probe's JSON), "no_gpu" or "error"; message: why not ok."""

    status: str
    device: dict | None = None
    message: str = ""
    sandbox: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str | None:
        return self.device.get("name") if self.device else None


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


def _last_line(text: str) -> str:
    return process.tail_lines(text, 1).strip()


def probe(build_dir: Path, timeout_s: float = PROBE_TIMEOUT_S, env: dict[str, str] | None = None) -> Probe:
    """Ask BUILD_DIR/bench whether there is a GPU (60 s at most, in the sandbox); never raises.
    env: added to the sandbox's environment (CUDA_VISIBLE_DEVICES of the GPU a pool handed out)."""
    try:
        box = sandbox.plan_sandbox(timeout_s)
        with sandbox.SandboxDir(box, [Path(build_dir) / "bench"], prefix="stencil-probe-") as jail:
            run = process.run([jail.program("bench"), "--probe"], timeout_s, env=jail.env(env), cwd=jail.work,
                              sandbox=box, channel=True)
    except sandbox.SandboxError as err:
        return Probe("error", message=f"the sandbox could not be set up: {err}")
    layers = dict(box.layers)
    if run.returncode == EXIT_NO_GPU:
        return Probe("no_gpu", message=_last_line(run.stderr) or "bench --probe found no GPU", sandbox=layers)
    if run.error or run.timed_out or run.returncode != 0:
        detail = _last_line(run.stderr)
        return Probe("error", message=f"bench --probe {run.describe()}" + (f": {detail}" if detail else ""),
                     sandbox=layers)
    try:
        device = json.loads(run.channel)
    except json.JSONDecodeError as err:
        return Probe("error", message=f"bench --probe printed no JSON object ({err.msg})", sandbox=layers)
    if not isinstance(device, dict):
        return Probe("error", message="bench --probe printed JSON that is not an object", sandbox=layers)
    return Probe("ok", device=device, sandbox=layers)


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
    """Time the launcher with BUILD_DIR/bench in a sandbox; the JSON is kept as BUILD_DIR/bench.json.

    timeout_s: seconds the run may take (lab.json bench.timeout_s); env: added to the
    sandbox's environment (CUDA_VISIBLE_DEVICES of the GPU a pool handed out).
    Never raises for the program's behaviour; see BenchRun.status.
    """
    build_dir = Path(build_dir)
    (build_dir / "bench.json").unlink(missing_ok=True)      # no stale figures from an earlier run
    notes = []
    try:
        box = sandbox.plan_sandbox(timeout_s)
        with sandbox.SandboxDir(box, [build_dir / "bench"], prefix="stencil-bench-") as jail:
            argv = [jail.program("bench"), "--json", "-"] + (["--seed", str(seed)] if seed is not None else [])
            run = process.run(argv, timeout_s, env=jail.env(env), cwd=jail.work, sandbox=box, channel=True)
    except sandbox.SandboxError as err:
        return BenchRun("grader_error", message=f"the sandbox could not be set up: {err}")
    text = run.channel
    if run.channel_overflow:
        notes.append("the bench wrote more than the channel keeps; the rest was ignored")
    tail = process.tail_lines(run.stderr, STDERR_TAIL_LINES)
    result = BenchRun("error", stderr_tail=tail, seconds=run.seconds, sandbox=dict(box.layers), notes=notes,
                      output=process.program_output(run.stdout))
    reason = _last_line(run.stderr)
    if run.error or protocol.machinery_error(reason):
        result.status = "grader_error"                      # the grader's machinery, not the student
        result.message = run.error or reason
    elif run.timed_out:
        result.status = "timeout"
        result.message = f"bench {run.describe()} (lab.json bench.timeout_s)"
    elif run.returncode == EXIT_NO_GPU:
        result.status, result.message = "no_gpu", reason or "no GPU"
    elif run.returncode == EXIT_CUDA_ERROR:
        result.status, result.message = "cuda_error", reason or "CUDA error"
    elif run.returncode == EXIT_DEBUG_BUILD:
        result.status = "debug_build"
        result.message = "debug build (-G): not timed; build without DEBUG to measure"
    elif run.returncode != 0:
        result.message = f"bench {run.describe()}" + (f": {reason}" if reason else "")
    else:
        try:
            result.data = validate(parse_json_output(text))
            result.status = "ok"
            (build_dir / "bench.json").write_text(json.dumps(result.data, indent=2) + "\n")
        except json.JSONDecodeError as err:
            result.message = f"the bench JSON does not parse: {err.msg}"
        except BenchFormatError as err:
            result.message = str(err)
    return result
