"""The handouts' diagrams: SVG pictures of the geometry each lab teaches, drawn with matplotlib from the
labs' own constants (`grade.py figures [--check]`).  A picture's alt text is its SVG <title>, which the
handout repeats as ![alt text](img/NAME.svg); a committed picture differs when its title or labels
(sketch.labels) differ from what the code draws, so that another matplotlib's bytes are no difference.
Without matplotlib every function here raises UsageError (exit 2).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ... import KIT_ROOT
from .constants import DiagramError
from .sketch import Sketch, labels
from . import solver, threed, twod

__all__ = ["DIAGRAMS", "Diagram", "DiagramError", "render", "differences", "write"]

IMG_DIR = Path("handouts") / "img"


@dataclass(frozen=True)
class Diagram:
    """One picture: handouts/img/<name>.svg, shown by handouts/<handout>.  draw(kit root) returns
    the picture (Sketch) and its alt text, written from the same constants."""

    name: str
    handout: str
    draw: Callable[[Path], Sketch]

    @property
    def path(self) -> Path:
        return IMG_DIR / f"{self.name}.svg"


DIAGRAMS: tuple[Diagram, ...] = (
    Diagram("01-thread-mapping", "01-naive-5pt.md", twod.thread_mapping),
    Diagram("02-tile-halo", "02-shared-tiling.md", twod.tile_halo),
    Diagram("03-periodic-wrap", "03-boundary-neat.md", twod.periodic_wrap),
    Diagram("04-bytes-in-flight", "04-max-smem.md", twod.bytes_in_flight),
    Diagram("05-three-planes", "05-z-coarsening.md", threed.three_planes),
    Diagram("06-register-window", "06-register-tiling.md", threed.register_window),
    Diagram("07-reduction-tree", "07-reduction-residual.md", solver.reduction_tree),
    Diagram("08-overlapped-tile", "08-temporal-blocking.md", solver.overlapped_tile),
    Diagram("08-pipeline-ring", "08-temporal-blocking.md", solver.pipeline_ring),
)

#: A handout's image reference: ![alt text](img/NAME.svg).
_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\(img/(?P<name>[A-Za-z0-9_-]+)\.svg\)")


def render(kit_root: Path = KIT_ROOT) -> dict[Diagram, tuple[str, str]]:
    """{picture: (its alt text, its SVG)} as the code draws them now.  Raises DiagramError when a
    lab source lacks a constant a picture needs, UsageError without matplotlib."""
    return {d: (s.alt, s.svg()) for d in DIAGRAMS for s in (d.draw(Path(kit_root)),)}


def _with_alts(text: str, alts: dict[str, str]) -> str:
    """A handout's text with the alt text of each picture of `alts` (name -> alt) as the picture's."""
    return _IMAGE.sub(lambda m: f"![{alts.get(m.group('name'), m.group('alt'))}](img/{m.group('name')}.svg)", text)


def differences(kit_root: Path = KIT_ROOT) -> list[str]:
    """One line per committed picture whose title or labels differ from what the code draws, or
    that is missing, per handout that does not show its picture, and per alt text that differs
    from the picture's."""
    kit_root = Path(kit_root)
    drawn = render(kit_root)
    out = []
    for d, (_, svg) in drawn.items():
        try:
            if labels((kit_root / d.path).read_text(encoding="utf-8")) != labels(svg):
                out.append(f"{d.path}: differs from what the code draws from the labs' constants (make figures)")
        except (OSError, ET.ParseError):
            out.append(f"{d.path}: missing or not SVG (make figures draws it)")
    for d, (alt, _) in drawn.items():
        text = (kit_root / "handouts" / d.handout).read_text(encoding="utf-8")
        if not any(m.group("name") == d.name for m in _IMAGE.finditer(text)):
            out.append(f"handouts/{d.handout}: does not show {d.path} (![alt text](img/{d.name}.svg))")
        elif _with_alts(text, {d.name: alt}) != text:
            out.append(f"handouts/{d.handout}: the alt text of img/{d.name}.svg differs from the picture's "
                       "(make figures)")
    return out


def write(kit_root: Path = KIT_ROOT) -> list[Path]:
    """Write every picture whose bytes changed, and the handouts' alt texts; returns the files written."""
    kit_root = Path(kit_root)
    drawn = render(kit_root)
    new = {kit_root / d.path: svg for d, (_, svg) in drawn.items()}
    for name in sorted({d.handout for d in drawn}):
        path = kit_root / "handouts" / name
        new[path] = _with_alts(path.read_text(encoding="utf-8"), {d.name: alt for d, (alt, _) in drawn.items()})
    written = [path for path, text in new.items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
    for path in written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new[path], encoding="utf-8")
    return written
