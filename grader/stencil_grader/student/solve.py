"""`make solve` in lab 7 (`grade.py solve BUILD_DIR`): runs `BUILD_DIR/bench --solve N [--reduction R]`
(grader/harness/kinds/jacobi_residual.c), the student's Jacobi solver on the model problem: from u = 0 on
the unit square, h = 1/(N-1), laplace(u) = f = 2 pi^2 sin(pi x) sin(pi y), u = 0 on the boundary (u* =
-sin(pi x) sin(pi y)), the student's jacobi_sweep and residual_norm2 until the residual 2-norm has
fallen by R, stopped falling, or after 40 N^2 sweeps (at most 1e6); reads its JSON (protocol.SOLVE_KEYS;
rate_expected is cos(pi h), max_error the largest |u - u*|, residual one per sweep) from the private
channel, prints it explained, and with matplotlib plots it (BUILD_DIR/solve.png by default).

Sources: cos(pi h) is the spectral radius of Jacobi for the 5-point Laplacian on the unit square
(Barrett et al., "Templates for the Solution of Linear Systems", SIAM 1994, section 2.2.1); the
discretisation error is grader/include/harness.h's harness_poisson_discretisation_error.
Exit status: 0 the solver ran with finite residuals, 1 otherwise, 2 a usage error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..base import process, protocol
from ..grading.plot import pyplot

DEFAULT_N = 33
SOLVE_TIMEOUT_S = 600.0
#: What the bench's exit statuses (base/protocol.py) mean here.
BENCH_EXITS = {
    protocol.EXIT_NO_GPU: "make solve needs a GPU, and this machine has none it can use",
    protocol.EXIT_CUDA_ERROR: "the solver stopped on a CUDA error (in your kernels, or none left to run them)",
    protocol.EXIT_USAGE: "the bench refused the arguments"}
#: Residuals this close to the floor (the smallest one reached) are left out of the
#: measured rate: there float rounding, not the iteration, decides the residual.
FLOOR_MARGIN = 100.0


class SolveError(RuntimeError):
    """The solver could not be run, or printed something that is not its JSON."""


def parse(text: str) -> dict:
    """The bench's JSON, a null (the bench's spelling of a non-finite number) read back as NaN."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise SolveError(f"the solver's output is not JSON ({err}): {text.strip()[:200]!r}") from None
    if not isinstance(data, dict):
        raise SolveError("the solver's output is not a JSON object")
    for key in ("rate_measured", "max_error"):
        if key in data and data[key] is None:
            data[key] = math.nan
    if isinstance(data.get("residual"), list):
        data["residual"] = [math.nan if v is None else v for v in data["residual"]]
    try:
        protocol.check_object(data, protocol.SOLVE_KEYS, "the solver's JSON")
    except protocol.SchemaError as err:
        raise SolveError(str(err)) from None
    if len(data["residual"]) != data["sweeps"] + 1:
        raise SolveError(f"the solver's JSON has {len(data['residual'])} residuals for "
                         f"{data['sweeps']} sweeps (expected sweeps + 1)")
    return data


def run_solver(bench: Path, n: int = DEFAULT_N, reduction: float | None = None) -> dict:
    """Run `bench --solve n` (SOLVE_TIMEOUT_S seconds at most) and return its JSON; SolveError with the reason."""
    bench = Path(bench)
    if not bench.is_file():
        raise SolveError(f"{bench} does not exist: build the lab first (make build)")
    argv = [str(bench), "--solve", str(n)]
    if reduction is not None:
        argv += ["--reduction", repr(float(reduction))]
    # The JSON comes on the private channel, kept whole (a residual history of a fine grid is
    # megabytes); stdout is the solver kernels' own output, if any.
    done = process.run(argv, SOLVE_TIMEOUT_S, channel=True)
    why = process.tail_lines(done.stderr, 5).strip()
    if done.returncode != 0:
        said = BENCH_EXITS.get(done.returncode, f"the solver {done.describe()}")
        raise SolveError(said + (f": {why}" if why else ""))
    if done.channel_overflow:
        raise SolveError(f"the solver wrote more than {process.CHANNEL_MAX_BYTES >> 20} MiB of JSON")
    return parse(done.channel)


# ------------------------------------------------------------------ analysis

def finite(values: list[float]) -> bool:
    """True when every value is a finite number."""
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def measured_rate(residual: list[float]) -> tuple[float, int] | None:
    """(the residual's geometric mean decay per sweep, last): from sweep 0 to the last residual above
    FLOOR_MARGIN times the smallest reached; None with fewer than 2 usable sweeps."""
    if len(residual) < 2 or not finite(residual) or residual[0] <= 0:
        return None
    floor = min(residual)
    last = len(residual) - 1
    if floor > 0 and residual[0] > FLOOR_MARGIN * floor:
        last = max(k for k, r in enumerate(residual) if r > FLOOR_MARGIN * floor)
    if last < 1 or residual[last] <= 0:
        return None
    return (residual[last] / residual[0]) ** (1.0 / last), last


def sweeps_for(reduction: float, rate: float) -> float:
    """Sweeps to reduce the residual by `reduction` at `rate` per sweep: ln R / ln rate."""
    return math.log(reduction) / math.log(rate) if 0 < rate < 1 and 0 < reduction < 1 else math.inf


def default_every(sweeps: int, rows: int = 10) -> int:
    """The smallest round step (1, 2 or 5 times a power of 10) giving at most about `rows` history rows."""
    need = sweeps / rows
    power = 10 ** math.floor(math.log10(need)) if need > 1 else 1
    return next(m * power for m in (1, 2, 5, 10) if m * power >= need)


def history(residual: list[float], every: int) -> list[tuple[int, float, float]]:
    """(sweep, ||r||_2, ||r||_2 / ||r0||_2) at sweeps 0, every, 2 every, ... and the last one."""
    if not residual:
        return []
    last = len(residual) - 1
    picks = list(range(0, last + 1, max(1, every)))
    if picks[-1] != last:
        picks.append(last)
    r0 = residual[0]
    return [(k, residual[k], residual[k] / r0 if r0 else math.nan) for k in picks]


def _ending(data: dict, residual: list[float]) -> str:
    sweeps, reduction = data["sweeps"], data["reduction"]
    if data["converged"]:
        return f"converged: the residual 2-norm fell by {reduction:g} in {sweeps} sweeps"
    floor = min(residual) / residual[0] if residual and residual[0] > 0 else math.nan
    limit = min(40 * data["n"] ** 2, 1_000_000)
    if sweeps >= limit:
        return f"stopped at the limit of {sweeps} sweeps before the residual fell by {reduction:g}"
    return (f"stopped after {sweeps} sweeps: the residual stopped falling at {floor:.2g} of its start, "
            f"float's rounding floor on this grid, before it fell by {reduction:g} "
            f"(ask for less with --reduction, or see the handout)")


def summary(data: dict, every: int | None = None) -> str:
    """The text `make solve` prints for the solver's JSON `data`."""
    n, h, residual = data["n"], data["h"], data["residual"]
    cos_ph = data["rate_expected"]
    lines = [
        "Jacobi on the model problem: laplace(u) = f on the unit square, "
        "f = 2 pi^2 sin(pi x) sin(pi y), u = 0 on the boundary",
        f"  grid {n} x {n}, h = 1/{n - 1}; start from u = 0; stop when ||r||_2 has fallen by "
        f"{data['reduction']:g}",
    ]
    if not finite(residual):
        lines.append(f"  the residual is not a number (first value {residual[0]!r}): residual_norm2 "
                     "wrote no sum, or a NaN (the harness fills *d_result with NaN before each call)")
        return "\n".join(lines) + "\n"
    lines += ["  " + _ending(data, residual), "", f"  {'sweep':>8}  {'||r||_2':>12}  {'||r||/||r0||':>12}"]
    for k, r, rel in history(residual, every or default_every(data["sweeps"])):
        lines.append(f"  {k:>8}  {r:>12.5e}  {rel:>12.4e}")
    lines.append("")
    rate = measured_rate(residual)
    if rate is None:
        lines.append(f"  rate per sweep: not measured (fewer than 2 sweeps); cos(pi h) = {cos_ph:.6f}")
    else:
        value, last = rate
        lines.append(f"  rate per sweep: measured {value:.6f} (sweeps 0 to {last}), "
                     f"cos(pi h) = {cos_ph:.6f}, difference {value - cos_ph:+.1e}")
    need = sweeps_for(data["reduction"], cos_ph)
    lines.append(f"  at cos(pi h) a reduction by {data['reduction']:g} takes ln R / ln cos(pi h) = "
                 f"{math.ceil(need) if math.isfinite(need) else need} sweeps (rounded up: the last one reaches it), "
                 f"about 2 ln(1/R) / (pi h)^2 = {need * h * h:.2f} / h^2: O(1/h^2)")
    err, disc = data["max_error"], data["discretisation_error"]
    lines.append(f"  max |u - u*| = {err:.3e} against u* = -sin(pi x) sin(pi y); the 5-point "
                 f"Laplacian's own error at h = 1/{n - 1} is {disc:.3e}"
                 + (f" (ratio {err / disc:.3f})" if disc > 0 and math.isfinite(err) else ""))
    return "\n".join(lines) + "\n"


def plot(data: dict, path: Path) -> bool:
    """log residual against sweep, with r0 cos(pi h)^k beside it; False without matplotlib."""
    if (plt := pyplot()) is None:
        return False
    residual = data["residual"]
    r0 = residual[0]
    sweeps = list(range(len(residual)))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogy(sweeps, [r / r0 for r in residual], label="your solver: ||r_k|| / ||r_0||")
    ax.semilogy(sweeps, [data["rate_expected"] ** k for k in sweeps], linestyle="--",
                label=f"cos(pi h)^k, cos(pi h) = {data['rate_expected']:.6f}")
    ax.set_xlabel("Jacobi sweep k")
    ax.set_ylabel("residual 2-norm, relative")
    ax.set_title(f"Jacobi on the model Poisson problem, {data['n']} x {data['n']} grid")
    ax.grid(True, which="both", linewidth=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


@dataclass
class SolveResult:
    """The solve command's exit status (module docstring) and the text it prints."""

    exit_code: int
    text: str


def solve(build_dir: Path, n: int = DEFAULT_N, reduction: float | None = None, every: int | None = None,
          plot_path: Path | None = None) -> SolveResult:
    """Run the solver of the lab 7 build in build_dir and explain it (the `solve` command)."""
    if n < 5:
        return SolveResult(2, f"grade.py solve: --n must be at least 5, got {n}\n")
    try:
        data = run_solver(Path(build_dir) / "bench", n, reduction)
    except SolveError as err:
        return SolveResult(1, f"make solve: {err}\n")
    text = summary(data, every)
    if not finite(data["residual"]):
        return SolveResult(1, text)
    target = Path(plot_path) if plot_path else Path(build_dir) / "solve.png"
    text += f"  plot: {target}\n" if plot(data, target) else "  plot: not drawn (matplotlib is not installed)\n"
    return SolveResult(0, text)
