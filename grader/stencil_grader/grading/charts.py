"""The charts of a student's report page, as inline SVG (standard library only):

    roofline_svg(points, copy_gbps, peak_gflops, device) -> str
    bandwidth_svg(gbps, copy_gbps, floor, target) -> str
    progress_svg(ratios, floor, target) -> str

Plain SVG elements (no script, no external font or asset), so html.py can put them in a page that
opens from a file.  Labels are escaped: a device name comes from the machine.
Units: GB/s with 1 GB = 1e9 bytes, GFLOP/s with 1 GFLOP = 1e9 FLOP.
"""

from __future__ import annotations

import html
import math

from . import plot


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
    """A log-log roofline as an inline SVG element.

    points: (label, intensity in FLOP per compulsory byte, GFLOP/s, colour).  copy_gbps: the
    memory roof (GB/s).  peak_gflops: the compute roof, or None when it is not known (then only
    the memory roof is drawn, and the picture says so).  Raises ValueError on a non-positive figure
    (plot.roofline_data checks them)."""
    # Without a compute roof, a stand-in peak just right of the points keeps the axes on them.
    peak = peak_gflops if peak_gflops is not None else copy_gbps * 4.0 * max(p[1] for p in points)
    data = plot.roofline_data([plot.RooflinePoint(*p[:3]) for p in points], copy_gbps, peak)
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
