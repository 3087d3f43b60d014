"""Parameter sweeps of the reference solutions: `make tune`, `grade.py tune`.

A lab's sweep is bounded by its tune.json, and its best variant kept in a tuning file per GPU
that the reference's builds then use: instructor/tuning.py says what those files hold.  A sweep
(tune_labs, which `grade.py tune` runs: the three steps, every lab's builds at once) is:

    prepare_lab     the candidates (tuning.candidates: the defaults first);
    build_variants  every candidate graded by the one pipeline (grading/pipeline.grade_lab)
                    up to the end of its CPU half, stage="build", in parallel on the CPUs: the
                    build (each with its -D macros as lab.mk's KERNEL_DEFINES, in
                    build/tune/<lab>/<variant>/) and the static checks;
    measure_lab     the GPU half of each variant that the build stage left pending
                    (stage="gpu"), one at a time: the lab's Check suite, and only for a variant
                    that passes every case the bench (the launcher timed with the L2 flushed,
                    every timed call's output checked) and its launch audit.

The pipeline orders the stages and score.py judges them, as for any submission; a variant's
status (STATUSES) is read from its grading.  The best variant by effective bandwidth (a
fraction of the copy bandwidth measured in the same run) replaces the defaults only when it
is at least `min_gain` faster than them, so that measurement noise does not move the
defaults; it is written, with every variant's figures, to the lab's tuning file for this GPU
(tuning.tuning_path), and the sweep is drawn (instructor/tuneplot.py, matplotlib optional).

Units: gbps and copy_gbps in GB/s (1 GB = 1e9 bytes, the bench's), ms the bench's median
milliseconds per call, ratio = gbps / copy_gbps.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base.files import display_path
from ..grading import build, pipeline
from . import tuning
from .tuneplot import draw_sweep
from .tuning import TuneError, variant_name

#: A variant replaces the defaults only when this much faster (fraction of their ratio).
DEFAULT_MIN_GAIN = 0.02
#: Seconds one variant's build may take (nvcc of kernel.cu and the lab's harness objects).
BUILD_TIMEOUT_S = 600.0
#: The outcomes of a variant, in the order a table explains them.
STATUSES = ("ok", "compile_error", "forbidden", "constraint", "incorrect", "check_error",
            "wrong_output", "implausible", "bench_error", "no_gpu", "not_run")


@dataclass
class Variant:
    """One candidate and what became of it (status: one of STATUSES)."""

    params: dict[str, int]
    is_default: bool = False
    status: str = "not_run"
    message: str = ""
    ratio: float | None = None
    gbps: float | None = None
    ms: float | None = None
    copy_gbps: float | None = None
    registers: int | None = None
    spill_bytes: int | None = None
    device: str | None = None
    build_s: float = 0.0
    gpu_s: float = 0.0

    @property
    def name(self) -> str:
        return variant_name(self.params, self.is_default)


@dataclass
class LabSweep:
    lab: str
    device: str | None
    seed: int
    variants: list[Variant]
    best: Variant | None = None
    default: Variant | None = None
    min_gain: float = DEFAULT_MIN_GAIN
    written: Path | None = None
    replaced: dict | None = None            # the tuning file's "best" before this run
    plot: Path | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    # set by prepare_lab: where the sweep comes from
    lab_dir: Path | None = None
    space: tuning.TuneSpace | None = None
    src: Path | None = None


def _hottest_kernel(built: build.BuildResult) -> tuple[int | None, int | None]:
    """(most registers of any entry function, most spill bytes) from the ptxas report."""
    entries = [k for k in built.kernels if k.entry and k.registers is not None]
    if not entries:
        return None, None
    return max(k.registers for k in entries), max(k.spill_stores + k.spill_loads for k in entries)


def _settle(variant: Variant, run: pipeline.LabRun) -> None:
    """A variant's status, message and figures from its grading (a finished pipeline.LabRun):
    the verdict of score.py, told apart into STATUSES."""
    variant.status, variant.message = _status(run)
    data = run.bench.data if run.bench is not None and run.bench.status == "ok" else None
    if data:
        variant.gbps, variant.copy_gbps, variant.ms = data["gbps"], data["copy_gbps"], data["ms_median"]
        variant.ratio = data["ratio"] if data["output_ok"] else None
        variant.device = data.get("device")


def _status(run: pipeline.LabRun) -> tuple[str, str]:
    """(one of STATUSES, why) for a finished grading."""
    score = run.score
    if score.verdict in ("compile_error", "kit_error"):
        return "compile_error", process_tail(run.build.message)
    if score.verdict == "forbidden":
        return "forbidden", "; ".join(score.messages)
    check = run.check
    if check is None:
        return "no_gpu", run.not_measured or score.correctness.message
    if score.correctness.verdict != "pass":
        failed = [c for c in check.cases if c.outcome != "pass"]
        if not failed:
            return "check_error", f"check: {check.status}: {score.correctness.message}"
        first = failed[0]
        return "incorrect", (f"{check.passed}/{check.total} cases pass; first: {first.tcase} "
                             f"{first.label}: {first.outcome}: {first.message}")[:400]
    if score.verdict in ("pass", "slow"):
        return "ok", ""
    if score.verdict == "constraint":
        static = run.static.failed("constraint") if run.static else []
        return "constraint", static[0].message if static else score.performance.message
    if score.verdict == "implausible":
        return "implausible", score.performance.message
    bench = run.bench
    if bench is not None and bench.status == "no_gpu":
        return "no_gpu", bench.message
    if bench is not None and bench.status == "ok" and not bench.data["output_ok"]:
        return "wrong_output", bench.data.get("output_message", "")
    return "bench_error", score.performance.message


def _nvcc_release() -> str:
    try:
        out = subprocess.run([os.environ.get("NVCC", "nvcc"), "--version"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r"release [^\n]*", out)
    return m.group(0) if m else ""


def choose_best(variants: list[Variant], min_gain: float) -> tuple[Variant | None, Variant | None]:
    """(best, default): the fastest variant that passed everything, unless it is less than
    `min_gain` (a fraction) faster than the defaults, then the defaults.  (None, default)
    when no variant passed."""
    default = next((v for v in variants if v.is_default), None)
    good = [v for v in variants if v.status == "ok" and v.ratio is not None]
    if not good:
        return None, default
    fastest = max(good, key=lambda v: v.ratio)
    if default is not None and default.status == "ok" and default.ratio is not None \
            and fastest.ratio < default.ratio * (1.0 + min_gain):
        return default, default
    return fastest, default


def prepare_lab(lab_dir: Path, seed: int | None = None, min_gain: float = DEFAULT_MIN_GAIN,
                space: tuning.TuneSpace | None = None) -> LabSweep:
    """The candidates of one lab's sweep, not yet built (see tune_labs for the arguments).
    Raises TuneError when the lab has no tune.json or no reference, or there is no GPU."""
    lab_dir = Path(lab_dir)
    space = space or tuning.load_space(lab_dir)
    if space is None:
        raise TuneError(f"{display_path(lab_dir)} has no {tuning.TUNE_FILE}: nothing to sweep")
    src = tuning.reference_source(lab_dir)
    if not src.is_file():
        raise TuneError(f"{display_path(src)} is missing: a student kit has no reference to tune")
    found = tuning.candidates(space, tuning.source_defaults(src))
    if tuning.local_device() is None:
        raise TuneError("no GPU (nvidia-smi lists none that CUDA_VISIBLE_DEVICES lets through): "
                        "a sweep times every variant on the GPU")
    sweep = LabSweep(lab_dir.name, None, random.randrange(1 << 31) if seed is None else seed,
                     [Variant(p, is_default=(i == 0)) for i, p in enumerate(found)], min_gain=min_gain)
    sweep.lab_dir, sweep.space, sweep.src = lab_dir, space, src
    return sweep


def build_dir(sweep: LabSweep, variant: Variant) -> Path:
    """build/tune/<lab>/<variant>: where a variant is built."""
    return KIT_ROOT / "build" / "tune" / sweep.lab / variant.name


def build_variants(sweeps: list[LabSweep], jobs: int | None = None, log=print) -> None:
    """The CPU half of every variant's grading (pipeline stage "build": the build and the static
    checks), in parallel on the CPUs (`jobs` at once, default the CPU count).  A variant that it
    settles (a compile error, a forbidden call) gets its status here.  The first build goes
    alone: it makes the harness library that all builds share (build/harness/<arch>), which the
    others then only read."""
    t0 = time.monotonic()
    work = [(s, v) for s in sweeps for v in s.variants]

    def make(item: tuple[LabSweep, Variant]) -> None:
        sweep, v = item
        run = pipeline.grade_lab(sweep.lab_dir, "reference", build_dir(sweep, v), stage="build",
                                 build_timeout_s=BUILD_TIMEOUT_S,
                                 defines={} if v.is_default else tuning.as_defines(v.params))
        v.build_s = run.seconds.get("build", 0.0)
        if run.build.ok:
            v.registers, v.spill_bytes = _hottest_kernel(run.build)
        if run.final:                        # nothing left for the GPU: settled by the build stage
            _settle(v, run)

    if work:
        make(work[0])
        with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
            list(pool.map(make, work[1:]))
    seconds = time.monotonic() - t0
    for s in sweeps:
        s.seconds["build"] = seconds
    settled = sum(v.status != "not_run" for _, v in work)
    log(f"== built {len(work)} variants of {len(sweeps)} lab(s) in {seconds:.0f} s ({settled} settled "
        "by the build or the static checks)")


def measure_lab(sweep: LabSweep, write: bool = True, plot_dir: Path | None = None, log=print) -> LabSweep:
    """The GPU half of every variant the build stage left pending (pipeline stage "gpu"), one at
    a time, then the choice of the best, the tuning file (when `write`) and the picture (in
    plot_dir, matplotlib optional).  Raises TuneError when the GPU is gone (a variant found none)."""
    log(f"== {sweep.lab}: {len(sweep.variants)} variants of {', '.join(sweep.space.parameters)} "
        f"(defaults {variant_name(sweep.variants[0].params)}); seed {sweep.seed}")
    t0 = time.monotonic()
    for v in sweep.variants:
        if v.status != "not_run":
            log(f"   {v.name:<34} {v.status:<12} {v.message.splitlines()[-1][:100] if v.message else ''}")
            continue
        start = time.monotonic()
        try:
            _settle(v, pipeline.grade_lab(sweep.lab_dir, "reference", build_dir(sweep, v), seed=sweep.seed,
                                          stage="gpu"))
        except pipeline.StageError as err:
            v.status, v.message = "bench_error", str(err)
        v.gpu_s = time.monotonic() - start
        sweep.device = v.device or sweep.device
        shown = f"{v.ratio:.3f} of copy" if v.ratio is not None else v.message[:100]
        log(f"   {v.name:<34} {v.status:<12} {shown}  ({v.gpu_s:.0f} s)")
        if v.status == "no_gpu":
            raise TuneError(f"{sweep.lab}: no GPU: {v.message}")
    sweep.seconds["gpu"] = time.monotonic() - t0
    sweep.best, sweep.default = choose_best(sweep.variants, sweep.min_gain)
    if sweep.best is not None and sweep.device is not None:
        previous = tuning.load_tuning(sweep.lab_dir, sweep.device)
        sweep.replaced = previous.get("best") if previous else None
        if write:
            sweep.written = write_tuning(sweep.lab_dir, sweep)
    if plot_dir is not None and sweep.device is not None:
        sweep.plot = draw_sweep(sweep, sweep.space, Path(plot_dir) / f"tune-{sweep.lab}.png")
    return sweep


def tune_labs(lab_dirs: list[Path], seed: int | None = None, jobs: int | None = None,
              min_gain: float = DEFAULT_MIN_GAIN, write: bool = True, plot_dir: Path | None = None,
              space: tuning.TuneSpace | None = None, log=print) -> Iterator[LabSweep]:
    """Sweep the labs (see the module docstring): every lab's candidates built at once on the CPUs,
    then one lab at a time on the GPU; yields each lab's sweep, every variant's outcome in it, as
    soon as it is measured.

    seed: the inputs' seed for every variant (random when None, printed); jobs: parallel
    builds (default: the CPU count); write: write the tuning files; plot_dir: where each
    sweep's picture goes (matplotlib optional); space: instead of LAB_DIR/tune.json (one lab).
    Raises TuneError when a lab has no tune.json or no reference, or there is no GPU (before
    anything is built); a sweep in which no variant passed has best None and writes nothing.
    """
    sweeps = [prepare_lab(d, seed, min_gain, space) for d in lab_dirs]
    build_variants(sweeps, jobs, log)
    for sweep in sweeps:
        yield measure_lab(sweep, write, plot_dir, log)


def process_tail(message: str, lines: int = 6) -> str:
    return "\n".join(message.strip().splitlines()[-lines:])


def write_tuning(lab_dir: Path, sweep: LabSweep) -> Path:
    """Write LAB_DIR/tuning/<device>.json from a finished sweep (replacing the file of the
    same GPU: `make tune` is the request to do so); returns its path."""
    path = tuning.tuning_path(lab_dir, sweep.device)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "lab": sweep.lab,
        "device": sweep.device,
        "date": datetime.date.today().isoformat(),
        "seed": sweep.seed,
        "nvcc": _nvcc_release(),
        "best": sweep.best.params,
        "default": sweep.default.params if sweep.default else None,
        "best_ratio": sweep.best.ratio,
        "default_ratio": sweep.default.ratio if sweep.default else None,
        "min_gain": sweep.min_gain,
        "variants": [{k: v for k, v in asdict(x).items() if k not in ("is_default",)}
                     | {"default": x.is_default} for x in sweep.variants],
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


# ---- what the user sees ---------------------------------------------------------------------


def render(sweep: LabSweep) -> str:
    """The sweep as a table (best first), then the best against the defaults."""
    names = list(sweep.variants[0].params)
    head = names + ["regs", "spill B", "status", "of copy", "GB/s", "ms"]
    order = sorted(sweep.variants, key=lambda v: (v.ratio is None, -(v.ratio or 0.0)))
    rows = []
    for v in order:
        mark = " *" if v is sweep.best else (" d" if v.is_default else "")
        rows.append([str(v.params[n]) for n in names] + [
            "" if v.registers is None else str(v.registers),
            "" if v.spill_bytes is None else str(v.spill_bytes),
            v.status + mark,
            "" if v.ratio is None else f"{v.ratio:.3f}",
            "" if v.gbps is None else f"{v.gbps:.0f}",
            "" if v.ms is None else f"{v.ms:.3f}"])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = [f"{sweep.lab} on {sweep.device or 'the GPU (no variant reached it)'} "
             f"(seed {sweep.seed}; * best, d defaults):",
             "  ".join(h.rjust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    failed = [v for v in sweep.variants if v.status != "ok" and v.message]
    for v in failed:
        lines.append(f"  {v.name}: {v.status}: {v.message.splitlines()[0][:160]}")
    b, d = sweep.best, sweep.default
    if b is not None and d is not None and d.ratio and b.ratio:
        if b is d:
            lines.append(f"best: the defaults {variant_name(d.params)} at {d.ratio:.3f} of copy "
                         f"(no variant at least {sweep.min_gain:.0%} faster)")
        else:
            lines.append(f"best: {variant_name(b.params)} at {b.ratio:.3f} of copy, {b.ratio / d.ratio:.2f}x "
                         f"the defaults {variant_name(d.params)} ({d.ratio:.3f})")
    elif b is not None:
        lines.append(f"best: {variant_name(b.params)} at {b.ratio:.3f} of copy (the defaults did not pass)")
    else:
        lines.append("no variant passed every check: nothing written")
    if sweep.written:
        was = f"; it replaced {variant_name(sweep.replaced)}" if sweep.replaced else ""
        lines.append(f"wrote {display_path(sweep.written)}{was}")
    if sweep.plot:
        lines.append(f"plot: {display_path(sweep.plot)}")
    lines.append(f"time: GPU stages {sweep.seconds.get('gpu', 0):.0f} s (builds, shared by the labs "
                 f"of this run: {sweep.seconds.get('build', 0):.0f} s)")
    return "\n".join(lines)
