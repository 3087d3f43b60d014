"""A picture in pixels for the handouts' diagrams, drawn with matplotlib and written as SVG.

    s = Sketch(width, height, alt, heading)    x to the right, y down, 1 unit = 1 CSS pixel
    s.box(x, y, w, h, fill, edge); s.text(x, y, "label", size); s.arrow(x1, y1, x2, y2); s.svg() -> str

Text is kept as SVG text (svg.fonttype "none"), so the picture's labels can be read back
(labels(svg)); the SVG carries no date and fixed element ids, so one matplotlib draws the same
bytes on every run, and the alt text is the SVG's <title>.
"""

from __future__ import annotations

import html
import io
import xml.etree.ElementTree as ET
from math import nan

from ...grading import plot

#: Okabe and Ito's palette (2008), readable with the common colour-vision deficiencies.
ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILION, PURPLE, GREY = (
    "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999")
INK, MUTED, LINE, PALE, WHITE = "#1d2330", "#5f6b7a", "#c8ced6", "#eef1f4", "#ffffff"
ROW_COLOURS = (SKY, ORANGE, GREEN, PURPLE, YELLOW, BLUE, VERMILION, GREY)
PT = 0.75                       # points per CSS pixel: matplotlib sizes fonts and lines in points
SVG = "{http://www.w3.org/2000/svg}"


def tint(colour: str, amount: float) -> str:
    """colour (#rrggbb) mixed with white: amount 0 is the colour, 1 is white."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


class Sketch:
    """One diagram: width x height CSS pixels, its alt text, a bold heading at the top left."""

    def __init__(self, width: float, height: float, alt: str, heading: str = ""):
        plt = plot.pyplot("the handouts' diagrams")
        self.alt, self.plt = alt, plt
        self.fig = plt.figure(figsize=(width / 96, height / 96))
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(height, 0)
        self.ax.set_axis_off()
        if heading:
            self.text(24, 26, heading, 15, weight="bold")

    def box(self, x, y, w, h, fill="none", edge=None, lw=1.0, dash=False, **kw) -> None:
        """A rectangle from (x, y) down and right; edge None: no outline."""
        from matplotlib.patches import Rectangle
        self.ax.add_patch(Rectangle((x, y), w, h, facecolor=fill, edgecolor=edge or "none", linewidth=lw * PT,
                                    linestyle="--" if dash else "-", **kw))

    def text(self, x, y, s: str, size=12.0, colour=INK, family="sans-serif", **kw) -> None:
        """A label whose first baseline is at y (ha "left", "center", "right" at x); "\\n" breaks lines."""
        top = "\n" in s                      # matplotlib puts a block's last baseline at y: hang it from the top
        self.ax.text(x, y - 0.8 * size if top else y, s, fontsize=size * PT, color=colour,
                     va="top" if top else "baseline", family=family, **kw)

    def line(self, xs, ys, colour=INK, lw=1.0, **kw) -> None:
        """A polyline through (xs, ys), nan breaking it; drawn in turn with the boxes (zorder 1)."""
        self.ax.plot(xs, ys, color=colour, linewidth=lw * PT, zorder=1, **kw)

    def grid(self, x, y, cols, rows, w, h, colour=WHITE, lw=0.5) -> None:
        """The lines between cols x rows cells of w x h from (x, y): cells drawn as bands look like cells."""
        xs = [v for i in range(cols + 1) for v in (x + i * w, x + i * w, nan)] + [v for _ in range(rows + 1)
                                                                                for v in (x, x + cols * w, nan)]
        ys = [v for _ in range(cols + 1) for v in (y, y + rows * h, nan)] + [v for j in range(rows + 1)
                                                                           for v in (y + j * h, y + j * h, nan)]
        self.line(xs, ys, colour, lw)

    def arrow(self, x1, y1, x2, y2, colour=INK, lw=1.2, bend=0.0) -> None:
        """An arrow from (x1, y1) to (x2, y2), straight or bent (bend: arc3's rad)."""
        self.ax.annotate("", (x2, y2), (x1, y1), arrowprops=dict(
            arrowstyle="-|>,head_length=0.5,head_width=0.25", color=colour, linewidth=lw * PT,
            shrinkA=0, shrinkB=0, connectionstyle=f"arc3,rad={bend}"))

    def legend(self, x, y, entries, size=12.0) -> None:
        """Swatches and labels in a column from (x, y), 18 apart: (fill, edge or None, label)."""
        for i, (fill, edge, label) in enumerate(entries):
            self.box(x, y + 18 * i, 12, 12, fill, edge or LINE)
            self.text(x + 18, y + 18 * i + 10, label, size)

    def svg(self) -> str:
        """The picture as SVG text, its <title> the alt text."""
        out = io.StringIO()
        with self.plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "stencil-lab-kit"}):
            self.fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
        self.plt.close(self.fig)
        text = out.getvalue()
        root = text.index(">", text.index("<svg")) + 1
        return f'{text[:root]}\n <title>{html.escape(self.alt, quote=False)}</title>{text[root:]}'


def labels(svg: str) -> tuple[str, tuple[str, ...]]:
    """(the title, every text label in order) of an SVG picture: what a reader learns from it."""
    root = ET.fromstring(svg)
    title = root.find(SVG + "title")
    return (title.text if title is not None else "",
            tuple("".join(t.itertext()).strip() for t in root.iter(SVG + "text")))
