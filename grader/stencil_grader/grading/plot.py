"""The roofline's arithmetic (roofline_data); the report page's charts as inline SVG (no script, labels
escaped); pictures with matplotlib where installed (optional: without it roofline draws nothing).

Memory roof: intensity x the bench's copy GB/s; compute roof: peak_fp32_gflops; dashed ceilings:
instructor/roofs.py's.  A kernel's point: intensity() and point_from_gbps(), from the kind's FLOP and
bytes per cell (grader/kinds.json).  Units: GB/s (1e9 bytes), GFLOP/s (1e9 FLOP).
"""

from __future__ import annotations

import html
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ..base import gpus
from ..base.cliargs import UsageError

if TYPE_CHECKING:
    from ..base.kinds import Kind, Launcher

#: fp32 lanes (FMA units) per SM: 64 on Volta, Turing and the A100 (GA100), 128 on GA10x, Ada and Hopper.
FP32_LANES_PER_SM = 128


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel: a label, its intensity (FLOP per compulsory byte) and useful GFLOP/s; ratio, when
    known, its effective over the copy bandwidth of its own run (the legend quotes it, as the tables
    do); sweeps_per_pass: the sweeps it fuses per pass over memory."""

    label: str
    intensity: float
    gflops: float
    ratio: float | None = None
    sweeps_per_pass: int = 1


@dataclass(frozen=True)
class RooflineData:
    """What a roofline shows: the roofs, their ridge (FLOP/B), the decades of intensity it spans, the
    roof's (intensity, GFLOP/s) corners, the points and the ceilings (the caller's order)."""

    copy_gbps: float
    peak_gflops: float
    ridge: float
    x_range: tuple[float, float]
    roof: tuple[tuple[float, float], ...]
    points: tuple[RooflinePoint, ...]
    ceilings: tuple = ()

    def fraction_of_roof(self, p: RooflinePoint) -> float:
        """p's GFLOP/s over the roof above it, min(peak, intensity x copy)."""
        return p.gflops / min(self.peak_gflops, p.intensity * self.copy_gbps)


def positive(name: str, value: float) -> float:
    """value as a float; ValueError naming it unless it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def peak_fp32_gflops(sm_count: int, clock_mhz: float, lanes_per_sm: int = FP32_LANES_PER_SM) -> float:
    """Estimated peak fp32 GFLOP/s: SMs x lanes x 2 x clock (H100 SXM, 132 SMs at 1980 MHz: 66,908,
    the datasheet's 67 TFLOP/s; a long kernel may run at a lower clock)."""
    return positive("sm_count", sm_count) * positive("lanes_per_sm", lanes_per_sm) * 2 \
        * positive("clock_mhz", clock_mhz) / 1e3


def intensity(work: "Launcher", sweeps_per_pass: float = 1) -> float:
    """Useful FLOP per compulsory DRAM byte of `work` (flop_per_cell, bytes_per_cell) at sweeps_per_pass."""
    return (positive("flop_per_cell", work.flop_per_cell) * positive("sweeps_per_pass", sweeps_per_pass)
            / positive("bytes_per_cell", work.bytes_per_cell))


def point_from_gbps(label: str, gbps: float, work: "Launcher", sweeps_per_pass: float = 1,
                    ratio: float | None = None) -> RooflinePoint:
    """The point of an effective bandwidth (compulsory bytes of every sweep / time): gbps x
    flop_per_cell / bytes_per_cell useful GFLOP/s."""
    gflops = positive("gbps", gbps) * work.flop_per_cell / work.bytes_per_cell
    return RooflinePoint(label, intensity(work, sweeps_per_pass), gflops, ratio, int(sweeps_per_pass))


def roofline_data(points: Iterable[RooflinePoint], copy_gbps: float, peak_gflops: float,
                  ceilings: Iterable = ()) -> RooflineData:
    """The roofs, the ridge and the span of a roofline.  ceilings: dashed limits under the compute
    roof, each with a label, useful gflops and how it was derived (the tour's: roofs.Ceiling).
    ValueError on a figure that is not > 0, or a ceiling without label or derivation, given twice,
    or above the compute roof."""
    copy_gbps, peak_gflops = positive("copy_gbps", copy_gbps), positive("peak_gflops", peak_gflops)
    points, ceilings = tuple(points), tuple(ceilings)
    for p in points:
        positive(f"intensity of {p.label!r}", p.intensity)
        positive(f"gflops of {p.label!r}", p.gflops)
    for i, c in enumerate(ceilings):
        if not all(hasattr(c, a) for a in ("label", "gflops", "how")):
            raise ValueError(f"a ceiling has a label, gflops and how, got {c!r}")
        if not str(c.label).strip() or not str(c.how).strip():
            raise ValueError(f"ceiling {c.label!r} needs a label and how it was measured or derived")
        if c.label in (d.label for d in ceilings[:i]):
            raise ValueError(f"ceiling {c.label!r} is given twice")
        if positive(f"gflops of ceiling {c.label!r}", c.gflops) > peak_gflops:
            raise ValueError(f"ceiling {c.label!r} ({c.gflops:.0f} GFLOP/s) lies above the compute roof "
                             f"({peak_gflops:.0f} GFLOP/s)")
    ridge = peak_gflops / copy_gbps
    xs = [p.intensity for p in points] + [ridge]
    lo, hi = 10 ** math.floor(math.log10(min(xs) / 2)), 10 ** math.ceil(math.log10(max(xs) * 2))
    return RooflineData(copy_gbps, peak_gflops, ridge, (lo, hi),
                        ((lo, lo * copy_gbps), (ridge, peak_gflops), (hi, peak_gflops)), points, ceilings)


# ---------------------------------------------------------------- the report page's charts (inline SVG)

def _el(tag: str, text: str | None = None, **attrs) -> str:
    """One SVG element; attribute names with "_" for "-", every value and the text escaped."""
    head = " ".join([tag] + [f'{k.replace("_", "-")}="{html.escape(str(v), quote=True)}"' for k, v in attrs.items()])
    return f"<{head}/>" if text is None else f"<{head}>{html.escape(text, quote=False)}</{tag}>"


def _svg(ident: str, w: int, h: int, label: str, plot: tuple[int, int, int, int] | None = None) -> str:
    """The opening tag of a chart (its id, size and accessible label, escaped), and the plot area's
    frame when plot = (left, right, top, bottom) margins are given."""
    return (f'<svg id="{ident}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" '
            f'height="{h}" role="img" aria-label="{html.escape(label, quote=True)}">') + (_el(
                "rect", x=plot[0], y=plot[2], width=w - plot[0] - plot[1], height=h - plot[2] - plot[3],
                fill="#fbfcfd", stroke="#c8ced6") if plot else "")


def _log_scale(lo: float, hi: float, a: float, b: float):
    return lambda v: round(a + (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (b - a), 1)


def roofline_svg(points: list[tuple[str, float, float, str]], copy_gbps: float, peak_gflops: float | None,
                 device: str = "GPU") -> str:
    """A log-log roofline as an inline SVG element.  points: (label, FLOP per compulsory byte,
    GFLOP/s, colour); copy_gbps: the memory roof (GB/s); peak_gflops: the compute roof, or None when
    not known (only the memory roof is drawn, and the picture says so).  ValueError on a figure <= 0."""
    # Without a compute roof, a stand-in peak just right of the points keeps the axes on them.
    peak = peak_gflops if peak_gflops is not None else copy_gbps * 4.0 * max(p[1] for p in points)
    data = roofline_data([RooflinePoint(*p[:3]) for p in points], copy_gbps, peak)
    w, h, left, right, top, bottom = 680, 380, 70, 20, 20, 50
    lo, hi = data.x_range
    ys = [p[2] for p in points] + [lo * copy_gbps, peak]
    ylo, yhi = 10 ** math.floor(math.log10(min(ys) / 2)), 10 ** math.ceil(math.log10(max(ys) * 2))
    sx, sy = _log_scale(lo, hi, left, w - right), _log_scale(ylo, yhi, h - bottom, top)
    out = [_svg("roofline-svg", w, h, f"roofline of {device}", (left, right, top, bottom))]
    for e in range(round(math.log10(lo)), round(math.log10(hi)) + 1):          # decades
        out += [_el("line", x1=sx(10 ** e), y1=top, x2=sx(10 ** e), y2=h - bottom, stroke="#e3e7ec"),
                _el("text", f"{10.0 ** e:g}", x=sx(10 ** e), y=h - bottom + 16, font_size=11, text_anchor="middle")]
    for e in range(round(math.log10(ylo)), round(math.log10(yhi)) + 1):
        out += [_el("line", x1=left, y1=sy(10 ** e), x2=w - right, y2=sy(10 ** e), stroke="#e3e7ec"),
                _el("text", f"{10.0 ** e:g}", x=left - 6, y=sy(10 ** e) + 4, font_size=11, text_anchor="end")]
    roof = data.roof if peak_gflops is not None else ((lo, lo * copy_gbps), (hi, hi * copy_gbps))
    out += [_el("polyline", points=" ".join(f"{sx(x)},{sy(min(y, yhi))}" for x, y in roof), fill="none",
                stroke="#1d2330", stroke_width=2),
            _el("text", f"copy bandwidth {copy_gbps:.0f} GB/s", x=left + 8, y=sy(lo * copy_gbps) - 8, font_size=12),
            _el("text", f"peak fp32 {peak / 1e3:.1f} TFLOP/s (estimate)", x=w - right - 6, y=sy(peak) - 6,
                font_size=12, text_anchor="end") if peak_gflops is not None else
            _el("text", "compute roof not known (no SM clock from nvidia-smi)", x=w - right - 6, y=top + 16,
                font_size=12, text_anchor="end")]
    highest = max(p[2] for p in points)
    for label, x, y, colour in points:                # points of one intensity: labels above and below
        out += [_el("circle", cx=sx(x), cy=sy(y), r=6, fill=colour, stroke="#fff"),
                _el("text", label, x=sx(x) + 10, y=sy(y) + (-10 if y == highest else 18), font_size=12, fill=colour)]
    mid = (top + h - bottom) // 2
    out += [_el("text", "arithmetic intensity (useful FLOP per compulsory DRAM byte)", x=(left + w - right) // 2,
                y=h - 10, font_size=12, text_anchor="middle"),
            _el("text", "GFLOP/s (useful)", x=14, y=mid, font_size=12, text_anchor="middle",
                transform=f"rotate(-90 14 {mid})"), "</svg>"]
    return "".join(out)


def bandwidth_svg(gbps: float, copy_gbps: float, floor: float | None, target: float | None) -> str:
    """Horizontal bars of effective and copy bandwidth (GB/s), with the floor and target (fractions
    of copy) marked, as an inline SVG element."""
    w, h, left, right = 680, 130, 130, 30
    scale = (w - left - right) / (max(gbps, copy_gbps) * 1.1)
    out = [_svg("bandwidth-svg", w, h, "bandwidth against copy")]
    for i, (label, value, colour) in enumerate((("your kernel", gbps, "#2b6cb0"), ("copy", copy_gbps, "#718096"))):
        y = 14 + i * 38
        out += [_el("text", label, x=left - 8, y=y + 18, font_size=13, text_anchor="end"),
                _el("rect", x=left, y=y, width=round(max(1.0, value * scale), 1), height=26, fill=colour),
                _el("text", f"{value:.0f} GB/s", x=round(left + value * scale + 4, 1), y=y + 18, font_size=12)]
    for name, frac, colour in (("floor", floor, "#b7791f"), ("target", target, "#1f8a4c")):
        if frac is not None:
            x = round(left + frac * copy_gbps * scale, 1)
            out += [_el("line", x1=x, y1=6, x2=x, y2=92, stroke=colour, stroke_width=2, stroke_dasharray="5,3"),
                    _el("text", f"{name} {frac:g}", x=x, y=110, font_size=12, text_anchor="middle", fill=colour)]
    return "".join(out + ["</svg>"])


def progress_svg(ratios: list[float | None], floor: float | None = None, target: float | None = None) -> str:
    """The ratio to copy bandwidth of each attempt (x: attempt 1..n; None: not timed, a cross on the
    axis), a line through the timed ones, and the floor and target (fractions of copy) dashed."""
    w, h, left, right, top, bottom = 680, 240, 56, 20, 16, 40
    n = len(ratios)
    hi = max([1.0] + [r * 1.1 for r in ratios if r is not None] + [x for x in (floor, target) if x is not None])
    sx = lambda i: round(left + (w - left - right) * (i / (n - 1) if n > 1 else 0.5), 1)      # noqa: E731
    sy = lambda v: round(h - bottom - v / hi * (h - top - bottom), 1)                          # noqa: E731
    out = [_svg("progress-svg", w, h, f"ratio to copy bandwidth over {n} attempts", (left, right, top, bottom))]
    for tick in (t for t in (0.0, 0.25, 0.5, 0.75, 1.0) if t <= hi):
        out += [_el("line", x1=left, y1=sy(tick), x2=w - right, y2=sy(tick), stroke="#e3e7ec"),
                _el("text", f"{tick:g}", x=left - 6, y=sy(tick) + 4, font_size=11, text_anchor="end")]
    for name, frac, colour in (("floor", floor, "#b7791f"), ("target", target, "#1f8a4c")):
        if frac is not None:
            out += [_el("line", x1=left, y1=sy(frac), x2=w - right, y2=sy(frac), stroke=colour, stroke_dasharray="5,3"),
                    _el("text", f"{name} {frac:g}", x=w - right - 4, y=sy(frac) - 4, font_size=11, text_anchor="end",
                        fill=colour)]
    timed = [f"{sx(i)},{sy(r)}" for i, r in enumerate(ratios) if r is not None]
    if len(timed) > 1:
        out.append(_el("polyline", points=" ".join(timed), fill="none", stroke="#2b6cb0", stroke_width=2))
    for i, r in enumerate(ratios):
        x, y = sx(i), h - bottom
        out.append(_el("circle", cx=x, cy=sy(r), r=4, fill="#2b6cb0") if r is not None else
                   _el("path", d=f"M{x - 4:.1f},{y - 4}L{x + 4:.1f},{y + 4}M{x - 4:.1f},{y + 4}L{x + 4:.1f},{y - 4}",
                       stroke="#c53030", stroke_width=2))
    out += [_el("text", str(i + 1), x=sx(i), y=h - bottom + 16, font_size=11, text_anchor="middle")
            for i in range(0, n, max(1, math.ceil(n / 12)))]
    mid = (top + h - bottom) // 2
    return "".join(out + [_el("text", "attempt (a cross: no ratio measured)", x=(left + w - right) // 2, y=h - 6,
                              font_size=12, text_anchor="middle"),
                          _el("text", "ratio to copy", x=14, y=mid, font_size=12, text_anchor="middle",
                              transform=f"rotate(-90 14 {mid})"), "</svg>"])


# ---------------------------------------------------------------- pictures (matplotlib)

def pyplot(need: str | None = None):
    """matplotlib.pyplot with a file-only backend; None without matplotlib, or, when `need` names what
    needs it, UsageError (exit 2) saying which package to install."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if need:
            raise UsageError(f"{need} need matplotlib: install python3-matplotlib (Debian) or "
                             "`pip install matplotlib`") from None
        return None
    return plt


#: One colour per point (Tableau's ten, then six more) and one marker per intensity, so that no two
#: points of a picture look alike; the smallest gap between two number labels, in points.
POINT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf", "#000000", "#6a3d9a", "#b15928", "#01665e", "#e31a1c", "#fdbf6f")
POINT_MARKERS = ("o", "s", "^", "D", "v", "P")
LABEL_GAP_PT = 11.0


def _legend_text(number: int, p: RooflinePoint, data: RooflineData) -> str:
    """"3. lab 3 starter: 0.52 of copy" (the tables' ratio; for fused sweeps, the share of its roof)."""
    if p.ratio is None:
        return f"{number}. {p.label} ({data.fraction_of_roof(p):.0%} of roof)"
    return f"{number}. {p.label}: {p.ratio:.2f} of copy" + (
        f", {p.ratio / p.sweeps_per_pass:.0%} of its roof" if p.sweeps_per_pass > 1 else "")


def _spread(ys: list[float], gap: float, low: float, high: float) -> list[float]:
    """Positions for labels wanted at ys, at least gap apart, within [low, high] where they fit, in order."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed = [ys[i] for i in order]
    for k in range(1, len(placed)):
        placed[k] = max(placed[k], placed[k - 1] + gap)
    if placed and placed[-1] > high:
        placed = [y - min(placed[-1] - high, placed[0] - low) for y in placed]
    at = dict(zip(order, placed))
    return [at[i] for i in range(len(ys))]


def roofline_figure(data: RooflineData, title: str):
    """The roofline as a matplotlib figure: the roof, the ceilings, each point in its own colour with
    its number beside it (numbers at one intensity spread apart) and the legend.  Returns (figure,
    axes, the number labels)."""
    fig, ax = pyplot().subplots(figsize=(11, 6))
    ax.set(xscale="log", yscale="log", title=title, ylabel="GFLOP/s (useful)",
           xlabel="arithmetic intensity (useful FLOP per compulsory DRAM byte)")
    ax.plot(*zip(*data.roof), color="black", linewidth=1.5)
    (lo, hi), top = data.x_range, data.peak_gflops * 2
    ymin = min([p.gflops / 3 for p in data.points] + [lo * data.copy_gbps])
    ax.set_xlim(lo, hi)
    ax.set_ylim(ymin, top)
    ax.annotate(f"copy bandwidth {data.copy_gbps:.0f} GB/s", (lo * 3, lo * 1.5 * data.copy_gbps), fontsize=9)
    ax.annotate(f"peak fp32 (FMA) {data.peak_gflops / 1e3:.1f} TFLOP/s", (data.ridge * 1.1, data.peak_gflops * 1.12),
                fontsize=9)
    ax.axvline(data.ridge, color="grey", linestyle=":", linewidth=1)
    for number, c in enumerate(data.ceilings):
        colour = ("#8c564b", "#e377c2", "#7f7f7f", "#17becf")[number % 4]
        ax.hlines(c.gflops, lo, hi, colors=colour, linestyles="--", linewidth=1.2,
                  label=textwrap.fill(f"{c.label}, {c.gflops / 1e3:.1f} TFLOP/s: {c.how}", 70))
        ax.annotate(f"{c.label} {c.gflops / 1e3:.1f} TFLOP/s", (lo * 1.3, c.gflops * 1.07), fontsize=8, color=colour)
    columns = sorted({round(p.intensity, 9) for p in data.points})
    colour = {id(p): POINT_COLOURS[n % len(POINT_COLOURS)] for n, p in enumerate(data.points)}
    for number, p in enumerate(data.points, 1):
        ax.plot([p.intensity], [p.gflops], marker=POINT_MARKERS[columns.index(round(p.intensity, 9)) % 6],
                markersize=7, linestyle="none", color=colour[id(p)], label=_legend_text(number, p, data))
    to_display, to_data = ax.transData, ax.transData.inverted()
    gap = LABEL_GAP_PT * fig.dpi / 72
    (_, bottom), (_, ceiling) = to_display.transform([(lo, ymin), (hi, top)])
    labels = []
    for x in columns:                    # number labels right of each column, spread so none covers another
        group = [(n, p) for n, p in enumerate(data.points, 1) if round(p.intensity, 9) == x]
        wanted = [to_display.transform((p.intensity, p.gflops)) for _, p in group]
        for (number, p), (px, _), y in zip(group, wanted, _spread([w[1] for w in wanted], gap, bottom + gap,
                                                                   ceiling - gap)):
            labels.append(ax.annotate(str(number), (p.intensity, p.gflops), xytext=to_data.transform((px + 16, y)),
                                      fontsize=9, va="center", color=colour[id(p)],
                                      arrowprops=dict(arrowstyle="-", color="#9aa3ad", linewidth=0.6, shrinkA=0,
                                                      shrinkB=3)))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2, fontsize=8, frameon=False)
    ax.grid(True, which="both", linewidth=0.3)
    return fig, ax, labels


def roofline(points: Iterable[RooflinePoint], device: str, copy_gbps: float, peak_gflops: float,
             path: str | Path, ceilings: Iterable = (), title: str | None = None) -> bool:
    """The roofline with the points and the dashed ceilings, as PNG at `path` (title default
    "Roofline: <device>").  False, and no file, without matplotlib; ValueError (roofline_data) first."""
    data = roofline_data(points, copy_gbps, peak_gflops, ceilings)
    if (plt := pyplot()) is None:
        return False
    fig, _, _ = roofline_figure(data, title or f"Roofline: {device}")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return True


# ---------------------------------------------------------------- a student's own kernel

def max_sm_clock_mhz() -> float | None:
    """The first GPU's maximum SM clock (MHz) from nvidia-smi (gpus.smi_facts), or None when it cannot be read."""
    return gpus.smi_facts()["sm_clock_max_mhz"]


def single_launcher(kind: "Kind") -> "Launcher | None":
    """The kind's launcher when it has one only and states its FLOP and bytes per cell, else None (lab 7)."""
    work = kind.launchers[0] if len(kind.launchers) == 1 else None
    return work if work and work.flop_per_cell and work.bytes_per_cell else None


def lab_roofline(kind: "Kind", bench: dict | None, path: str | Path) -> str | None:
    """roofline.png: a student's kernel on the roofline of the GPU it ran on, from the lab's bench JSON
    and problem kind, at one sweep per pass (lab 8, fusing sweeps, shows above the memory roof: it
    moves fewer bytes).  Returns what was written, or None with nothing to draw: no correct timed
    run, a kind of several launchers (lab 7) or no FLOP stated, no matplotlib, no SM clock."""
    single = single_launcher(kind)
    if not bench or not bench.get("output_ok") or single is None or not bench.get("sm_count") \
            or not (clock := max_sm_clock_mhz()) or pyplot() is None:
        return None
    roofline([point_from_gbps("your kernel", bench["gbps"], single)], bench.get("device", "GPU"), bench["copy_gbps"],
             peak_fp32_gflops(int(bench["sm_count"]), clock), path)
    return str(path)
