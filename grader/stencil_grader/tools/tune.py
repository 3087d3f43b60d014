"""Parameter sweeps of the reference solutions: `make tune`, `grade.py tune`.

Each reference declares its compile-time parameters with defaults, one block each:

    #ifndef TUNE_K
    #define TUNE_K 8          /* sweeps per pass at most */
    #endif

and each lab that can be tuned states the bounds of its sweep in labs/NN-slug/tune.json:

    {
      "about": "what the sweep varies, and why these values",
      "parameters": {"K": [4, 8], "VEC": [4, 8], "SEG": [64, 128, 256]},
      "constraints": ["(2 * VEC * K + 64) * OCC <= 2048"],
      "plot": {"x": "SEG", "y": "VEC"}
    }

A parameter NAME is the macro TUNE_NAME of the lab's reference/NN-slug/kernel.cu; its
values are integers.  The candidates are every combination of the values for which every
constraint holds (integer arithmetic: + - * // % ( ), comparisons, and, or, not, min,
max), plus the file's own defaults.  "plot" names the two parameters of the heat map
(x and y; each cell shows the best variant over the other parameters); without it the
sweep is drawn as bars, one per variant.

A sweep (tune_lab; `grade.py tune` does the three steps for every lab at once) is:
prepare_lab, the candidates; build_variants, every candidate built in parallel on the
CPUs (grading/build.py, each with its -D macros as lab.mk's KERNEL_DEFINES, in
build/tune/<lab>/<variant>/); measure_lab, one variant at a time on the GPU: the static
checks, the lab's Check suite (grading/checkrun.run_check), and,
only for a variant that passes every case, the bench (grading/bench): the bench times the
launcher with the L2 flushed and checks every timed call's output.  The best variant by
effective bandwidth (a fraction of the copy bandwidth measured in the same run) replaces
the defaults only when it is at least `min_gain` faster than them, so that measurement
noise does not move the defaults.  It is written, with every variant's figures, to

    labs/NN-slug/tuning/<device-slug>.json     (device_slug("NVIDIA H100 80GB HBM3") =
                                                "nvidia-h100-80gb-hbm3")

which the reference's builds then use on that GPU: lab.mk asks `grade.py tune
--print-defines LAB` for KERNEL_DEFINES whenever IMPL=reference and KERNEL_DEFINES is not
given (make check of the reference, make tour, make calibrate).  A GPU without a tuning
file gets the defaults of the source.

The tuning file:

    {"lab": ..., "device": ..., "date": "YYYY-MM-DD", "seed": N, "nvcc": "release ...",
     # (the figures below are an example)
     "best": {"K": 8, ...},                    # what the reference's builds use
     "default": {"K": 8, ...},                 # the source's defaults when measured
     "best_ratio": 3.6, "default_ratio": 3.4,  # fractions of the copy bandwidth
     "min_gain": 0.02,
     "variants": [{"params": {...}, "status": "ok", "ratio": ..., "gbps": ..., "ms": ...,
                   "copy_gbps": ..., "registers": ..., "spill_bytes": ..., "message": ""}, ...]}

registers and spill_bytes: the most of any kernel of the build (ptxas), per thread.

Units: gbps and copy_gbps in GB/s (1 GB = 1e9 bytes, the bench's), ms the bench's median
milliseconds per call, ratio = gbps / copy_gbps.
"""

from __future__ import annotations

import ast
import datetime
import json
import os
import random
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path

from .. import KIT_ROOT
from ..base import gpus, labspec
from ..base.files import read_json
from ..grading import bench, build, checkrun, static

TUNE_FILE = "tune.json"
TUNING_DIR = "tuning"
DEFINE_PREFIX = "TUNE_"
#: A variant replaces the defaults only when this much faster (fraction of their ratio).
DEFAULT_MIN_GAIN = 0.02
#: Seconds one variant's build may take (nvcc of kernel.cu and the lab's harness objects).
BUILD_TIMEOUT_S = 600.0
#: The outcomes of a variant, in the order a table explains them.
STATUSES = ("ok", "compile_error", "forbidden", "constraint", "incorrect", "check_error",
            "wrong_output", "implausible", "bench_error", "no_gpu", "not_run")

_DEFAULT_RE = re.compile(r"^[ \t]*#[ \t]*ifndef[ \t]+(" + DEFINE_PREFIX + r"\w+)[ \t]*\n"
                         r"[ \t]*#[ \t]*define[ \t]+\1[ \t]+(-?\d+)\b", re.MULTILINE)


class TuneError(RuntimeError):
    """A sweep could not be set up or measured: a malformed tune.json or tuning file, a
    reference without the declared defaults, no GPU, or defaults that fail their own lab."""


# ---- the sweep's bounds: tune.json --------------------------------------------------------


@dataclass
class TuneSpace:
    """A lab's tune.json: parameter names (macro TUNE_<name>) with candidate values, the
    constraints between them (expressions, see module docstring), the heat map's axes."""

    lab_dir: Path
    parameters: dict[str, list[int]]
    constraints: list[str] = field(default_factory=list)
    plot_x: str | None = None
    plot_y: str | None = None
    about: str = ""

    @property
    def lab(self) -> str:
        return self.lab_dir.name


def load_space(lab_dir: Path) -> TuneSpace | None:
    """LAB_DIR/tune.json as a TuneSpace, None when the lab has none (load_space_file)."""
    path = Path(lab_dir) / TUNE_FILE
    return load_space_file(path, lab_dir) if path.is_file() else None


def load_space_file(path: Path, lab_dir: Path) -> TuneSpace:
    """A tune.json (the lab's, or another with --space) as LAB_DIR's TuneSpace.

    Raises TuneError naming the file and the key that is wrong (unknown keys, a parameter
    name that is not an identifier, values that are not distinct integers, a constraint
    that does not parse or names an unknown parameter, plot axes that are not parameters).
    """
    path = Path(path)
    shown = labspec.display_path(path)
    raw = read_json(path, TuneError)
    if not isinstance(raw, dict):
        raise TuneError(f"{shown}: the file holds {type(raw).__name__}; expected an object")
    unknown = set(raw) - {"about", "parameters", "constraints", "plot"}
    if unknown:
        raise TuneError(f"{shown}: unknown keys {sorted(unknown)}; allowed: about, parameters, "
                        "constraints, plot")
    params = raw.get("parameters")
    if not isinstance(params, dict) or not params:
        raise TuneError(f"{shown}: \"parameters\" must be an object of NAME: [values], not empty")
    parameters: dict[str, list[int]] = {}
    for name, values in params.items():
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            raise TuneError(f"{shown}: parameter {name!r}: a name is upper case, digits and _ "
                            f"(the macro is {DEFINE_PREFIX}<name>)")
        if (not isinstance(values, list) or not values
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in values)
                or len(set(values)) != len(values)):
            raise TuneError(f"{shown}: parameters.{name}: expected a list of distinct integers, "
                            f"got {values!r}")
        parameters[name] = list(values)
    constraints = raw.get("constraints", [])
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise TuneError(f"{shown}: \"constraints\" must be a list of strings")
    for text in constraints:
        try:
            names = _names(_parse(text))
        except (SyntaxError, ValueError) as err:
            raise TuneError(f"{shown}: constraint {text!r}: {err}") from None
        unknown_names = names - set(parameters) - set(_FUNCTIONS)
        if unknown_names:
            raise TuneError(f"{shown}: constraint {text!r} names {sorted(unknown_names)}, "
                            f"which are not parameters ({', '.join(parameters)})")
    plot = raw.get("plot", {})
    if not isinstance(plot, dict) or set(plot) - {"x", "y"}:
        raise TuneError(f"{shown}: \"plot\" must be an object with keys x and y")
    for axis in ("x", "y"):
        if axis in plot and plot[axis] not in parameters:
            raise TuneError(f"{shown}: plot.{axis} = {plot[axis]!r} is not a parameter "
                            f"({', '.join(parameters)})")
    about = raw.get("about", "")
    if not isinstance(about, str):
        raise TuneError(f"{shown}: \"about\" must be a string")
    return TuneSpace(Path(lab_dir), parameters, list(constraints), plot.get("x"), plot.get("y"), about)


_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd, ast.Not,
              ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_FUNCTIONS = {"min": min, "max": max}


def _parse(text: str) -> ast.Expression:
    """The constraint as a checked AST: only integers, parameter names, min/max and the
    operators of _OPERATORS.  Raises SyntaxError or ValueError naming what is not allowed."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare,
                             ast.Name, ast.Load, ast.Call)):
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name)
                                                   and node.func.id in _FUNCTIONS and not node.keywords):
                raise ValueError("the only calls allowed are min(...) and max(...)")
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            continue
        if isinstance(node, _OPERATORS):
            continue
        raise ValueError(f"{type(node).__name__} is not allowed (integers, parameter names, "
                         "+ - * // % ( ), comparisons, and, or, not, min, max)")
    return tree


def _names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def evaluate(text: str, values: dict[str, int]) -> bool:
    """Whether constraint `text` holds for `values` (parameter name -> integer).

    >>> evaluate("2 * VEC * K <= 128 and K % 2 == 0", {"VEC": 4, "K": 8})
    True
    Raises ValueError for a name without a value or a division by zero.
    """
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise ValueError(f"{node.id} has no value")
            return values[node.id]
        if isinstance(node, ast.BoolOp):
            results = (ev(v) for v in node.values)
            return all(results) if isinstance(node.op, ast.And) else any(results)
        if isinstance(node, ast.UnaryOp):
            x = ev(node.operand)
            return not x if isinstance(node.op, ast.Not) else (-x if isinstance(node.op, ast.USub) else +x)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0:
                raise ValueError(f"division by zero in {text!r}")
            return {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                    ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b}[type(node.op)]()
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = ev(right_node)
                ok = {ast.Eq: left == right, ast.NotEq: left != right, ast.Lt: left < right,
                      ast.LtE: left <= right, ast.Gt: left > right, ast.GtE: left >= right}[type(op)]
                if not ok:
                    return False
                left = right
            return True
        if isinstance(node, ast.Call):
            return _FUNCTIONS[node.func.id](*(ev(a) for a in node.args))
        raise ValueError(f"cannot evaluate {type(node).__name__}")

    return bool(ev(_parse(text)))


def source_defaults(src: Path) -> dict[str, int]:
    """The TUNE_ defaults a kernel.cu declares: {"K": 8, ...} from each
    `#ifndef TUNE_K` directly followed by `#define TUNE_K 8` (integer values only)."""
    text = Path(src).read_text(errors="replace")
    return {m.group(1)[len(DEFINE_PREFIX):]: int(m.group(2)) for m in _DEFAULT_RE.finditer(text)}


def reference_source(lab_dir: Path) -> Path:
    return build.impl_source(Path(lab_dir).name, "reference", Path(lab_dir).parents[1])


def candidates(space: TuneSpace, defaults: dict[str, int]) -> list[dict[str, int]]:
    """Every combination of the values that satisfies every constraint, the defaults first
    (whether or not they satisfy the constraints: they are the baseline).  Raises TuneError
    when the source lacks a default for a parameter of tune.json."""
    missing = [p for p in space.parameters if p not in defaults]
    if missing:
        raise TuneError(f"{labspec.display_path(reference_source(space.lab_dir))} declares no default "
                        f"for {', '.join(DEFINE_PREFIX + p for p in missing)} (an `#ifndef "
                        f"{DEFINE_PREFIX}{missing[0]}` / `#define {DEFINE_PREFIX}{missing[0]} <value>` block)")
    base = {p: defaults[p] for p in space.parameters}
    found = [base]
    names = list(space.parameters)
    for combo in product(*(space.parameters[p] for p in names)):
        values = dict(zip(names, combo))
        if values != base and all(evaluate(c, values) for c in space.constraints):
            found.append(values)
    return found


# ---- where the results go: tuning/<device>.json ------------------------------------------


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
    shown = labspec.display_path(path)
    data = read_json(path, TuneError)
    best = data.get("best") if isinstance(data, dict) else None
    if not isinstance(best, dict) or not all(
            isinstance(k, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", k) and isinstance(v, int)
            and not isinstance(v, bool) for k, v in best.items()):
        raise TuneError(f"{shown}: \"best\" must be an object of NAME: integer")
    return data


def tuned_parameters(lab_dir: Path, device: str | None) -> dict[str, int]:
    """The parameters the reference of LAB_DIR is built with on `device`: the tuning file's
    "best", checked against the source's defaults (a name the source no longer declares
    raises TuneError: the file is stale); {} without a device or a tuning file."""
    if not device:
        return {}
    data = load_tuning(lab_dir, device)
    if data is None:
        return {}
    declared = source_defaults(reference_source(lab_dir))
    stale = [k for k in data["best"] if k not in declared]
    if stale:
        raise TuneError(f"{labspec.display_path(tuning_path(lab_dir, device))}: "
                        f"{', '.join(DEFINE_PREFIX + k for k in stale)} no longer declared in "
                        f"{labspec.display_path(reference_source(lab_dir))}: run make tune again, "
                        "or delete the file")
    return dict(data["best"])


def as_defines(params: dict[str, int]) -> dict[str, int]:
    """{"K": 8} -> {"TUNE_K": 8}: the macros of build.build(defines=...)."""
    return {DEFINE_PREFIX + k: v for k, v in params.items()}


def local_device() -> str | None:
    """The name of the GPU this process would use (nvidia-smi's name of the first GPU that
    CUDA_VISIBLE_DEVICES lets through, by index or UUID), None without one.  nvidia-smi
    and the CUDA runtime (the bench's "device") give the same name to the same GPU."""
    found, _why = gpus.list_gpus()
    if not found:
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return found[0].name
    first = visible.split(",")[0].strip()
    for g in found:
        if first == str(g.index) or (first and g.uuid.startswith(first)):
            return g.name
    return None                                   # "" or "-1": no GPU visible


def print_defines(lab: str, kit_root: Path = KIT_ROOT) -> str:
    """What lab.mk puts in KERNEL_DEFINES for IMPL=reference: '-DTUNE_K=8 ...' from this
    GPU's tuning file of LAB (a lab directory name, or its number), '' when there is none.
    Raises TuneError for a lab that does not exist or a broken or stale tuning file."""
    lab_dir = find_lab(lab, kit_root)
    return build.kernel_defines(as_defines(tuned_parameters(lab_dir, local_device())))


def find_lab(name: str, kit_root: Path = KIT_ROOT) -> Path:
    """A lab directory from its name ('08-temporal-blocking') or number ('08', '8')."""
    labs = labspec.discover_labs(kit_root)
    for lab_dir in labs:
        number = lab_dir.name.split("-")[0]
        if name in (lab_dir.name, number) or (name.isdigit() and number.isdigit() and int(name) == int(number)):
            return lab_dir
    raise TuneError(f"no lab {name!r} (labs: {', '.join(d.name for d in labs)})")


# ---- one sweep -------------------------------------------------------------------------------


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


def variant_name(params: dict[str, int], is_default: bool = False) -> str:
    """'default', or the build folder's name of a variant: 'K8-VEC4-SEG128'."""
    return "default" if is_default else "-".join(f"{k}{v}" for k, v in params.items())


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
    space: TuneSpace | None = None
    src: Path | None = None
    spec: labspec.LabSpec | None = None


def _hottest_kernel(built: build.BuildResult) -> tuple[int | None, int | None]:
    """(most registers of any entry function, most spill bytes) from the ptxas report."""
    entries = [k for k in built.kernels if k.entry and k.registers is not None]
    if not entries:
        return None, None
    return max(k.registers for k in entries), max(k.spill_stores + k.spill_loads for k in entries)


def _measure(spec: labspec.LabSpec, src: Path, variant: Variant, build_dir: Path, seed: int) -> None:
    """The GPU stages of one built variant, in the grader's order: static checks, every
    case of the Check suite, then (only when all pass) the bench.  Fills `variant`."""
    start = time.monotonic()
    try:
        result = static.run_static(spec, src, build_dir)
        for severity in ("forbidden", "constraint"):
            failed = result.failed(severity)
            if failed:
                variant.status, variant.message = severity, failed[0].message
                return
        run = checkrun.run_check(build_dir, spec.check.suite_timeout_s, seed, spec.check.case_timeout_s)
        if run.status == "no_gpu":
            variant.status, variant.message = "no_gpu", run.message or "no GPU"
            return
        if run.total and run.passed < run.total:
            first = next(c for c in run.cases if c.outcome != "pass")
            variant.status = "incorrect"
            variant.message = (f"{run.passed}/{run.total} cases pass; first: {first.tcase} "
                               f"{first.label}: {first.outcome}: {first.message}")[:400]
            return
        if run.status != "ok" or run.total == 0:
            variant.status = "check_error"
            variant.message = f"check: {run.status}: {run.message}".strip()
            return
        timed = bench.run_bench(build_dir, spec.bench.timeout_s, seed)
        if timed.status == "no_gpu":
            variant.status, variant.message = "no_gpu", timed.message
            return
        if timed.status != "ok":
            variant.status, variant.message = "bench_error", f"{timed.status}: {timed.message}"
            return
        data = timed.data
        variant.gbps, variant.copy_gbps = data["gbps"], data["copy_gbps"]
        variant.ms, variant.ratio = data["ms_median"], data["ratio"]
        if not data["output_ok"]:
            variant.status, variant.message = "wrong_output", data.get("output_message", "")
            variant.ratio = None
        elif data["ratio"] > spec.max_plausible_ratio:
            variant.status = "implausible"
            variant.message = f"ratio {data['ratio']:.2f} > {spec.max_plausible_ratio:.2f}"
        else:
            variant.status = "ok"
        variant.device = data.get("device")
    finally:
        variant.gpu_s = time.monotonic() - start


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
                space: TuneSpace | None = None) -> LabSweep:
    """The candidates of one lab's sweep, not yet built (see tune_lab for the arguments).
    Raises TuneError when the lab has no tune.json or no reference, or there is no GPU."""
    lab_dir = Path(lab_dir)
    space = space or load_space(lab_dir)
    if space is None:
        raise TuneError(f"{labspec.display_path(lab_dir)} has no {TUNE_FILE}: nothing to sweep")
    src = reference_source(lab_dir)
    if not src.is_file():
        raise TuneError(f"{labspec.display_path(src)} is missing: a student kit has no reference to tune")
    found = candidates(space, source_defaults(src))
    if local_device() is None:
        raise TuneError("no GPU (nvidia-smi lists none that CUDA_VISIBLE_DEVICES lets through): "
                        "a sweep times every variant on the GPU")
    sweep = LabSweep(lab_dir.name, None, random.randrange(1 << 31) if seed is None else seed,
                     [Variant(p, is_default=(i == 0)) for i, p in enumerate(found)], min_gain=min_gain)
    sweep.lab_dir, sweep.space, sweep.src = lab_dir, space, src
    sweep.spec = labspec.load(lab_dir / "lab.json")
    return sweep


def build_dir(sweep: LabSweep, variant: Variant) -> Path:
    """build/tune/<lab>/<variant>: where a variant is built."""
    return KIT_ROOT / "build" / "tune" / sweep.lab / variant.name


def build_variants(sweeps: list[LabSweep], jobs: int | None = None, log=print) -> None:
    """Build every variant of every sweep in parallel on the CPUs (`jobs` at once, default
    the CPU count).  The first build goes alone: it makes the harness library that all
    builds share (build/harness/<arch>), which the others then only read."""
    t0 = time.monotonic()
    work = [(s, v) for s in sweeps for v in s.variants]

    def make(item: tuple[LabSweep, Variant]) -> None:
        sweep, v = item
        result = build.build(sweep.lab_dir, "reference", build_dir(sweep, v), timeout_s=BUILD_TIMEOUT_S,
                             defines={} if v.is_default else as_defines(v.params))
        v.build_s = result.seconds
        if not result.ok:
            v.status, v.message = "compile_error", process_tail(result.message)
        else:
            v.registers, v.spill_bytes = _hottest_kernel(result)

    if work:
        make(work[0])
        with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
            list(pool.map(make, work[1:]))
    seconds = time.monotonic() - t0
    for s in sweeps:
        s.seconds["build"] = seconds
    failed = sum(v.status == "compile_error" for _, v in work)
    log(f"== built {len(work)} variants of {len(sweeps)} lab(s) in {seconds:.0f} s ({failed} failed)")


def measure_lab(sweep: LabSweep, write: bool = True, plot_dir: Path | None = None, log=print) -> LabSweep:
    """The GPU stages of every built variant, one at a time, then the choice of the best,
    the tuning file (when `write`) and the picture (in plot_dir, matplotlib optional).
    Raises TuneError when the GPU is gone (a variant found none)."""
    log(f"== {sweep.lab}: {len(sweep.variants)} variants of {', '.join(sweep.space.parameters)} "
        f"(defaults {variant_name(sweep.variants[0].params)}); seed {sweep.seed}")
    t0 = time.monotonic()
    for v in sweep.variants:
        if v.status == "compile_error":
            log(f"   {v.name:<34} {v.status:<12} {v.message.splitlines()[-1][:100] if v.message else ''}")
            continue
        _measure(sweep.spec, sweep.src, v, build_dir(sweep, v), sweep.seed)
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
    if plot_dir is not None and sweep.device is not None:
        sweep.plot = draw_sweep(sweep, sweep.space, Path(plot_dir) / f"tune-{sweep.lab}.png")
    return sweep


def tune_lab(lab_dir: Path, seed: int | None = None, jobs: int | None = None,
             min_gain: float = DEFAULT_MIN_GAIN, write: bool = True, plot_dir: Path | None = None,
             space: TuneSpace | None = None, log=print) -> LabSweep:
    """Sweep one lab (see the module docstring); returns every variant's outcome.

    seed: the inputs' seed for every variant (random when None, printed); jobs: parallel
    builds (default: the CPU count); write: write the tuning file; plot_dir: where the
    sweep's picture goes (matplotlib optional); space: instead of LAB_DIR/tune.json.
    Raises TuneError when the lab has no tune.json or no reference, or there is no GPU;
    a sweep in which no variant passed returns with best None and writes nothing.
    """
    sweep = prepare_lab(lab_dir, seed, min_gain, space)
    build_variants([sweep], jobs, log)
    return measure_lab(sweep, write, plot_dir, log)


def process_tail(message: str, lines: int = 6) -> str:
    return "\n".join(message.strip().splitlines()[-lines:])


def write_tuning(lab_dir: Path, sweep: LabSweep) -> Path:
    """Write LAB_DIR/tuning/<device>.json from a finished sweep (replacing the file of the
    same GPU: `make tune` is the request to do so); returns its path."""
    path = tuning_path(lab_dir, sweep.device)
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
        lines.append(f"wrote {labspec.display_path(sweep.written)}{was}")
    if sweep.plot:
        lines.append(f"plot: {labspec.display_path(sweep.plot)}")
    lines.append(f"time: GPU stages {sweep.seconds.get('gpu', 0):.0f} s (builds, shared by the labs "
                 f"of this run: {sweep.seconds.get('build', 0):.0f} s)")
    return "\n".join(lines)


def _grid(variants: list[dict], x: str, y: str) -> tuple[list[int], list[int], dict]:
    """Heat-map cells: the best ratio over the other parameters per (x, y) value pair."""
    xs = sorted({v["params"][x] for v in variants})
    ys = sorted({v["params"][y] for v in variants})
    cells: dict[tuple[int, int], float] = {}
    for v in variants:
        if v.get("status") == "ok" and v.get("ratio") is not None:
            key = (v["params"][x], v["params"][y])
            cells[key] = max(cells.get(key, 0.0), v["ratio"])
    return xs, ys, cells


def _draw_panel(ax, variants: list[dict], x: str | None, y: str | None, title: str,
                best: dict | None, default: dict | None, vmin: float | None = None,
                vmax: float | None = None):
    """One sweep into matplotlib axes: a heat map over (x, y) (colours from vmin to vmax,
    default the panel's own range), or the ratio of every variant as bars."""
    if x and y and x != y:
        xs, ys, cells = _grid(variants, x, y)
        import math
        data = [[cells.get((xv, yv), math.nan) for xv in xs] for yv in ys]
        top = vmax if vmax is not None else max(cells.values(), default=1.0)
        bottom = vmin if vmin is not None else min(cells.values(), default=0.0)
        bottom = min(bottom, top - 1e-6)
        image = ax.imshow(data, origin="lower", cmap="viridis", vmin=bottom, vmax=top, aspect="auto")
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_yticks(range(len(ys)), [str(v) for v in ys])
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        for i, yv in enumerate(ys):
            for j, xv in enumerate(xs):
                if (xv, yv) in cells:
                    text = f"{cells[(xv, yv)]:.2f}"
                    if best and (best[x], best[y]) == (xv, yv):
                        text += "\nbest"
                    if default and (default[x], default[y]) == (xv, yv):
                        text += "\ndefault"
                    light = cells[(xv, yv)] > bottom + 0.6 * (top - bottom)   # dark text on yellows
                    ax.text(j, i, text, ha="center", va="center", color="black" if light else "white",
                            fontsize=8)
                else:
                    ax.text(j, i, "failed\nor skipped", ha="center", va="center", color="grey", fontsize=7)
        ax.set_title(title, fontsize=9)
        return image
    ok = [v for v in variants if v.get("status") == "ok" and v.get("ratio") is not None]
    labels = [variant_name(v["params"]) for v in ok]
    ax.bar(range(len(ok)), [v["ratio"] for v in ok],
           color=["tab:orange" if best and v["params"] == best else "tab:blue" for v in ok])
    ax.set_xticks(range(len(ok)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("fraction of copy bandwidth")
    ax.set_title(title, fontsize=9)
    return None


def draw_sweep(sweep: LabSweep, space: TuneSpace, path: Path) -> Path | None:
    """The sweep of one lab on one GPU as PNG (heat map over tune.json's plot axes, else
    bars); None when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    variants = [asdict(v) for v in sweep.variants]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    image = _draw_panel(ax, variants, space.plot_x, space.plot_y,
                        f"{sweep.lab} on {sweep.device}: fraction of copy bandwidth\n"
                        f"(best over the other parameters)",
                        sweep.best.params if sweep.best else None,
                        sweep.default.params if sweep.default else None)
    if image is not None:
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def draw_devices(lab: str, devices: list[str], path: Path, kit_root: Path = KIT_ROOT) -> Path:
    """The committed sweeps of one lab on several GPUs side by side (the handouts' picture),
    with one colour scale.  Raises TuneError for a GPU without a tuning file, or when
    matplotlib is not installed."""
    lab_dir = find_lab(lab, kit_root)
    space = load_space(lab_dir)
    if space is None:
        raise TuneError(f"{lab_dir.name} has no {TUNE_FILE}")
    files = []
    for device in devices:
        data = load_tuning(lab_dir, device)
        if data is None:
            raise TuneError(f"no tuning file {labspec.display_path(tuning_path(lab_dir, device))}")
        files.append(data)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TuneError("drawing needs matplotlib (pip install matplotlib)") from None
    ratios = [v["ratio"] for d in files for v in d["variants"]
              if v.get("status") == "ok" and v.get("ratio") is not None]
    vmin, vmax = min(ratios, default=0.0), max(ratios, default=1.0)
    fig, axes = plt.subplots(1, len(files), figsize=(5.2 * len(files), 4.3), squeeze=False)
    image = None
    for ax, data in zip(axes[0], files):
        title = (f"{data['device']} ({data['date']})\nbest {variant_name(data['best'])}: "
                 f"{data['best_ratio']:.2f} x copy")
        image = _draw_panel(ax, data["variants"], space.plot_x, space.plot_y, title,
                            data["best"], data.get("default"), vmin, vmax) or image
    if image is not None:
        fig.colorbar(image, ax=list(axes[0]), label="effective bandwidth / copy bandwidth")
    others = [p for p in space.parameters if p not in (space.plot_x, space.plot_y)]
    fig.suptitle(f"make tune, {lab_dir.name}: effective bandwidth / copy bandwidth measured in the same run"
                 + (f"\n(each cell: the best over {', '.join(others)})" if others else ""), fontsize=10, y=1.06)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def tunable_labs(kit_root: Path = KIT_ROOT) -> list[Path]:
    """Every lab directory with a tune.json, in lab order."""
    return [d for d in labspec.discover_labs(kit_root) if (d / TUNE_FILE).is_file()]
