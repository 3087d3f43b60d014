"""The two charts of a report page, as inline SVG: the roofline and the bandwidth bars.

    roofline_svg(points, copy_gbps, peak_gflops, device) -> str
    bandwidth_svg(gbps, copy_gbps, floor, target) -> str

Plain SVG elements (no script, no external font or asset), so html.py can put them in a page that
opens from a file.  Labels are escaped: a device name comes from the machine.
Units: GB/s with 1 GB = 1e9 bytes, GFLOP/s with 1 GFLOP = 1e9 FLOP.
"""

from __future__ import annotations

import html
import math

from . import plot


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _log_scale(lo: float, hi: float, a: float, b: float):
    span = math.log10(hi) - math.log10(lo)
    return lambda v: a + (math.log10(v) - math.log10(lo)) / span * (b - a)


def roofline_svg(points: list[tuple[str, float, float, str]], copy_gbps: float, peak_gflops: float | None,
                 device: str = "GPU") -> str:
    """A log-log roofline as an inline SVG element.

    points: (label, intensity in FLOP per compulsory byte, GFLOP/s, colour).  copy_gbps: the
    memory roof (GB/s).  peak_gflops: the compute roof, or None when it is not known (then only
    the memory roof is drawn, and the picture says so).  Raises ValueError on a non-positive figure
    (plot.roofline_data checks them).
    """
    peak_known = peak_gflops is not None
    # Without a compute roof, a stand-in peak just right of the points keeps the axes on them.
    peak = peak_gflops if peak_known else copy_gbps * 4.0 * max(p[1] for p in points)
    data = plot.roofline_data([plot.RooflinePoint(p[0], p[1], p[2]) for p in points], copy_gbps, peak)
    w, h, left, right, top, bottom = 680, 380, 70, 20, 20, 50
    lo, hi = data.x_range
    ys = [p[2] for p in points] + [lo * copy_gbps, peak]
    ylo = 10 ** math.floor(math.log10(min(ys) / 2))
    yhi = 10 ** math.ceil(math.log10(max(ys) * 2))
    sx = _log_scale(lo, hi, left, w - right)
    sy = _log_scale(ylo, yhi, h - bottom, top)
    out = [f'<svg id="roofline-svg" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" '
           f'height="{h}" role="img" aria-label="roofline of {_e(device)}">',
           f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" fill="#fbfcfd" '
           'stroke="#c8ced6"/>']
    for e in range(round(math.log10(lo)), round(math.log10(hi)) + 1):          # decades
        x = sx(10 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{h - bottom}" stroke="#e3e7ec"/>'
                   f'<text x="{x:.1f}" y="{h - bottom + 16}" font-size="11" text-anchor="middle">{10.0 ** e:g}</text>')
    for e in range(round(math.log10(ylo)), round(math.log10(yhi)) + 1):
        y = sy(10 ** e)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - right}" y2="{y:.1f}" stroke="#e3e7ec"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{10.0 ** e:g}</text>')
    if peak_known:
        roof = data.roof
    else:
        roof = ((lo, lo * copy_gbps), (hi, hi * copy_gbps))
    clipped = [(x, min(y, yhi)) for x, y in roof]
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in clipped)
    out.append(f'<polyline points="{path}" fill="none" stroke="#1d2330" stroke-width="2"/>')
    out.append(f'<text x="{left + 8}" y="{sy(lo * copy_gbps) - 8:.1f}" font-size="12">copy bandwidth '
               f'{copy_gbps:.0f} GB/s</text>')
    if peak_known:
        out.append(f'<text x="{sx(data.ridge) + 6:.1f}" y="{sy(peak) - 6:.1f}" font-size="12">peak fp32 '
                   f'{peak / 1e3:.1f} TFLOP/s (estimate)</text>')
    else:
        out.append(f'<text x="{w - right - 6}" y="{top + 16}" font-size="12" text-anchor="end">compute roof not '
                   'known (no SM clock from nvidia-smi)</text>')
    highest = max(p[2] for p in points)
    for label, x, y, colour in points:
        cx, cy = sx(x), sy(y)
        dy = -10 if y == highest else 18          # points of one intensity: labels above and below
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="{_e(colour)}" stroke="#fff"/>'
                   f'<text x="{cx + 10:.1f}" y="{cy + dy:.1f}" font-size="12" fill="{_e(colour)}">{_e(label)}</text>')
    out.append(f'<text x="{(left + w - right) / 2:.0f}" y="{h - 10}" font-size="12" text-anchor="middle">'
               'arithmetic intensity (useful FLOP per compulsory DRAM byte)</text>'
               f'<text x="14" y="{(top + h - bottom) / 2:.0f}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 14 {(top + h - bottom) / 2:.0f})">GFLOP/s (useful)</text></svg>')
    return "".join(out)


def bandwidth_svg(gbps: float, copy_gbps: float, floor: float | None, target: float | None) -> str:
    """Horizontal bars of effective and copy bandwidth (GB/s), with the floor and target (fractions
    of copy) marked, as an inline SVG element."""
    w, h, left, right = 680, 130, 130, 30
    top_value = max(gbps, copy_gbps) * 1.1
    sx = lambda v: left + v / top_value * (w - left - right)         # noqa: E731
    out = [f'<svg id="bandwidth-svg" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" '
           f'height="{h}" role="img" aria-label="bandwidth against copy">']
    for i, (label, value, colour) in enumerate((("your kernel", gbps, "#2b6cb0"), ("copy", copy_gbps, "#718096"))):
        y = 14 + i * 38
        out.append(f'<text x="{left - 8}" y="{y + 18}" font-size="13" text-anchor="end">{label}</text>'
                   f'<rect x="{left}" y="{y}" width="{max(1.0, sx(value) - left):.1f}" height="26" fill="{colour}"/>'
                   f'<text x="{sx(value) + 4:.1f}" y="{y + 18}" font-size="12">{value:.0f} GB/s</text>')
    for name, frac, colour in (("floor", floor, "#b7791f"), ("target", target, "#1f8a4c")):
        if frac is not None:
            x = sx(frac * copy_gbps)
            out.append(f'<line x1="{x:.1f}" y1="6" x2="{x:.1f}" y2="92" stroke="{colour}" stroke-width="2" '
                       f'stroke-dasharray="5,3"/><text x="{x:.1f}" y="110" font-size="12" text-anchor="middle" '
                       f'fill="{colour}">{name} {frac:g}</text>')
    out.append("</svg>")
    return "".join(out)
