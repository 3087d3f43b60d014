"""Pictures for people who would rather look than read: the roofline of the local GPU with the tour's
kernels on it, and a bar chart of the optimisation path.

The data preparation is plain Python (roofline_data, bars_data, the point helpers) and is tested without
matplotlib; drawing (roofline, path_bars) needs matplotlib, which the kit never requires: without it
they draw nothing and return False.

What is plotted
---------------
Units: GB/s with 1 GB = 1e9 bytes, GFLOP/s with 1 GFLOP = 1e9 floating-point operations.

- Memory roof: the copy bandwidth measured by the bench (GB/s), the same yardstick the grader uses;
  at arithmetic intensity I the roof is I x copy GB/s.
- Compute roof: the peak fp32 GFLOP/s, given by the caller (datasheet), or estimated by
  peak_fp32_gflops() as SMs x fp32 lanes per SM x 2 FLOP per fused multiply-add x clock.
- The ridge point, where the two meet: peak / copy, in FLOP per byte.
- Ceilings (optional, dashed): further horizontal limits under the compute roof, each with how it
  was measured or derived, given by the caller (Ceiling; the tour's are instructor/roofs.py's),
  stated in useful GFLOP/s.  Two helpers derive the usual ones from the GPU's SM count and clock:
    peak_fp32_no_fma_gflops: the fp32 peak when no multiply and add fuse (half the FMA peak: each
        lane completes one FMUL or FADD, 1 FLOP, per clock), the roof of lab 8's bitwise rule;
    rate_ceiling_gflops: a resource an SM serves at a fixed rate per clock (instruction issue,
        shared-memory accesses), divided by what one useful update costs of it.
- A kernel's point:
    x = arithmetic intensity in useful FLOP per compulsory DRAM byte of the design:
          I = flop_per_cell x sweeps_per_pass / bytes_per_cell
        where a pass reads each cell once and writes it once (bytes_per_cell = 8 for float) and applies
        sweeps_per_pass sweeps.  The 2D 5-point update is 9 FLOP (5 multiplies, 4 adds; an FMA counts
        2).  One sweep per pass (labs 1 to 4): I = 9 / 8 = 1.125.  Temporal blocking (lab 8) with
        passes of K sweeps: I = 9 K / 8 (K = 8: 9 FLOP/B).  Not counted: the redundant updates of
        the halo cells that overlapping blocks compute twice (they are not useful work), and re-reads
        of halo cells (mostly L2 hits, not DRAM traffic).
    y = achieved useful GFLOP/s: flop_per_cell x cells x sweeps / time, which is the effective
        bandwidth the grader scores times flop_per_cell / bytes_per_cell.
  A kernel on the memory roof moves its compulsory bytes at copy speed; labs 1 to 4 all sit at
  I = 1.125 and can at best touch the roof there.  Lab 8 moves right by a factor K, and its distance
  below the roof at its new intensity shows what else limits it (in-SM work: the updates, shared
  memory, barriers), not DRAM.

API (the tour wires it in):
    roofline(points, device, copy_gbps, peak_gflops, path, ceilings=()) -> bool
    path_bars(rows, device, path) -> bool
with points from point_from_gbps(), and rows of (label, ratio) pairs or objects
with `kernel` and `ratio` attributes (tour.TourRow).  What a cell update is worth comes from the
caller, as the problem kind declares it (grader/kinds.json: a launcher's flop_per_cell and
bytes_per_cell, kinds.Launcher): this module names no kind.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Protocol

if TYPE_CHECKING:
    from ..base.kinds import Kind

#: fp32 lanes (FMA units) per SM: 64 on Volta, Turing and the A100 (GA100), 128 on GA10x, Ada and
#: Hopper.  An FMA counts 2 FLOP.
FP32_LANES_PER_SM = 128
#: Thread instructions an SM issues per clock at most: 4 warp schedulers (one per SM sub-partition),
#: each issuing one instruction for a warp of 32 threads per clock (Volta to Hopper: NVIDIA's V100,
#: A100 and H100 architecture whitepapers, the SM's four processing blocks).
ISSUE_PER_SM_PER_CLOCK = 4 * 32
#: Four-byte shared-memory accesses an SM serves per clock without bank conflicts: 32 banks of 4 bytes
#: (CUDA C++ Programming Guide, compute capabilities 5.x and later, "Shared Memory").
SHARED_ACCESSES_PER_SM_PER_CLOCK = 32


class CellWork(Protocol):
    """What one cell update of a launcher is worth (kinds.Launcher is one): its useful FLOP
    (2D 5-point: 9, 5 multiplies and 4 adds; 3D 7-point: 13) and the compulsory bytes per cell and
    pass over memory (one float read and one written: 8)."""

    flop_per_cell: float
    bytes_per_cell: float


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel on the roofline: a label, its intensity (FLOP per compulsory byte) and GFLOP/s.

    ratio, when known: the kernel's effective bandwidth over the copy bandwidth of its own run, the
    figure the tables quote (the picture's legend shows it, not a fraction recomputed against the
    roof's copy bandwidth, which is a median over several runs); sweeps_per_pass: the sweeps it fuses
    per pass over memory (its roof at its intensity is that many times the copy bandwidth)."""

    label: str
    intensity: float
    gflops: float
    ratio: float | None = None
    sweeps_per_pass: int = 1


@dataclass(frozen=True)
class Ceiling:
    """A limit drawn as a dashed horizontal line under the compute roof: `gflops` useful GFLOP/s
    at most, whatever the intensity, for the kernels `label` names; `how` says how it was measured
    or derived (shown in the picture's legend)."""

    label: str
    gflops: float
    how: str


@dataclass(frozen=True)
class PlacedPoint:
    """A point with what the roofline says about it."""

    point: RooflinePoint
    attainable_gflops: float   # min(peak, intensity x copy): the roof above the point
    fraction_of_roof: float    # gflops / attainable_gflops
    bound: str                 # "memory" (left of the ridge) or "compute"
    # (ceiling label, gflops / ceiling's GFLOP/s) for every ceiling, in the ceilings' order
    fraction_of_ceilings: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class RooflineData:
    """Everything the roofline picture shows, in numbers."""

    copy_gbps: float
    peak_gflops: float
    ridge: float                                  # FLOP/B where the roofs meet
    x_range: tuple[float, float]                  # intensities spanned, log-scale friendly
    roof: tuple[tuple[float, float], ...]         # (intensity, GFLOP/s) corners of the roof
    points: tuple[PlacedPoint, ...]
    ceilings: tuple[Ceiling, ...] = ()            # dashed lines under the roof, in the caller's order


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def peak_fp32_gflops(sm_count: int, clock_mhz: float, lanes_per_sm: int = FP32_LANES_PER_SM) -> float:
    """Estimated peak fp32 GFLOP/s: SMs x lanes x 2 (an FMA is 2 FLOP) x clock.

    For an H100 SXM (132 SMs, 1980 MHz boost, 128 lanes): 66,908 GFLOP/s, the datasheet's 67 TFLOP/s.
    The clock a long kernel actually runs at may be lower; prefer the datasheet figure when known.
    """
    _positive("sm_count", sm_count)
    _positive("clock_mhz", clock_mhz)
    _positive("lanes_per_sm", lanes_per_sm)
    return sm_count * lanes_per_sm * 2 * clock_mhz / 1e3


def peak_fp32_no_fma_gflops(sm_count: int, clock_mhz: float, lanes_per_sm: int = FP32_LANES_PER_SM) -> float:
    """The fp32 peak in GFLOP/s of a kernel whose multiplies and adds never fuse: half of
    peak_fp32_gflops, since each lane then completes one FMUL or one FADD (1 FLOP) per clock
    where an FMA is 2.  Lab 8 rounds every product and sum of the update on its own (__fmul_rn,
    __fadd_rn: bitwise equal to the CPU reference), so this, not the FMA peak, is its roof.
    H100 SXM (132 SMs, 1980 MHz): 33,454 GFLOP/s."""
    return peak_fp32_gflops(sm_count, clock_mhz, lanes_per_sm) / 2


def rate_ceiling_gflops(sm_count: int, clock_mhz: float, per_sm_per_clock: float, per_useful_update: float,
                        flop_per_cell: float) -> float:
    """Useful GFLOP/s allowed by a resource every SM serves at a fixed rate, when each useful cell
    update costs `per_useful_update` of it (redundant updates included: a design's count per update
    times its updates per useful one):

        SMs x per_sm_per_clock x clock / per_useful_update   useful updates per second
        x flop_per_cell                                       useful FLOP per second

    Instruction issue: per_sm_per_clock = ISSUE_PER_SM_PER_CLOCK (thread instructions) and the
    instructions per useful update from the kernel's disassembly; shared memory:
    SHARED_ACCESSES_PER_SM_PER_CLOCK and the accesses per useful update.  A ceiling, not a
    prediction: it assumes that resource busy on every clock of every SM.  Raises ValueError on a
    figure that is not > 0."""
    _positive("sm_count", sm_count)
    _positive("clock_mhz", clock_mhz)
    _positive("per_sm_per_clock", per_sm_per_clock)
    _positive("per_useful_update", per_useful_update)
    _positive("flop_per_cell", flop_per_cell)
    return sm_count * per_sm_per_clock * clock_mhz * 1e6 / per_useful_update * flop_per_cell / 1e9


def intensity(work: CellWork, sweeps_per_pass: float = 1) -> float:
    """Useful FLOP per compulsory DRAM byte of a design that applies sweeps_per_pass sweeps of
    `work` per pass."""
    return (_positive("flop_per_cell", work.flop_per_cell) * _positive("sweeps_per_pass", sweeps_per_pass)
            / _positive("bytes_per_cell", work.bytes_per_cell))


def point_from_gbps(label: str, gbps: float, work: CellWork, sweeps_per_pass: float = 1,
                    ratio: float | None = None) -> RooflinePoint:
    """A point from an effective bandwidth as the grader computes it (compulsory bytes of every sweep
    / time): the useful GFLOP/s are gbps x flop_per_cell / bytes_per_cell of `work`.  ratio: gbps over
    the copy bandwidth of the same run, when known (RooflinePoint)."""
    _positive("gbps", gbps)
    return RooflinePoint(label, intensity(work, sweeps_per_pass),
                         gbps * work.flop_per_cell / work.bytes_per_cell, ratio, int(sweeps_per_pass))


def _check_ceilings(ceilings: Iterable[Ceiling], peak_gflops: float) -> tuple[Ceiling, ...]:
    """The ceilings as a tuple, each checked: a non-empty label and derivation, distinct labels,
    GFLOP/s > 0 and not above the compute roof.  Raises ValueError naming the ceiling."""
    out, seen = [], set()
    for c in ceilings:
        if not isinstance(c, Ceiling):
            raise ValueError(f"a ceiling must be a plot.Ceiling(label, gflops, how), got {c!r}")
        if not isinstance(c.label, str) or not c.label.strip():
            raise ValueError(f"a ceiling needs a label, got {c.label!r}")
        if not isinstance(c.how, str) or not c.how.strip():
            raise ValueError(f"ceiling {c.label!r}: say how it was measured or derived (how), got {c.how!r}")
        if c.label in seen:
            raise ValueError(f"ceiling {c.label!r} is given twice")
        seen.add(c.label)
        _positive(f"gflops of ceiling {c.label!r}", c.gflops)
        if c.gflops > peak_gflops:
            raise ValueError(f"ceiling {c.label!r} ({c.gflops:.0f} GFLOP/s) lies above the compute roof "
                             f"({peak_gflops:.0f} GFLOP/s): a ceiling is a limit under the roof")
        out.append(c)
    return tuple(out)


def roofline_data(points: Iterable[RooflinePoint], copy_gbps: float, peak_gflops: float,
                  ceilings: Iterable[Ceiling] = ()) -> RooflineData:
    """The roof, the ridge, the ceilings and each point's place under them.  Raises ValueError on a
    bad figure or ceiling (_check_ceilings)."""
    copy_gbps = _positive("copy_gbps", copy_gbps)
    peak_gflops = _positive("peak_gflops", peak_gflops)
    ceilings = _check_ceilings(ceilings, peak_gflops)
    ridge = peak_gflops / copy_gbps
    placed = []
    for p in points:
        _positive(f"intensity of {p.label!r}", p.intensity)
        _positive(f"gflops of {p.label!r}", p.gflops)
        attainable = min(peak_gflops, p.intensity * copy_gbps)
        placed.append(PlacedPoint(p, attainable, p.gflops / attainable,
                                  "memory" if p.intensity < ridge else "compute",
                                  tuple((c.label, p.gflops / c.gflops) for c in ceilings)))
    xs = [pp.point.intensity for pp in placed] + [ridge]
    lo = 10 ** math.floor(math.log10(min(xs) / 2))
    hi = 10 ** math.ceil(math.log10(max(xs) * 2))
    roof = ((lo, lo * copy_gbps), (ridge, peak_gflops), (hi, peak_gflops))
    return RooflineData(copy_gbps, peak_gflops, ridge, (lo, hi), roof, tuple(placed), ceilings)


def bars_data(rows: Iterable) -> list[tuple[str, float]]:
    """(label, fraction of copy bandwidth) pairs from (label, ratio) pairs or objects with `kernel`
    and `ratio` attributes (tour.TourRow).  Raises ValueError on a negative or non-finite ratio."""
    out = []
    for row in rows:
        if hasattr(row, "kernel") and hasattr(row, "ratio"):
            label, ratio = row.kernel, row.ratio
        else:
            label, ratio = row
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio) \
                or ratio < 0:
            raise ValueError(f"ratio of {label!r} must be a finite number >= 0, got {ratio!r}")
        out.append((str(label), float(ratio)))
    return out


def _pyplot():
    """matplotlib.pyplot with a file-only backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


#: One colour per point, all distinct (Tableau's ten, then six that differ from them), and one marker
#: per intensity (a lab family), so that no two points of a picture look alike.
POINT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf", "#000000", "#6a3d9a", "#b15928", "#01665e", "#e31a1c", "#fdbf6f")
POINT_MARKERS = ("o", "s", "^", "D", "v", "P")
#: Smallest vertical distance between two point labels, in points (1/72 inch).
LABEL_GAP_PT = 11.0


def _legend_text(number: int, pp: PlacedPoint) -> str:
    """"3. lab 3 starter: 0.52 of copy": the ratio the tables quote, and for a point that fuses
    sweeps, its share of the roof at its intensity."""
    p = pp.point
    if p.ratio is None:
        return f"{number}. {p.label} ({pp.fraction_of_roof:.0%} of roof)"
    text = f"{number}. {p.label}: {p.ratio:.2f} of copy"
    if p.sweeps_per_pass > 1:
        text += f", {p.ratio / p.sweeps_per_pass:.0%} of its roof"
    return text


def _spread(ys: list[float], gap: float, low: float, high: float) -> list[float]:
    """Positions for labels wanted at ys (display units, any order), at least gap apart, kept within
    [low, high] where they fit, each as close to its wish as that allows (order kept)."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed = [ys[i] for i in order]
    for k in range(1, len(placed)):                           # push up
        placed[k] = max(placed[k], placed[k - 1] + gap)
    overflow = placed[-1] - high if placed else 0.0
    if overflow > 0:                                          # then down, as far as the bottom allows
        placed = [y - min(overflow, placed[0] - low) for y in placed]
    out = [0.0] * len(ys)
    for k, i in enumerate(order):
        out[i] = placed[k]
    return out


def roofline_figure(data: RooflineData, title: str):
    """The roofline picture as a matplotlib figure (matplotlib must be installed): the roof, the
    ceilings, every point with its own colour and its number beside it (labels of points at one
    intensity spread apart, with a leader line), and the legend.  Returns (figure, axes, the
    number labels)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 6))
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs, ys = zip(*data.roof)
    ax.plot(xs, ys, color="black", linewidth=1.5)
    lo, hi = data.x_range
    ymin = min([pp.point.gflops / 3 for pp in data.points] + [lo * data.copy_gbps])
    ax.set_xlim(lo, hi)
    ax.set_ylim(ymin, data.peak_gflops * 2)
    ax.annotate(f"copy bandwidth {data.copy_gbps:.0f} GB/s", (lo * 3, lo * 3 * data.copy_gbps * 0.5), fontsize=9)
    ax.annotate(f"peak fp32 (FMA) {data.peak_gflops / 1e3:.1f} TFLOP/s", (data.ridge * 1.1, data.peak_gflops * 1.12),
                fontsize=9)
    ax.axvline(data.ridge, color="grey", linestyle=":", linewidth=1)
    for number, c in enumerate(data.ceilings):
        colour = ("#8c564b", "#e377c2", "#7f7f7f", "#17becf")[number % 4]
        ax.hlines(c.gflops, lo, hi, colors=colour, linestyles="--", linewidth=1.2,
                  label=textwrap.fill(f"{c.label}, {c.gflops / 1e3:.1f} TFLOP/s: {c.how}", 70))
        ax.annotate(f"{c.label} {c.gflops / 1e3:.1f} TFLOP/s", (lo * 1.3, c.gflops * 1.07), fontsize=8, color=colour)
    markers = {x: POINT_MARKERS[i % len(POINT_MARKERS)]
               for i, x in enumerate(sorted({round(pp.point.intensity, 9) for pp in data.points}))}
    for number, pp in enumerate(data.points, 1):
        p = pp.point
        ax.plot([p.intensity], [p.gflops], marker=markers[round(p.intensity, 9)], markersize=7, linestyle="none",
                color=POINT_COLOURS[(number - 1) % len(POINT_COLOURS)], label=_legend_text(number, pp))
    # Number labels: right of each intensity's column, spread so that none covers another.
    to_display, to_data = ax.transData, ax.transData.inverted()
    gap = LABEL_GAP_PT * fig.dpi / 72
    (_, bottom), (_, top) = to_display.transform([(lo, ymin), (hi, data.peak_gflops * 2)])
    labels = []
    for x in sorted({round(pp.point.intensity, 9) for pp in data.points}):
        group = [(n, pp) for n, pp in enumerate(data.points, 1) if round(pp.point.intensity, 9) == x]
        wanted = [to_display.transform((pp.point.intensity, pp.point.gflops))[1] for _, pp in group]
        for (number, pp), y in zip(group, _spread(wanted, gap, bottom + gap, top - gap)):
            px, _ = to_display.transform((pp.point.intensity, pp.point.gflops))
            lx, ly = to_data.transform((px + 16, y))
            labels.append(ax.annotate(str(number), (pp.point.intensity, pp.point.gflops), xytext=(lx, ly),
                                      textcoords="data", fontsize=9, va="center",
                                      color=POINT_COLOURS[(number - 1) % len(POINT_COLOURS)],
                                      arrowprops=dict(arrowstyle="-", color="#9aa3ad", linewidth=0.6,
                                                      shrinkA=0, shrinkB=3)))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2, fontsize=8, frameon=False)
    ax.set_xlabel("arithmetic intensity (useful FLOP per compulsory DRAM byte)")
    ax.set_ylabel("GFLOP/s (useful)")
    ax.set_title(title)
    ax.grid(True, which="both", linewidth=0.3)
    return fig, ax, labels


def roofline(points: Iterable[RooflinePoint], device: str, copy_gbps: float, peak_gflops: float,
             path: str | Path, ceilings: Iterable[Ceiling] = (), title: str | None = None) -> bool:
    """Draw the roofline with the points, and the ceilings as dashed lines, to `path` (PNG; the
    legend beside the plot is kept whole).  title: default "Roofline: <device>".  False, and no
    file, without matplotlib.

    Raises ValueError on a bad figure or ceiling (checked before anything is drawn)."""
    data = roofline_data(points, copy_gbps, peak_gflops, ceilings)
    plt = _pyplot()
    if plt is None:
        return False
    fig, _, _ = roofline_figure(data, title or f"Roofline: {device}")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return True


#: Bar colours of the tour's parts, in order (2D, 3D, lab 8's designs).
PART_COLOURS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd")


def path_bars(rows: Iterable, device: str, path: str | Path) -> bool:
    """Draw the path as horizontal bars of effective bandwidth / copy bandwidth to `path` (PNG), first
    row on top, with a line at the copy bandwidth (1.0); rows with a `part` attribute (tour.TourRow)
    are coloured by part, with a legend.  False, and no file, without matplotlib."""
    rows = list(rows)
    data = bars_data(rows)
    plt = _pyplot()
    if plt is None:
        return False
    parts = [getattr(r, "part", "") or "" for r in rows] if rows and hasattr(rows[0], "part") else [""] * len(data)
    names = list(dict.fromkeys(parts))
    colours = [PART_COLOURS[names.index(p) % len(PART_COLOURS)] for p in parts][::-1]
    labels = [label for label, _ in data][::-1]
    ratios = [ratio for _, ratio in data][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.4 * max(1, len(data))))
    bars = ax.barh(range(len(labels)), ratios, color=colours)
    ax.set_yticks(range(len(labels)), labels)
    for y, r in enumerate(ratios):
        ax.annotate(f"{r:.2f}", (r, y), textcoords="offset points", xytext=(4, 0), fontsize=8, va="center",
                    bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none"), zorder=3)
    ax.axvline(1.0, linestyle="--", linewidth=1, color="black", zorder=2)
    ax.set_xlim(0, max(ratios + [1.0]) * 1.12)
    if len(names) > 1 and all(names):
        handles = [bars[len(bars) - 1 - parts.index(n)] for n in names]
        ax.legend(handles, names, loc="lower right", fontsize=8, frameon=False)
    ax.set_xlabel("effective bandwidth / copy bandwidth (1.0: the copy)")
    ax.set_title(device)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return True


# ---------------------------------------------------------------- a student's own kernel

def max_sm_clock_mhz() -> float | None:
    """The GPU's maximum SM clock from nvidia-smi, or None when it cannot be read."""
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
        return float(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def lab_roofline(kind: "Kind", bench: dict | None, path: str | Path) -> str | None:
    """A student's kernel on the roofline of the GPU it ran on, from the lab's bench JSON and its
    problem kind (labspec.LabSpec.kind): placed at one sweep per pass (a kernel that fuses sweeps,
    lab 8, shows up above the memory roof there, which is the point: it moves fewer bytes than one
    pass per sweep).  Returns what was written, or None when there is nothing to draw (no figures,
    a kind with several launchers doing different work (lab 7) or no FLOP stated, no matplotlib,
    unknown clock)."""
    single = kind.launchers[0] if len(kind.launchers) == 1 and kind.launchers[0].flop_per_cell else None
    if not bench or not bench.get("output_ok") or single is None or not bench.get("sm_count"):
        return None
    clock = max_sm_clock_mhz()
    if not clock or _pyplot() is None:
        return None
    point = point_from_gbps("your kernel", bench["gbps"], single)
    peak = peak_fp32_gflops(int(bench["sm_count"]), clock)
    roofline([point], bench.get("device", "GPU"), bench["copy_gbps"], peak, path)
    return str(path)
