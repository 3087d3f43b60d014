"""`make tune`: every candidate of tuning.py graded by the one pipeline (stage "build" on the CPUs, then
"gpu" one at a time), the best written to the lab's tuning file for this GPU, printed and drawn
(grader/README.md, section 10).  Units: GB/s (1e9 bytes), ms per call, ratio = gbps / copy_gbps.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import random
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base import process, toolkit
from ..base.files import display_path
from ..grading import pipeline
from ..grading.plot import pyplot
from . import tuning
from .tuning import TuneError, variant_name

#: A variant replaces the defaults only when this much faster (fraction of their ratio).
DEFAULT_MIN_GAIN = 0.02
#: Seconds one variant's build may take (nvcc of kernel.cu and the lab's harness objects).
BUILD_TIMEOUT_S = 600.0


@dataclass
class Variant:
    """One candidate and what became of it (status: "ok", "not_run" or why it was left out)."""

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
    lab_dir: Path | None = None
    space: tuning.TuneSpace | None = None


def _settle(variant: Variant, run: pipeline.LabRun) -> None:
    """A variant's status (grader/README.md, section 10), message and figures from its finished grading."""
    variant.status, variant.message = _status(run)
    data = run.bench.data if run.bench is not None and run.bench.status == "ok" else None
    if data:
        variant.gbps, variant.copy_gbps, variant.ms = data["gbps"], data["copy_gbps"], data["ms_median"]
        variant.ratio = data["ratio"] if data["output_ok"] else None
        variant.device = data.get("device")


def _status(run: pipeline.LabRun) -> tuple[str, str]:
    score, check, bench = run.score, run.check, run.bench
    if score.verdict in ("compile_error", "kit_error"):
        return "compile_error", "\n".join(run.build.message.strip().splitlines()[-6:])
    if score.verdict == "forbidden":
        return "forbidden", "; ".join(score.messages)
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
    if bench is not None and bench.status == "no_gpu":
        return "no_gpu", bench.message
    if bench is not None and bench.status == "ok" and not bench.data["output_ok"]:
        return "wrong_output", bench.data.get("output_message", "")
    return "bench_error", score.performance.message


def choose_best(variants: list[Variant], min_gain: float) -> tuple[Variant | None, Variant | None]:
    """(best, default): the fastest variant that passed everything, or the defaults unless it is at
    least `min_gain` (a fraction) faster than they are; (None, default) when no variant passed."""
    default = next((v for v in variants if v.is_default), None)
    good = [v for v in variants if v.status == "ok" and v.ratio is not None]
    if not good:
        return None, default
    fastest = max(good, key=lambda v: v.ratio)
    if default is not None and default.status == "ok" and default.ratio is not None \
            and fastest.ratio < default.ratio * (1.0 + min_gain):
        return default, default
    return fastest, default


def _build_dir(sweep: LabSweep, variant: Variant) -> Path:
    return KIT_ROOT / "build" / "tune" / sweep.lab / variant.name


def _build_all(sweeps: list[LabSweep], jobs: int | None, log) -> None:
    """The CPU half of every variant's grading, `jobs` at once; the first build goes alone: it
    makes the harness library (build/harness/<arch>) that the others then only read."""
    t0 = time.monotonic()
    work = [(s, v) for s in sweeps for v in s.variants]

    def make(item: tuple[LabSweep, Variant]) -> None:
        sweep, v = item
        run = pipeline.grade_lab(sweep.lab_dir, "reference", _build_dir(sweep, v), stage="build",
                                 build_timeout_s=BUILD_TIMEOUT_S,
                                 defines={} if v.is_default else tuning.as_defines(v.params))
        v.build_s = run.seconds.get("build", 0.0)
        entries = [k for k in run.build.kernels if k.entry and k.registers is not None] if run.build.ok else []
        if entries:                          # the most of any entry function, from the ptxas report
            v.registers = max(k.registers for k in entries)
            v.spill_bytes = max(k.spill_stores + k.spill_loads for k in entries)
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


def _measure(sweep: LabSweep, write: bool, plot_dir: Path | None, log) -> LabSweep:
    """The GPU half of every variant still pending, one at a time, then the best, the tuning
    file (when `write`) and the picture.  Raises TuneError when the GPU is gone."""
    log(f"== {sweep.lab}: {len(sweep.variants)} variants of {', '.join(sweep.space.parameters)} "
        f"(defaults {variant_name(sweep.variants[0].params)}); seed {sweep.seed}")
    t0 = time.monotonic()
    for v in sweep.variants:
        if v.status != "not_run":
            log(f"   {v.name:<34} {v.status:<12} {v.message.splitlines()[-1][:100] if v.message else ''}")
            continue
        start = time.monotonic()
        try:
            _settle(v, pipeline.grade_lab(sweep.lab_dir, "reference", _build_dir(sweep, v), seed=sweep.seed,
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
        sweep.plot = draw_sweep(sweep, Path(plot_dir) / f"tune-{sweep.lab}.png")
    return sweep


def tune_labs(lab_dirs: list[Path], seed: int | None = None, jobs: int | None = None,
              min_gain: float = DEFAULT_MIN_GAIN, write: bool = True, plot_dir: Path | None = None,
              space: tuning.TuneSpace | None = None, log=print) -> Iterator[LabSweep]:
    """Sweep the labs, as `grade.py tune`'s options say (every lab built at once, then one lab at a time
    on the GPU); yields each lab's sweep when measured (best None, nothing written: no variant passed).
    Raises TuneError when a lab has no tune.json or no reference, or there is no GPU, before building."""
    sweeps = []
    for lab_dir in map(Path, lab_dirs):
        lab_space = space or tuning.load_space(lab_dir)
        if lab_space is None:
            raise TuneError(f"{display_path(lab_dir)} has no {tuning.TUNE_FILE}: nothing to sweep")
        src = tuning.reference_source(lab_dir)
        if not src.is_file():
            raise TuneError(f"{display_path(src)} is missing: a student kit has no reference to tune")
        found = tuning.candidates(lab_space, tuning.source_defaults(src))
        if tuning.local_device() is None:
            raise TuneError("no GPU (nvidia-smi lists none that CUDA_VISIBLE_DEVICES lets through): "
                            "a sweep times every variant on the GPU")
        sweeps.append(LabSweep(lab_dir.name, None, random.randrange(1 << 31) if seed is None else seed,
                               [Variant(p, is_default=(i == 0)) for i, p in enumerate(found)], min_gain=min_gain,
                               lab_dir=lab_dir, space=lab_space))
    _build_all(sweeps, jobs, log)
    for sweep in sweeps:
        yield _measure(sweep, write, plot_dir, log)


def tuning_data(sweep: LabSweep) -> dict:
    """The tuning file (grader/README.md, section 10) of a finished sweep; best None when none passed."""
    release = re.search(r"release [^\n]*", process.output([toolkit.find_nvcc() or "nvcc", "--version"]) or "")
    b, d = sweep.best, sweep.default
    return {"lab": sweep.lab, "device": sweep.device, "date": datetime.date.today().isoformat(), "seed": sweep.seed,
            "nvcc": release.group(0) if release else "", "best": b and b.params, "default": d and d.params,
            "best_ratio": b and b.ratio, "default_ratio": d and d.ratio, "min_gain": sweep.min_gain,
            "variants": [{k: v for k, v in asdict(x).items() if k != "is_default"} | {"default": x.is_default}
                         for x in sweep.variants]}


def write_tuning(lab_dir: Path, sweep: LabSweep) -> Path:
    """Write (or replace) LAB_DIR/tuning/<device>.json from a finished sweep; returns its path."""
    path = tuning.tuning_path(lab_dir, sweep.device)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tuning_data(sweep), indent=1) + "\n")
    return path


def render(sweep: LabSweep) -> str:
    """The sweep as a table (best first), then the best against the defaults."""
    names = list(sweep.variants[0].params)
    head = names + ["regs", "spill B", "status", "of copy", "GB/s", "ms"]
    rows = [[str(v.params[n]) for n in names] + [
        "" if v.registers is None else str(v.registers),
        "" if v.spill_bytes is None else str(v.spill_bytes),
        v.status + (" *" if v is sweep.best else (" d" if v.is_default else "")),
        "" if v.ratio is None else f"{v.ratio:.3f}",
        "" if v.gbps is None else f"{v.gbps:.0f}",
        "" if v.ms is None else f"{v.ms:.3f}"]
        for v in sorted(sweep.variants, key=lambda v: (v.ratio is None, -(v.ratio or 0.0)))]
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = [f"{sweep.lab} on {sweep.device or 'the GPU (no variant reached it)'} "
             f"(seed {sweep.seed}; * best, d defaults):"]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in [head] + rows]
    lines += [f"  {v.name}: {v.status}: {v.message.splitlines()[0][:160]}"
              for v in sweep.variants if v.status != "ok" and v.message]
    b, d = sweep.best, sweep.default
    if b is None:
        lines.append("no variant passed every check: nothing written")
    elif b is d:
        lines.append(f"best: the defaults {variant_name(d.params)} at {d.ratio:.3f} of copy "
                     f"(no variant at least {sweep.min_gain:.0%} faster)")
    elif d is not None and d.ratio:
        lines.append(f"best: {variant_name(b.params)} at {b.ratio:.3f} of copy, {b.ratio / d.ratio:.2f}x "
                     f"the defaults {variant_name(d.params)} ({d.ratio:.3f})")
    else:
        lines.append(f"best: {variant_name(b.params)} at {b.ratio:.3f} of copy (the defaults did not pass)")
    if sweep.written:
        was = f"; it replaced {variant_name(sweep.replaced)}" if sweep.replaced else ""
        lines.append(f"wrote {display_path(sweep.written)}{was}")
    if sweep.plot:
        lines.append(f"plot: {display_path(sweep.plot)}")
    lines.append(f"time: GPU stages {sweep.seconds.get('gpu', 0):.0f} s (builds, shared by the labs "
                 f"of this run: {sweep.seconds.get('build', 0):.0f} s)")
    return "\n".join(lines)


def _panel(ax, variants: list[dict], x: str | None, y: str | None, title: str, best: dict | None,
           default: dict | None, vmin: float, vmax: float):
    """One sweep into matplotlib axes: a heat map over tune.json's plot axes (x, y), each cell the best
    over the other parameters, colours from vmin to vmax, returned for a colour bar; without two axes,
    one bar per variant (None).  Fractions of the copy bandwidth of the same run."""
    ok = [v for v in variants if v.get("status") == "ok" and v.get("ratio") is not None]
    ax.set_title(title, fontsize=9)
    if not (x and y and x != y):
        ax.bar(range(len(ok)), [v["ratio"] for v in ok],
               color=["tab:orange" if best and v["params"] == best else "tab:blue" for v in ok])
        ax.set_xticks(range(len(ok)), [variant_name(v["params"]) for v in ok], rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("fraction of copy bandwidth")
        return None
    xs, ys = (sorted({v["params"][axis] for v in variants}) for axis in (x, y))
    cells: dict[tuple, float] = {}
    for v in ok:
        key = (v["params"][x], v["params"][y])
        cells[key] = max(cells.get(key, 0.0), v["ratio"])
    bottom = min(vmin, vmax - 1e-6)
    image = ax.imshow([[cells.get((a, b), math.nan) for a in xs] for b in ys], origin="lower", cmap="viridis",
                      vmin=bottom, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set(xlabel=x, ylabel=y)
    for i, b in enumerate(ys):
        for j, a in enumerate(xs):
            if (a, b) not in cells:
                ax.text(j, i, "failed\nor skipped", ha="center", va="center", color="grey", fontsize=7)
                continue
            text = f"{cells[(a, b)]:.2f}" + "".join(f"\n{name}" for name, p in (("best", best), ("default", default))
                                                    if p and (p[x], p[y]) == (a, b))
            light = cells[(a, b)] > bottom + 0.6 * (vmax - bottom)            # dark text on yellows
            ax.text(j, i, text, ha="center", va="center", color="black" if light else "white", fontsize=8)
    return image


def _draw(plt, lab: str, space: tuning.TuneSpace, files: list[dict], path: Path) -> Path:
    """Tuning files' contents (one GPU's each) side by side on one colour scale, as PNG at `path`."""
    ratios = [v["ratio"] for d in files for v in d["variants"]
              if v.get("status") == "ok" and v.get("ratio") is not None]
    fig, axes = plt.subplots(1, len(files), figsize=(5.2 * len(files), 4.3), squeeze=False)
    images = [_panel(ax, d["variants"], space.plot_x, space.plot_y, f"{d['device']} ({d['date']})\n"
                     + (f"best {variant_name(d['best'])}: {d['best_ratio']:.2f} x copy" if d["best"]
                        else "no variant passed"),
                     d["best"], d.get("default"), min(ratios, default=0.0), max(ratios, default=1.0))
              for ax, d in zip(axes[0], files)]
    if any(i is not None for i in images):
        fig.colorbar(next(i for i in images if i is not None), ax=list(axes[0]),
                     label="effective bandwidth / copy bandwidth")
    others = [p for p in space.parameters if p not in (space.plot_x, space.plot_y)]
    fig.suptitle(f"make tune, {lab}: effective bandwidth / copy bandwidth measured in the same run"
                 + (f"\n(each cell: the best over {', '.join(others)})" if others else ""), fontsize=10, y=1.06)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def draw_sweep(sweep: LabSweep, path: Path) -> Path | None:
    """`make tune`'s picture of one finished sweep, as one panel of draw_devices'; None without matplotlib."""
    plt = pyplot()
    return plt and _draw(plt, sweep.lab, sweep.space, [tuning_data(sweep)], path)


def draw_devices(lab: str, devices: list[str], path: Path, kit_root: Path = KIT_ROOT) -> Path:
    """`grade.py tune --draw`: LAB's tuning files of several GPUs side by side, as PNG.  TuneError: no
    tune.json or no tuning file; UsageError (exit 2) without matplotlib."""
    lab_dir = tuning.find_lab(lab, kit_root)
    space = tuning.load_space(lab_dir)
    if space is None:
        raise TuneError(f"{lab_dir.name} has no {tuning.TUNE_FILE}")
    files = [tuning.load_tuning(lab_dir, device) for device in devices]
    for device, data in zip(devices, files):
        if data is None:
            raise TuneError(f"no tuning file {display_path(tuning.tuning_path(lab_dir, device))}")
    return _draw(pyplot("tune --draw's pictures"), lab_dir.name, space, files, path)
