"""A lab's tuning files: the sweep's bounds (labs/NN-slug/tune.json), the results per GPU
(labs/NN-slug/tuning/<device-slug>.json) and `grade.py tune --print-defines` for lab.mk; their keys
and syntax: grader/README.md, section 10.  A parameter NAME is the macro TUNE_NAME of the reference.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

from .. import KIT_ROOT
from ..base import gpus, labspec
from ..base.files import display_path, read_json
from ..grading import build

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
