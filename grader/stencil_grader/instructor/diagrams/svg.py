"""A small SVG writer for the handouts' diagrams: deterministic text, no dependency.

    c = Canvas(width, height, title="alt text", desc="longer description")
    c.rect(x, y, w, h, fill=..., stroke=...); c.line(...); c.text(x, y, "label", size=13)
    c.arrow(x1, y1, x2, y2); c.svg() -> str

Coordinates are SVG user units (pixels at 100 %); every number is written with at most one
decimal, so the same drawing gives the same bytes on every machine (the committed files are
compared with what the code draws).  Text uses the generic families `sans-serif` and
`monospace`, which every browser and Markdown preview resolves to a font it has.

The canvas also keeps an estimate of every text label's box (width 0.6 x font size per
character, height the font size), so that a test can check that no two labels overlap and
none sticks out of the picture: `Canvas.labels`.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

SANS = "sans-serif"
MONO = "monospace"
#: Okabe and Ito's palette (2008), readable with the common colour-vision deficiencies.
ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILION, PURPLE, GREY = (
    "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999")
INK, MUTED, LINE, PAPER = "#1d2330", "#5f6b7a", "#c8ced6", "#ffffff"
#: Glyph width over font size assumed for the label boxes (generous for sans-serif digits and letters).
CHAR_WIDTH = 0.6


def num(value: float) -> str:
    """A coordinate as text: at most one decimal, no trailing ".0", never "-0"."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def tint(colour: str, amount: float) -> str:
    """colour (#rrggbb) mixed with white: amount 0 is the colour, 1 is white."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


@dataclass
class Label:
    """The estimated box of one text label, for the overlap test."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: "Label") -> bool:
        return self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1


@dataclass
class Canvas:
    """One SVG picture: width x height user units, an accessible title (the alt text) and desc."""

    width: float
    height: float
    title: str
    desc: str = ""
    items: list[str] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)

    def rect(self, x, y, w, h, fill="none", stroke=None, sw=1.0, rx=0.0, dash=None, opacity=None) -> None:
        attrs = [f'x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}"', f'fill="{fill}"']
        if rx:
            attrs.append(f'rx="{num(rx)}"')
        if stroke:
            attrs.append(f'stroke="{stroke}" stroke-width="{num(sw)}"')
        if dash:
            attrs.append(f'stroke-dasharray="{dash}"')
        if opacity is not None:
            attrs.append(f'fill-opacity="{num(opacity)}"')
        self.items.append(f"<rect {' '.join(attrs)}/>")

    def line(self, x1, y1, x2, y2, stroke=INK, sw=1.0, dash=None) -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.items.append(f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" stroke="{stroke}" '
                          f'stroke-width="{num(sw)}"{extra}/>')

    def polyline(self, points, stroke=INK, sw=1.0, fill="none", dash=None) -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        pts = " ".join(f"{num(x)},{num(y)}" for x, y in points)
        self.items.append(f'<polyline points="{pts}" fill="{fill}" stroke="{stroke}" stroke-width="{num(sw)}"'
                          f'{extra}/>')

    def polygon(self, points, fill=INK, stroke=None, sw=1.0) -> None:
        pts = " ".join(f"{num(x)},{num(y)}" for x, y in points)
        extra = f' stroke="{stroke}" stroke-width="{num(sw)}"' if stroke else ""
        self.items.append(f'<polygon points="{pts}" fill="{fill}"{extra}/>')

    def circle(self, cx, cy, r, fill=INK, stroke=None, sw=1.0) -> None:
        extra = f' stroke="{stroke}" stroke-width="{num(sw)}"' if stroke else ""
        self.items.append(f'<circle cx="{num(cx)}" cy="{num(cy)}" r="{num(r)}" fill="{fill}"{extra}/>')

    def text(self, x, y, content: str, size=13.0, anchor="start", weight=None, fill=INK, family=SANS,
             italic=False) -> None:
        """A label whose baseline starts (anchor "start"), is centred ("middle") or ends ("end") at
        (x, y)."""
        attrs = [f'x="{num(x)}" y="{num(y)}" font-family="{family}" font-size="{num(size)}"']
        if anchor != "start":
            attrs.append(f'text-anchor="{anchor}"')
        if weight:
            attrs.append(f'font-weight="{weight}"')
        if italic:
            attrs.append('font-style="italic"')
        if fill != INK:
            attrs.append(f'fill="{fill}"')
        self.items.append(f"<text {' '.join(attrs)}>{html.escape(content, quote=False)}</text>")
        width = len(content) * size * CHAR_WIDTH
        x0 = x - width / 2 if anchor == "middle" else x - width if anchor == "end" else x
        self.labels.append(Label(content, x0, y - size * 0.8, x0 + width, y + size * 0.2))

    def arrow(self, x1, y1, x2, y2, stroke=INK, sw=1.4, head=7.0, dash=None) -> None:
        """A straight arrow from (x1, y1) to (x2, y2), its head a filled triangle at the end."""
        dx, dy = x2 - x1, y2 - y1
        length = (dx * dx + dy * dy) ** 0.5 or 1.0
        ux, uy = dx / length, dy / length
        bx, by = x2 - ux * head, y2 - uy * head
        self.line(x1, y1, bx, by, stroke, sw, dash)
        self.polygon([(x2, y2), (bx - uy * head * 0.45, by + ux * head * 0.45),
                      (bx + uy * head * 0.45, by - ux * head * 0.45)], fill=stroke)

    def path(self, d: str, stroke=INK, sw=1.4, fill="none", dash=None) -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.items.append(f'<path d="{d}" fill="{fill}" stroke="{stroke}" stroke-width="{num(sw)}"{extra}/>')

    def curved_arrow(self, x1, y1, cx, cy, x2, y2, stroke=INK, sw=1.4, head=7.0) -> None:
        """A quadratic curve from (x1, y1) to (x2, y2) bent towards (cx, cy), with a head at the end."""
        dx, dy = x2 - cx, y2 - cy
        length = (dx * dx + dy * dy) ** 0.5 or 1.0
        ux, uy = dx / length, dy / length
        bx, by = x2 - ux * head, y2 - uy * head
        self.path(f"M{num(x1)},{num(y1)} Q{num(cx)},{num(cy)} {num(bx)},{num(by)}", stroke, sw)
        self.polygon([(x2, y2), (bx - uy * head * 0.45, by + ux * head * 0.45),
                      (bx + uy * head * 0.45, by - ux * head * 0.45)], fill=stroke)

    def legend(self, x, y, entries, size=12.0, swatch=12.0, gap=6.0) -> float:
        """Swatches and their labels in a column from (x, y); entries are (fill, stroke or None,
        label).  Returns the y below the last entry."""
        for fill, stroke, label in entries:
            self.rect(x, y, swatch, swatch, fill=fill, stroke=stroke or LINE)
            self.text(x + swatch + 6, y + swatch - 2, label, size=size)
            y += swatch + gap
        return y

    @classmethod
    def titled(cls, height: float, alt: str, heading: str, width: float = 880) -> "Canvas":
        """A picture whose title (the alt text) is alt, with heading written across its top."""
        c = cls(width, height, alt)
        c.text(24, 26, heading, size=15, weight="bold")
        return c

    def svg(self) -> str:
        """The picture as an SVG document (UTF-8 text ending in a newline)."""
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(self.width)}" height="{num(self.height)}" '
                f'viewBox="0 0 {num(self.width)} {num(self.height)}" role="img" aria-labelledby="title desc">')
        return "\n".join([head, f'<title id="title">{html.escape(self.title, quote=False)}</title>',
                          f'<desc id="desc">{html.escape(self.desc or self.title, quote=False)}</desc>',
                          f'<rect width="{num(self.width)}" height="{num(self.height)}" fill="{PAPER}"/>',
                          *self.items, "</svg>"]) + "\n"
