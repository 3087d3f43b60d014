"""Run a lab's bench program (BUILD_DIR/bench): the GPU probe and the timed run.

    bench --probe                       one JSON object describing the GPU on stdout;
                                        exit 2 with the reason on stderr when there is none
    bench --json FILE [--seed N]        times the student's launcher, writes one JSON object

Exit status of a timed run: 0 measured (even when output_ok is false), 2 no
GPU, 3 CUDA error (message on stderr), 4 debug build (-G), not timed.
Bandwidths in the JSON are GB/s with 1 GB = 1e9 bytes; times are milliseconds.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import proc

PROBE_TIMEOUT_S = 60.0
EXIT_NO_GPU = 2
EXIT_CUDA_ERROR = 3
EXIT_DEBUG_BUILD = 4
STDERR_TAIL_LINES = 20

#: Keys the timed run's JSON must hold (grader/README.md, section Bench), and their types.
REQUIRED_KEYS = {"device": str, "ms_median": float, "gbps": float, "copy_gbps": float,
                 "ratio": float, "output_ok": bool}


class BenchFormatError(ValueError):
    """The bench JSON is not an object holding REQUIRED_KEYS with sensible values."""


@dataclass
class Probe:
    """status: "ok" (device holds the probe's JSON), "no_gpu" or "error"; message: why not ok."""

    status: str
    device: dict | None = None
    message: str = ""

    @property
    def name(self) -> str | None:
        return self.device.get("name") if self.device else None


@dataclass
class BenchRun:
    """status: "ok", "no_gpu", "cuda_error", "debug_build", "timeout" or "error";
    data: the bench JSON when status is "ok"; message: why not ok."""

    status: str
    data: dict | None = None
    message: str = ""
    stderr_tail: str = ""
    seconds: float = 0.0


def _last_line(text: str) -> str:
    return proc.tail_lines(text, 1).strip()


def probe(build_dir: Path, timeout_s: float = PROBE_TIMEOUT_S) -> Probe:
    """Ask BUILD_DIR/bench whether there is a GPU (60 s at most); never raises."""
    run = proc.run([Path(build_dir) / "bench", "--probe"], timeout_s)
    if run.returncode == EXIT_NO_GPU:
        return Probe("no_gpu", message=_last_line(run.stderr) or "bench --probe found no GPU")
    if run.error or run.timed_out or run.returncode != 0:
        detail = _last_line(run.stderr)
        return Probe("error", message=f"bench --probe {run.describe()}" + (f": {detail}" if detail else ""))
    try:
        device = json.loads(run.stdout)
    except json.JSONDecodeError as err:
        return Probe("error", message=f"bench --probe printed no JSON object ({err.msg})")
    if not isinstance(device, dict):
        return Probe("error", message="bench --probe printed JSON that is not an object")
    return Probe("ok", device=device)


def validate(data) -> dict:
    """Check a timed run's JSON object; returns it, or raises BenchFormatError naming the key."""
    if not isinstance(data, dict):
        raise BenchFormatError("the bench JSON is not an object")
    for key, kind in REQUIRED_KEYS.items():
        if key not in data:
            raise BenchFormatError(f"the bench JSON lacks key {key!r}")
        value = data[key]
        if kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise BenchFormatError(f"bench JSON key {key!r} must be a finite number >= 0, got {value!r}")
        elif not isinstance(value, kind):
            raise BenchFormatError(f"bench JSON key {key!r} must be {kind.__name__}, got {value!r}")
    if data["copy_gbps"] <= 0:
        raise BenchFormatError(f"bench JSON copy_gbps must be > 0, got {data['copy_gbps']!r}")
    return data


def run_bench(build_dir: Path, timeout_s: float, seed: int | None = None) -> BenchRun:
    """Time the launcher with BUILD_DIR/bench; the JSON is kept as BUILD_DIR/bench.json.

    timeout_s: seconds the run may take (lab.json bench.timeout_s).
    Never raises for the program's behaviour; see BenchRun.status.
    """
    build_dir = Path(build_dir)
    (build_dir / "bench.json").unlink(missing_ok=True)      # no stale figures from an earlier run
    with tempfile.TemporaryDirectory(prefix="stencil-bench-") as tmp:
        out = Path(tmp) / "bench.json"
        argv = [build_dir / "bench", "--json", out] + (["--seed", str(seed)] if seed is not None else [])
        run = proc.run(argv, timeout_s)
        text = out.read_text(errors="replace") if out.is_file() else None
    tail = proc.tail_lines(run.stderr, STDERR_TAIL_LINES)
    result = BenchRun("error", stderr_tail=tail, seconds=run.seconds)
    reason = _last_line(run.stderr)
    if run.error:
        result.message = run.error
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
    elif text is None:
        result.message = "bench exited 0 but wrote no JSON file"
    else:
        try:
            result.data = validate(json.loads(text))
            result.status = "ok"
            (build_dir / "bench.json").write_text(text)
        except json.JSONDecodeError as err:
            result.message = f"the bench JSON does not parse: {err.msg}"
        except BenchFormatError as err:
            result.message = str(err)
    return result
