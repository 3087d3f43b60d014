"""lab.json (labs/01-naive-5pt/lab.json is one): load and validate it (LabSpecError names the file, the
key, what was found and what is allowed), and write the C header and make fragment the build uses.
Units: |got - ref| <= atol + rtol*|ref|; seconds; floors and targets in fractions of the copy bandwidth.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from . import kinds
from .constraints import Constraints, parse as parse_constraints
from .files import Validator, display_path, read_json

#: The bench's repetitions: at least MIN_REPETITIONS timed calls, then more until the 95%
#: confidence interval of the median is within PRECISION of it on either side, or
#: bench.repetitions (the cap) is reached (grader/harness/bench.c).
MIN_REPETITIONS = 10
PRECISION = 0.01
#: A ratio above this is rejected as faster than copying memory can be; a target may not exceed it.
#: A lab that fuses sweeps (bench.max_fused_sweeps = K, lab 8) uses K times this instead:
#: LabSpec.max_plausible_ratio.
MAX_PLAUSIBLE_RATIO = 1.05
GENERIC_TARGET = "generic"

_LAB_NAME = re.compile(r"^(\d\d)-[a-z0-9]+(?:-[a-z0-9]+)*$")
_AT_LEAST_0 = ("a number >= 0", lambda x: x >= 0)
_AT_LEAST_1 = ("an integer >= 1", lambda n: n >= 1)


class LabSpecError(ValueError):
    """lab.json is missing, is not JSON, or breaks the schema; the message says where and how."""


@dataclass(frozen=True)
class Tolerance:
    """|got - want| <= atol + rtol * |want| per cell; extra: the kind's own tolerances
    (grader/kinds.json "tolerances"), as (name, value) pairs."""

    rtol: float
    atol: float
    extra: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class CheckLimits:
    case_timeout_s: float   # seconds one case may run (Check's tcase timeout)
    suite_timeout_s: float  # seconds the whole `check` run may take


@dataclass(frozen=True)
class BenchGrid:
    nx: int
    ny: int
    nz: int
    steps: int          # sweeps per launcher call (lab 4); 1 elsewhere
    repetitions: int    # the most timed repetitions (the median is scored; see MIN_REPETITIONS)
    timeout_s: float    # seconds the whole `bench` run may take
    # The most sweeps a kernel may fuse into one pass over memory (lab 8's K; optional in lab.json,
    # 1 when absent).  K sweeps per pass move the grid once for K sweeps of compulsory bytes, so the
    # plausibility bound is K x copy bandwidth (x 1.05): LabSpec.max_plausible_ratio.
    max_fused_sweeps: int = 1


@dataclass(frozen=True)
class Points:
    correctness: float
    performance: float

    @property
    def total(self) -> float:
        return self.correctness + self.performance


@dataclass(frozen=True)
class Target:
    """Performance bounds as fractions of the copy bandwidth: 0 points at floor, full at target."""

    floor: float
    target: float
    calibrated: str | None = None   # free text: where and how the figures were measured
    reference_ratio: float | None = None   # the reference's ratio on that GPU, when calibrated


@dataclass(frozen=True)
class TargetsPolicy:
    """lab.json's optional "targets_policy" (a bonus lab): targets set by a stated rule rather than
    calibrated from the reference, the same floor and target (fractions of the copy bandwidth) on
    every GPU; every entry of "targets" must hold them, and `make calibrate` leaves the lab alone."""

    floor: float
    target: float
    why: str            # the rule in words: what earns full marks, what earns a pass


@dataclass(frozen=True)
class TargetChoice:
    """The target table used for one device, and why."""

    table: str          # the GPU name of the table, or "generic"
    target: Target
    note: str           # e.g. "no table for NVIDIA L4; generic used"


@dataclass(frozen=True)
class LabSpec:
    path: Path
    lab: str
    number: int
    title: str
    api: str
    tolerance: Tolerance
    check: CheckLimits
    bench: BenchGrid
    constraints: Constraints
    points: Points
    targets: dict[str, Target] = field(hash=False)
    targets_policy: TargetsPolicy | None = None
    # lab.json's optional "bonus": true: an extra-credit lab, counted on top of the required
    # labs in every gradebook the class files write (classes/gradebook.py), never as required
    bonus: bool = False

    @property
    def lab_dir(self) -> Path:
        return self.path.parent

    @property
    def kind(self) -> kinds.Kind:
        """The problem kind lab.json's "api" names (grader/kinds.json)."""
        return kinds.get(self.api)

    @property
    def boundary(self) -> str:
        """"dirichlet" or "periodic": a fact of the kind, not of the lab."""
        return self.kind.boundary

    @property
    def max_plausible_ratio(self) -> float:
        """The largest believable ratio: MAX_PLAUSIBLE_RATIO (1.05) x bench.max_fused_sweeps."""
        return plausible_ratio(self.bench.max_fused_sweeps)

    def target_for(self, device_name: str | None) -> TargetChoice:
        """The target table whose name equals device_name exactly, else the generic one."""
        if device_name and device_name in self.targets:
            return TargetChoice(device_name, self.targets[device_name], "the device's own table")
        why = f"no table for {device_name}" if device_name else "device unknown"
        return TargetChoice(GENERIC_TARGET, self.targets[GENERIC_TARGET], f"{why}; generic used")


def plausible_ratio(max_fused_sweeps: int = 1) -> float:
    """MAX_PLAUSIBLE_RATIO x K: a kernel fusing K sweeps per pass moves the grid once per K sweeps."""
    return MAX_PLAUSIBLE_RATIO * max_fused_sweeps


#: Top-level keys and what each holds (for "is missing" messages).
_TOP_KEYS = {
    "lab": 'the lab name "NN-slug"',
    "number": "the lab number",
    "title": "a one-line title",
    "api": "a problem kind of grader/kinds.json",
    "tolerance": "an object with keys rtol, atol",
    "check": "an object with keys case_timeout_s, suite_timeout_s",
    "bench": "an object with keys nx, ny, nz, steps, repetitions, timeout_s (max_fused_sweeps optional)",
    "constraints": "an object with keys shared_memory, no_div_rem, forbidden_calls (max_shared_planes, "
                   "shared_tile, grid_storage optional: base/constraints.py)",
    "points": "an object with keys correctness, performance",
    "targets": 'an object of GPU name (or "generic") -> {floor, target}',
}


def parse(data, path: Path) -> LabSpec:
    """Validate the decoded JSON `data` of the lab.json at `path`; raises LabSpecError."""
    v = Validator(display_path(path), LabSpecError)
    if not isinstance(data, dict):
        v.fail("the top level", "an object", data)
    v.known_keys(data, "", tuple(_TOP_KEYS) + ("targets_policy", "bonus"))
    for key, holds in _TOP_KEYS.items():
        if key not in data:
            raise LabSpecError(f"{v.file}: {key} is missing ({holds})")

    lab = data["lab"]
    match = _LAB_NAME.match(lab) if isinstance(lab, str) else None
    if not match:
        v.fail("lab", 'a name "NN-slug" (two digits, a dash, lower-case words joined by dashes)', lab)
    folder = Path(path).resolve().parent.name
    if _LAB_NAME.match(folder) and folder != lab:
        v.fail("lab", f'the name of the folder holding lab.json ("{folder}")', lab)
    number = v.integer(data, "number", "", f"the integer {int(match.group(1))} (the lab name's digits)",
                       lambda n: n == int(match.group(1)))
    title = data["title"]
    if not isinstance(title, str) or not title.strip():
        v.fail("title", "a non-empty string", title)
    try:
        table = kinds.load()
    except kinds.KindError as err:
        raise LabSpecError(str(err)) from None
    api = v.choice(data, "api", "", tuple(table))
    kind = table[api]

    tol = v.obj(data, "tolerance", "", ("rtol", "atol") + kind.tolerances)
    rtol, atol, *extra = (v.number(tol, k, "tolerance.", *_AT_LEAST_0) for k in ("rtol", "atol") + kind.tolerances)
    tolerance = Tolerance(rtol, atol, tuple(zip(kind.tolerances, extra)))

    chk = v.obj(data, "check", "", ("case_timeout_s", "suite_timeout_s"))
    case_s = v.number(chk, "case_timeout_s", "check.", "a number of seconds > 0", lambda x: x > 0)
    suite_s = v.number(chk, "suite_timeout_s", "check.",
                       f"a number of seconds >= check.case_timeout_s ({case_s:g})", lambda x: x >= case_s)

    b = v.obj(data, "bench", "", ("nx", "ny", "nz", "steps", "repetitions", "timeout_s"),
              optional=("max_fused_sweeps",))
    one = ("1 for the 2D kind " + api, lambda n: n == 1)
    nx, ny, nz, steps, repetitions = (v.integer(b, k, "bench.", *rule) for k, rule in (
        ("nx", _AT_LEAST_1), ("ny", _AT_LEAST_1), ("nz", one if kind.dims == 2 else _AT_LEAST_1),
        ("steps", _AT_LEAST_1 if kind.multi_step else (f"1 for api {api} (one sweep per call)", one[1])),
        ("repetitions", _AT_LEAST_1)))
    # K sweeps fused per pass: no kernel can fuse more sweeps than one call runs.
    fused = v.integer(b, "max_fused_sweeps", "bench.", f"an integer in [1, bench.steps = {steps}] (the largest K "
                      "a kernel may fuse)", lambda n: 1 <= n <= steps) if "max_fused_sweeps" in b else 1
    bench = BenchGrid(nx, ny, nz, steps, repetitions,
                      v.number(b, "timeout_s", "bench.", "a number of seconds > 0", lambda x: x > 0), fused)

    constraints = parse_constraints(v, data)

    p = v.obj(data, "points", "", ("correctness", "performance"))
    points = Points(*(v.number(p, k, "points.", *_AT_LEAST_0) for k in ("correctness", "performance")))
    if points.total <= 0:
        v.fail("points", "correctness and performance points with a sum > 0", p)

    bonus = v.boolean(data, "bonus", "") if "bonus" in data else False
    return LabSpec(path=Path(path), lab=lab, number=number, title=title.strip(), api=api,
                   tolerance=tolerance,
                   check=CheckLimits(case_s, suite_s), bench=bench, constraints=constraints,
                   points=points, targets=_parse_targets(v, data, bench.max_fused_sweeps),
                   targets_policy=_parse_targets_policy(v, data, bench.max_fused_sweeps), bonus=bonus)


def _parse_targets_policy(v: Validator, data: dict, fused: int = 1) -> TargetsPolicy | None:
    """The optional targets_policy {floor, target, why}; every targets entry must equal its floor and
    target, so that no table contradicts the stated rule."""
    if "targets_policy" not in data:
        return None
    p = v.obj(data, "targets_policy", "", ("floor", "target", "why"))
    floor, target = _floor_target(v, p, "targets_policy.", fused)
    if not isinstance(p["why"], str) or not p["why"].strip():
        v.fail("targets_policy.why", "a non-empty string (the rule: what earns full marks, what a pass)", p["why"])
    for gpu, entry in data["targets"].items():
        if (entry.get("floor"), entry.get("target")) != (p["floor"], p["target"]):
            v.fail(f"targets.{gpu}", f"floor {p['floor']:g} and target {p['target']:g}, as targets_policy says",
                   {"floor": entry.get("floor"), "target": entry.get("target")})
    return TargetsPolicy(floor, target, p["why"].strip())


def _floor_target(v: Validator, entry: dict, prefix: str, fused: int) -> tuple[float, float]:
    """(floor, target) of a targets entry or policy: a target up to the plausibility bound, K x 1.05
    (K = max_fused_sweeps), a floor below it and below K."""
    bound = plausible_ratio(fused)
    target = v.number(entry, "target", prefix, f"a number in (0, {bound:g}]", lambda x: 0 < x <= bound)
    return v.number(entry, "floor", prefix, f"a number in [0, {fused}) below target",
                    lambda x: 0 <= x < fused and x < target), target


def _parse_targets(v: Validator, data: dict, fused: int = 1) -> dict[str, Target]:
    """The targets table (_floor_target's bounds for each entry)."""
    bound = plausible_ratio(fused)
    targets = data["targets"]
    if not isinstance(targets, dict):
        v.fail("targets", 'an object of GPU name (or "generic") -> {floor, target}', targets)
    if GENERIC_TARGET not in targets:
        raise LabSpecError(f'{v.file}: targets.generic is missing (the table used for any GPU '
                           f'without its own; keys present: {", ".join(targets) or "none"})')
    result = {}
    for gpu, entry in targets.items():
        prefix = f"targets.{gpu}."
        if not gpu.strip():
            v.fail("targets", "keyed by GPU names as the CUDA runtime reports them", gpu)
        if not isinstance(entry, dict):
            v.fail(f"targets.{gpu}", "an object with keys floor, target (and optional calibrated)", entry)
        v.known_keys(entry, prefix, ("floor", "target", "calibrated", "reference_ratio"))
        for key in ("floor", "target"):
            if key not in entry:
                raise LabSpecError(f"{v.file}: {prefix}{key} is missing")
        floor, target = _floor_target(v, entry, prefix, fused)
        calibrated = entry.get("calibrated")
        if calibrated is not None and not isinstance(calibrated, str):
            v.fail(prefix + "calibrated", "a string (free text)", calibrated)
        reference = None
        if "reference_ratio" in entry:
            reference = v.number(entry, "reference_ratio", prefix,
                                 f"the reference's ratio, a number in (0, {bound:g}]", lambda x: 0 < x <= bound)
        result[gpu] = Target(floor, target, calibrated, reference)
    return result


def load(path: str | Path) -> LabSpec:
    """Read and validate one lab.json; LabSpecError when it cannot be read, is not JSON or breaks the schema."""
    return parse(read_json(Path(path), LabSpecError), Path(path))


def _c_double(x: float) -> str:
    """A C double literal: repr() of a finite float always has '.' or 'e' (1e-05, 20.0)."""
    return repr(float(x))


def c_header(spec: LabSpec) -> str:
    """The text of lab_config.h for this lab: the C side's view of lab.json and of its kind
    (grader/kinds.json), so that no C file restates either."""
    kind = spec.kind
    guard = "LAB_CONFIG_H"
    names = ", ".join(json.dumps(l.name) for l in kind.launchers)
    per_cell = ", ".join(_c_double(l.bytes_per_cell) for l in kind.launchers)
    fixed = ", ".join(_c_double(l.bytes_fixed) for l in kind.launchers)
    lines = [
        f"/* lab_config.h: generated by grader/grade.py config from {display_path(spec.path)}",
        " * and grader/kinds.json.  Do not edit: change those and rebuild. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        f"#define LAB_NAME {json.dumps(spec.lab)}",
        f"#define LAB_NUMBER {spec.number}",
        "",
        f"/* the problem kind (grader/kinds.json): {kind.summary} */",
        f"#define KIND_API {json.dumps(kind.api)}",
        f"#define KIND_DIMS {kind.dims}",
        "/* 2 or 3: boundary cells are copied, bit for bit; 0: none is (periodic) */",
        f"#define KIND_DIRICHLET_DIMS {kind.dirichlet_dims}",
        "/* a call runs `steps` sweeps, ping-ponging two grids */",
        f"#define KIND_MULTI_STEP {int(kind.multi_step)}",
        f"#define KIND_NLAUNCHERS {len(kind.launchers)}",
        f"#define KIND_LAUNCHER_NAMES {{ {names} }}",
        "/* compulsory bytes of one call of each launcher: per cell (per sweep), plus fixed */",
        f"#define KIND_BYTES_PER_CELL {{ {per_cell} }}",
        f"#define KIND_BYTES_FIXED {{ {fixed} }}",
        "",
        "/* correctness: |got - ref| <= LAB_ATOL + LAB_RTOL * |ref|; seconds per case */",
        f"#define LAB_RTOL {_c_double(spec.tolerance.rtol)}",
        f"#define LAB_ATOL {_c_double(spec.tolerance.atol)}",
    ]
    lines += [f"#define LAB_TOL_{name.upper()} {_c_double(value)}" for name, value in spec.tolerance.extra]
    lines += [
        f"#define LAB_CASE_TIMEOUT_S {_c_double(spec.check.case_timeout_s)}",
        "",
        "/* bench: the timed grid, sweeps per call; timed calls: at least LAB_BENCH_MIN_REPS, then until",
        " * the median's 95% confidence interval is within LAB_BENCH_PRECISION of it, at most LAB_BENCH_REPS */",
        f"#define LAB_BENCH_NX {spec.bench.nx}",
        f"#define LAB_BENCH_NY {spec.bench.ny}",
        f"#define LAB_BENCH_NZ {spec.bench.nz}",
        f"#define LAB_BENCH_STEPS {spec.bench.steps}",
        f"#define LAB_BENCH_MIN_REPS {min(MIN_REPETITIONS, spec.bench.repetitions)}",
        f"#define LAB_BENCH_REPS {spec.bench.repetitions}",
        f"#define LAB_BENCH_PRECISION {_c_double(PRECISION)}",
        "",
        f"#endif /* {guard} */",
    ]
    return "\n".join(lines) + "\n"


def make_fragment(spec: LabSpec) -> str:
    """The text of lab_config.mk: what lab.mk needs of lab.json and the kind (it never reads either itself)."""
    kind = spec.kind
    return "\n".join([
        f"# lab_config.mk: generated by grader/grade.py config --make from {display_path(spec.path)}",
        "# and grader/kinds.json.  Do not edit.",
        f"LAB_API := {kind.api}",
        f"KIND_SOURCES := {' '.join(kind.sources)}",
        f"KIND_HAS_SOLVER := {int(kind.solver)}",
    ]) + "\n"


def discover_labs(kit_root: Path = KIT_ROOT) -> list[Path]:
    """Lab directories (labs/NN-slug holding a lab.json), in lab order."""
    return sorted(p.parent for p in (Path(kit_root) / "labs").glob("*/lab.json"))
