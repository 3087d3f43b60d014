"""`make tune`: a lab's bounds (labs/NN-slug/tune.json), every candidate graded by the one pipeline
(stage "build" on the CPUs, then "gpu" one at a time), the best written to the lab's tuning file for
this GPU (labs/NN-slug/tuning/<device-slug>.json), printed and drawn; `grade.py tune --print-defines`
for lab.mk.  Keys and syntax: grader/README.md, section 10.  A parameter NAME is the macro TUNE_NAME
of the reference.  Units: GB/s (1e9 bytes), ms per call, ratio = gbps / copy_gbps.
"""

from __future__ import annotations

import ast
import datetime
import json
import os
import random
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path

from .. import KIT_ROOT
from ..base import gpus, labspec, process, toolkit
from ..base.files import display_path, read_json
from ..grading import build, pipeline
from ..grading.score import CORRECT

TUNE_FILE = "tune.json"
TUNING_DIR = "tuning"
DEFINE_PREFIX = "TUNE_"
_NAME = r"[A-Z][A-Z0-9_]*"
_DEFAULT_RE = re.compile(r"^[ \t]*#[ \t]*ifndef[ \t]+(" + DEFINE_PREFIX + r"\w+)[ \t]*\n"
                         r"[ \t]*#[ \t]*define[ \t]+\1[ \t]+(-?\d+)\b", re.MULTILINE)
#: A -DTUNE_NAME=VALUE word of the KERNEL_DEFINES that lab.mk records in BUILD_DIR/flags.stamp.
_BUILT_RE = re.compile(r"(?<!\S)-D" + DEFINE_PREFIX + "(" + _NAME + r")=(-?\d+)(?!\S)")
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd, ast.Not,
              ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_FUNCTIONS = {"min": min, "max": max}
#: A variant replaces the defaults only when this much faster (fraction of their ratio).
DEFAULT_MIN_GAIN = 0.02
#: Seconds one variant's build may take (nvcc of kernel.cu and the lab's harness objects).
BUILD_TIMEOUT_S = 600.0


class TuneError(RuntimeError):
    """A malformed tune.json or tuning file, a reference without the declared defaults, no GPU."""


@dataclass
class TuneSpace:
    """A lab's tune.json: parameter names with candidate values, the constraints, the heat map's axes."""

    lab_dir: Path
    parameters: dict[str, list[int]]
    constraints: list[str] = field(default_factory=list)
    plot_x: str | None = None
    plot_y: str | None = None


def load_space(lab_dir: Path) -> TuneSpace | None:
    """LAB_DIR/tune.json as a TuneSpace, None when the lab has none (load_space_file)."""
    path = Path(lab_dir) / TUNE_FILE
    return load_space_file(path, lab_dir) if path.is_file() else None


def load_space_file(path: Path, lab_dir: Path) -> TuneSpace:
    """A tune.json (the lab's, or another with --space) as LAB_DIR's TuneSpace.  Raises
    TuneError naming the file and the key that is wrong."""
    shown = display_path(Path(path))
    raw = read_json(Path(path), TuneError)

    def need(ok, why: str) -> None:
        if not ok:
            raise TuneError(f"{shown}: {why}")

    need(isinstance(raw, dict), f"the file holds {type(raw).__name__}; expected an object")
    unknown = set(raw) - {"about", "parameters", "constraints", "plot"}
    need(not unknown, f"unknown keys {sorted(unknown)}; allowed: about, parameters, constraints, plot")
    parameters = raw.get("parameters")
    need(isinstance(parameters, dict) and parameters, "\"parameters\" must be an object of NAME: [values], not empty")
    for name, values in parameters.items():
        need(re.fullmatch(_NAME, name), f"parameter {name!r}: a name is upper case, digits and _ "
                                        f"(the macro is {DEFINE_PREFIX}<name>)")
        need(isinstance(values, list) and values and all(type(v) is int for v in values)
             and len(set(values)) == len(values), f"parameters.{name}: expected a list of distinct integers, "
                                                  f"got {values!r}")
    constraints = raw.get("constraints", [])
    need(isinstance(constraints, list) and all(isinstance(c, str) for c in constraints),
         "\"constraints\" must be a list of strings")
    for text in constraints:
        try:
            names = {n.id for n in ast.walk(_parse(text)) if isinstance(n, ast.Name)} - set(_FUNCTIONS)
        except (SyntaxError, ValueError) as err:
            raise TuneError(f"{shown}: constraint {text!r}: {err}") from None
        need(names <= set(parameters), f"constraint {text!r} names {sorted(names - set(parameters))}, "
                                       f"which are not parameters ({', '.join(parameters)})")
    plot = raw.get("plot", {})
    need(isinstance(plot, dict) and not set(plot) - {"x", "y"}, "\"plot\" must be an object with keys x and y")
    for axis in ("x", "y"):
        need(axis not in plot or plot[axis] in parameters, f"plot.{axis} = {plot.get(axis)!r} is not a parameter "
                                                 f"({', '.join(parameters)})")
    need(isinstance(raw.get("about", ""), str), "\"about\" must be a string")
    return TuneSpace(Path(lab_dir), {k: list(v) for k, v in parameters.items()}, list(constraints),
                     plot.get("x"), plot.get("y"))


def _parse(text: str) -> ast.Expression:
    """The constraint's AST, checked: SyntaxError, or ValueError naming what is not allowed."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name)
                                               and node.func.id in _FUNCTIONS and not node.keywords):
            raise ValueError("the only calls allowed are min(...) and max(...)")
        if not (isinstance(node, (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Name,
                                  ast.Load, ast.Call, *_OPERATORS))
                or isinstance(node, ast.Constant) and type(node.value) is int):
            raise ValueError(f"{type(node).__name__} is not allowed (integers, parameter names, "
                             "+ - * // % ( ), comparisons, and, or, not, min, max)")
    return tree


def evaluate(text: str, values: dict[str, int]) -> bool:
    """Whether constraint `text` (its AST checked by _parse) holds for `values` (name -> integer), by
    Python's arithmetic without builtins but min and max.  ValueError: a name without a value, a division by 0."""
    try:
        return bool(eval(compile(_parse(text), "<constraint>", "eval"),  # noqa: S307 (checked AST)
                         {"__builtins__": {}, **_FUNCTIONS}, dict(values)))
    except NameError as err:
        raise ValueError(f"{err.name} has no value") from None
    except ZeroDivisionError:
        raise ValueError(f"division by zero in {text!r}") from None


def source_defaults(src: Path) -> dict[str, int]:
    """The TUNE_ defaults a kernel.cu declares: {"K": 8, ...} from each
    `#ifndef TUNE_K` directly followed by `#define TUNE_K 8` (integer values only)."""
    text = Path(src).read_text(errors="replace")
    return {m.group(1)[len(DEFINE_PREFIX):]: int(m.group(2)) for m in _DEFAULT_RE.finditer(text)}


def reference_source(lab_dir: Path) -> Path:
    return build.impl_source(Path(lab_dir).name, "reference", Path(lab_dir).parents[1])


def candidates(space: TuneSpace, defaults: dict[str, int]) -> list[dict[str, int]]:
    """The defaults, then every combination that satisfies every constraint (grader/README.md, section
    10).  Raises TuneError when the source lacks a default for a parameter of tune.json."""
    missing = [p for p in space.parameters if p not in defaults]
    if missing:
        raise TuneError(f"{display_path(reference_source(space.lab_dir))} declares no default "
                        f"for {', '.join(DEFINE_PREFIX + p for p in missing)} (an `#ifndef "
                        f"{DEFINE_PREFIX}{missing[0]}` / `#define {DEFINE_PREFIX}{missing[0]} <value>` block)")
    base = {p: defaults[p] for p in space.parameters}
    combos = (dict(zip(space.parameters, combo)) for combo in product(*space.parameters.values()))
    return [base] + [v for v in combos if v != base and all(evaluate(c, v) for c in space.constraints)]


def variant_name(params: dict[str, int], is_default: bool = False) -> str:
    """'default', or the build folder's name of a variant: 'K8-VEC4-SEG128'."""
    return "default" if is_default else "-".join(f"{k}{v}" for k, v in params.items())


def device_slug(device: str) -> str:
    """A file name for a GPU: lower case, runs of other characters as one '-'.
    'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    if not slug:
        raise TuneError(f"the device name {device!r} gives no file name")
    return slug


def tuning_path(lab_dir: Path, device: str) -> Path:
    return Path(lab_dir) / TUNING_DIR / f"{device_slug(device)}.json"


def load_tuning(lab_dir: Path, device: str) -> dict | None:
    """The tuning file of this lab and GPU, None when there is none.  Raises TuneError
    for a file that is not JSON or whose "best" is not an object of integers."""
    path = tuning_path(lab_dir, device)
    if not path.is_file():
        return None
    data = read_json(path, TuneError)
    best = data.get("best") if isinstance(data, dict) else None
    if not isinstance(best, dict) or not all(re.fullmatch(_NAME, k) and type(v) is int for k, v in best.items()):
        raise TuneError(f"{display_path(path)}: \"best\" must be an object of NAME: integer")
    return data


def tuned_parameters(lab_dir: Path, device: str | None) -> dict[str, int]:
    """The tuning file's "best" for LAB_DIR's reference on `device`, {} without either; TuneError when
    it names a parameter the source no longer declares (stale)."""
    data = load_tuning(lab_dir, device) if device else None
    if data is None:
        return {}
    stale = [k for k in data["best"] if k not in source_defaults(reference_source(lab_dir))]
    if stale:
        raise TuneError(f"{display_path(tuning_path(lab_dir, device))}: "
                        f"{', '.join(DEFINE_PREFIX + k for k in stale)} no longer declared in "
                        f"{display_path(reference_source(lab_dir))}: run make tune again, "
                        "or delete the file")
    return dict(data["best"])


def as_defines(params: dict[str, int]) -> dict[str, int]:
    """{"K": 8} -> {"TUNE_K": 8}: the macros of build.build(defines=...)."""
    return {DEFINE_PREFIX + k: v for k, v in params.items()}


def local_device() -> str | None:
    """nvidia-smi's name (the bench's too) of the GPU a CUDA program runs on (gpus.visible_gpu); None without one."""
    gpu = gpus.visible_gpu()
    return gpu.name if gpu else None


def print_defines(lab: str, kit_root: Path = KIT_ROOT) -> str:
    """lab.mk's KERNEL_DEFINES for IMPL=reference: '-DTUNE_K=8 ...' from this GPU's tuning file of LAB
    (a name or number), '' without one.  TuneError: no such lab, a broken or stale tuning file."""
    return build.kernel_defines(as_defines(tuned_parameters(find_lab(lab, kit_root), local_device())))


def find_lab(name: str, kit_root: Path = KIT_ROOT) -> Path:
    """A lab directory from its name ('08-temporal-blocking') or number ('08', '8')."""
    labs = labspec.discover_labs(kit_root)
    for lab_dir in labs:
        number = lab_dir.name.split("-")[0]
        if name in (lab_dir.name, number) or (name.isdigit() and number.isdigit() and int(name) == int(number)):
            return lab_dir
    raise TuneError(f"no lab {name!r} (labs: {', '.join(d.name for d in labs)})")


def tunable_labs(kit_root: Path = KIT_ROOT) -> list[Path]:
    """Every lab directory with a tune.json, in lab order."""
    return [d for d in labspec.discover_labs(kit_root) if (d / TUNE_FILE).is_file()]


def built_parameters(build_dir: Path, src: Path) -> dict[str, int]:
    """The TUNE_ parameters BUILD_DIR's build compiled SRC with: its defaults, replaced by the -DTUNE_
    words lab.mk recorded in BUILD_DIR/flags.stamp.  TuneError when there is none (it did not run)."""
    stamp = Path(build_dir) / "flags.stamp"
    try:
        text = stamp.read_text()
    except OSError:
        raise TuneError(f"{display_path(stamp)} is missing: build first") from None
    return source_defaults(src) | {name: int(value) for name, value in _BUILT_RE.findall(text)}


# ------------------------------------------------------------------ the sweep

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
    plot: Path | None = None               # its picture (pictures.draw_sweep)
    seconds: dict[str, float] = field(default_factory=dict)
    lab_dir: Path | None = None
    space: TuneSpace | None = None


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
    if score.verdict in CORRECT:
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
    if any(v is default for v in good) and fastest.ratio < default.ratio * (1.0 + min_gain):
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
                                 defines={} if v.is_default else as_defines(v.params))
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


def _measure(sweep: LabSweep, write: bool, log) -> LabSweep:
    """The GPU half of every variant still pending, one at a time, then the best and the tuning
    file (when `write`).  Raises TuneError when the GPU is gone."""
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
        previous = load_tuning(sweep.lab_dir, sweep.device)
        sweep.replaced = previous.get("best") if previous else None
        if write:
            sweep.written = write_tuning(sweep.lab_dir, sweep)
    return sweep


def tune_labs(lab_dirs: list[Path], seed: int | None = None, jobs: int | None = None,
              min_gain: float = DEFAULT_MIN_GAIN, write: bool = True,
              space: TuneSpace | None = None, log=print) -> Iterator[LabSweep]:
    """Sweep the labs, as `grade.py tune`'s options say (every lab built at once, then one lab at a time
    on the GPU); yields each lab's sweep when measured (best None, nothing written: no variant passed).
    Raises TuneError when a lab has no tune.json or no reference, or there is no GPU, before building."""
    sweeps = []
    for lab_dir in map(Path, lab_dirs):
        lab_space = space or load_space(lab_dir)
        if lab_space is None:
            raise TuneError(f"{display_path(lab_dir)} has no {TUNE_FILE}: nothing to sweep")
        src = reference_source(lab_dir)
        if not src.is_file():
            raise TuneError(f"{display_path(src)} is missing: a student kit has no reference to tune")
        found = candidates(lab_space, source_defaults(src))
        if local_device() is None:
            raise TuneError("no GPU (nvidia-smi lists none that CUDA_VISIBLE_DEVICES lets through): "
                            "a sweep times every variant on the GPU")
        sweeps.append(LabSweep(lab_dir.name, None, random.randrange(1 << 31) if seed is None else seed,
                               [Variant(p, is_default=(i == 0)) for i, p in enumerate(found)], min_gain=min_gain,
                               lab_dir=lab_dir, space=lab_space))
    _build_all(sweeps, jobs, log)
    for sweep in sweeps:
        yield _measure(sweep, write, log)


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
    path = tuning_path(lab_dir, sweep.device)
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
