"""lab.json's "constraints" (KEYS, OPTIONAL; what each means: Constraints): the rules a lab puts on how its
kernels work, besides the answer, each judged on what ran (grading/launches.py) and stated to the student
by its "rule" sentence.  labspec.load validates it through parse().
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: What a tile rule says when lab.json gives no sentence of its own.
DEFAULT_TILE_RULE = ("Every kernel your launcher starts stages its block's input tile in shared memory: the "
                     "cells its threads compute, plus their halo, and reads the stencil's neighbours there.")
#: The one storage type a grid may have between sweeps: the API's (float, 4 bytes a cell).
STORAGE_TYPES = ("fp32",)


@dataclass(frozen=True)
class SharedTile:
    """The shared-memory tile a lab teaches, as the launch audit measures it: halo, its width in cells (0: a
    staging buffer, lab 8); smallest_tile, (width, height) in cells of the smallest output tile of a plane,
    and row_padding, cells a row may be padded with on each side (plane_factor); rule, the sentence."""

    halo: int = 1
    smallest_tile: tuple[int, int] | None = None
    row_padding: int = 0
    rule: str = DEFAULT_TILE_RULE

    @property
    def plane_factor(self) -> float | None:
        """Bytes one plane of a tile may use over 4 bytes per output cell: its halo ring and
        padding around the smallest tile, (W + 2 halo + 2 padding)(H + 2 halo) / (W H);
        larger tiles need less.  None without smallest_tile."""
        if self.smallest_tile is None:
            return None
        w, h = self.smallest_tile
        return (w + 2 * self.halo + 2 * self.row_padding) * (h + 2 * self.halo) / (w * h)


@dataclass(frozen=True)
class GridStorage:
    """How every grid a launcher keeps between sweeps is stored (type: one of STORAGE_TYPES)."""

    type: str
    rule: str


@dataclass(frozen=True)
class Constraints:
    shared_memory: bool              # the lab teaches a shared-memory tile (judged on the launches)
    no_div_rem: bool                 # no integer div/rem instruction in the PTX
    max_shared_planes: int | None    # at most N planes of shared memory per block (lab 6)
    forbidden_calls: tuple[str, ...]  # identifiers forbidden on top of the default list
    shared_tile: SharedTile | None = None     # the tile (with shared_memory; defaults when absent)
    grid_storage: GridStorage | None = None   # the grids' type between sweeps (None: not checked)


KEYS = ("shared_memory", "no_div_rem", "forbidden_calls")
OPTIONAL = ("max_shared_planes", "shared_tile", "grid_storage")


def _sentence(v, parent: dict, key: str, prefix: str) -> str:
    value = parent[key]
    if not isinstance(value, str) or not value.strip():
        v.fail(prefix + key, "a sentence stating the rule to the student", value)
    return " ".join(value.split())


def _shared_tile(v, c: dict, planes: int | None) -> SharedTile:
    t = v.obj(c, "shared_tile", "constraints.", ("halo", "rule"), optional=("smallest_tile", "row_padding"))
    prefix = "constraints.shared_tile."
    halo = v.integer(t, "halo", prefix, "an integer >= 0 (the halo's width in cells)", lambda n: n >= 0)
    smallest = t.get("smallest_tile")
    if smallest is not None and not (isinstance(smallest, list) and len(smallest) == 2 and
                                     all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                         for n in smallest)):
        v.fail(prefix + "smallest_tile", "[width, height]: two integers >= 1 (cells)", smallest)
    if planes is not None and smallest is None:
        v.fail(prefix + "smallest_tile", "[width, height] of the smallest tile (max_shared_planes needs it)",
               None)
    padding = v.integer(t, "row_padding", prefix, "an integer >= 0 (cells)", lambda n: n >= 0) \
        if "row_padding" in t else 0
    return SharedTile(halo, tuple(smallest) if smallest else None, padding, _sentence(v, t, "rule", prefix))


def parse(v, data: dict) -> Constraints:
    """data["constraints"], validated by v (labspec's validator: LabSpecError)."""
    c = v.obj(data, "constraints", "", KEYS, optional=OPTIONAL)
    planes = v.integer(c, "max_shared_planes", "constraints.", "an integer >= 1 (or absent)",
                       lambda n: n >= 1) if c.get("max_shared_planes") is not None else None
    calls = c["forbidden_calls"]
    if not isinstance(calls, list):
        v.fail("constraints.forbidden_calls", "a list of C identifiers", calls)
    for i, name in enumerate(calls):
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            v.fail(f"constraints.forbidden_calls[{i}]", "a C identifier", name)
    shared = v.boolean(c, "shared_memory", "constraints.")
    tile = _shared_tile(v, c, planes) if "shared_tile" in c else None
    if tile is None and planes is not None:
        v.fail("constraints.shared_tile", "an object with halo, rule and smallest_tile (max_shared_planes "
               "needs the smallest tile)", None)
    if tile is not None and not shared:
        v.fail("constraints.shared_memory", "true when shared_tile is given", False)
    storage = None
    if "grid_storage" in c:
        s = v.obj(c, "grid_storage", "constraints.", ("type", "rule"))
        storage = GridStorage(v.choice(s, "type", "constraints.grid_storage.", STORAGE_TYPES),
                              _sentence(v, s, "rule", "constraints.grid_storage."))
    return Constraints(shared_memory=shared, no_div_rem=v.boolean(c, "no_div_rem", "constraints."),
                       max_shared_planes=planes, forbidden_calls=tuple(calls),
                       shared_tile=tile or (SharedTile() if shared else None), grid_storage=storage)
