"""The problem kinds, read from grader/kinds.json, the one place for their facts (lab.json's "api" names
one); the C harness reads them through labspec.c_header and make_fragment.  A new kind: grader/README.md,
section 7.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import KIT_ROOT
from .files import read_json

KINDS_JSON = KIT_ROOT / "grader" / "kinds.json"
DIMS = (2, 3)
BOUNDARIES = ("dirichlet", "periodic")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SOURCE = re.compile(r"^[a-z0-9_]+\.(c|cu)$")


class KindError(ValueError):
    """grader/kinds.json is missing, not JSON, or breaks its schema; the message says where."""


@dataclass(frozen=True)
class Launcher:
    """One function the student writes: its name (C linkage, stencil_lab.h), the bytes one
    call must move per cell (per sweep for a multi-step kind) plus bytes_fixed (results that
    are not grids), and its useful FLOP per cell (None where the roofline does not apply)."""

    name: str
    bytes_per_cell: float
    bytes_fixed: float = 0.0
    flop_per_cell: float | None = None


@dataclass(frozen=True)
class Kind:
    api: str
    summary: str
    dims: int
    boundary: str
    multi_step: bool
    launchers: tuple[Launcher, ...]
    tolerances: tuple[str, ...]
    sources: tuple[str, ...]
    solver: bool = False          # `bench --solve` (make solve) exists for this kind

    @property
    def dirichlet_dims(self) -> int:
        """2 or 3 for a Dirichlet kind (its boundary cells are copied, bit for bit); 0 when no cell
        is a copied boundary cell (periodic)."""
        return self.dims if self.boundary == "dirichlet" else 0


def _fail(where: str, what: str, found) -> KindError:
    return KindError(f"grader/kinds.json: {where} must be {what}, got {json.dumps(found)}")


def parse(data) -> dict[str, Kind]:
    """Validate the decoded grader/kinds.json; raises KindError naming the key."""
    if not isinstance(data, dict):
        raise _fail("the top level", "an object of api -> kind", data)
    kinds = {}
    for api, k in data.items():
        if api.startswith("_"):
            continue                                  # "_about" and other notes
        if not _IDENTIFIER.match(api) or not isinstance(k, dict):
            raise _fail(api, "an object keyed by a C identifier", k)
        keys = ("summary", "dims", "boundary", "multi_step", "launchers", "tolerances", "sources")
        for key in keys:
            if key not in k:
                raise KindError(f"grader/kinds.json: {api}.{key} is missing")
        for key in k:
            if key not in keys + ("solver",):
                raise KindError(f"grader/kinds.json: {api}.{key} is not a known key (allowed: {', '.join(keys)})")
        if k["dims"] not in DIMS:
            raise _fail(f"{api}.dims", "2 or 3", k["dims"])
        if k["boundary"] not in BOUNDARIES:
            raise _fail(f"{api}.boundary", "dirichlet or periodic", k["boundary"])
        if not isinstance(k["multi_step"], bool):
            raise _fail(f"{api}.multi_step", "true or false", k["multi_step"])
        launchers = []
        if not isinstance(k["launchers"], list) or not k["launchers"]:
            raise _fail(f"{api}.launchers", "a non-empty list", k["launchers"])
        for i, entry in enumerate(k["launchers"]):
            where = f"{api}.launchers[{i}]"
            if not isinstance(entry, dict) or not _IDENTIFIER.match(str(entry.get("name", ""))):
                raise _fail(where, "an object with a C identifier as name", entry)
            bytes_per_cell, fixed = entry.get("bytes_per_cell"), entry.get("bytes_fixed", 0)
            flop = entry.get("flop_per_cell")
            if not isinstance(bytes_per_cell, (int, float)) or isinstance(bytes_per_cell, bool) or bytes_per_cell <= 0:
                raise _fail(f"{where}.bytes_per_cell", "a number > 0", bytes_per_cell)
            if not isinstance(fixed, (int, float)) or isinstance(fixed, bool) or fixed < 0:
                raise _fail(f"{where}.bytes_fixed", "a number >= 0", fixed)
            if flop is not None and (not isinstance(flop, (int, float)) or isinstance(flop, bool) or flop <= 0):
                raise _fail(f"{where}.flop_per_cell", "a number > 0 or null", flop)
            launchers.append(Launcher(entry["name"], float(bytes_per_cell), float(fixed),
                                      None if flop is None else float(flop)))
        for key, test, what in (("tolerances", _IDENTIFIER.match, "a list of C identifiers"),
                                ("sources", _SOURCE.match, "a list of file names ending in .c or .cu")):
            if not isinstance(k[key], list) or not all(isinstance(x, str) and test(x) for x in k[key]):
                raise _fail(f"{api}.{key}", what, k[key])
        if not k["sources"]:
            raise _fail(f"{api}.sources", "a non-empty list", k["sources"])
        if not isinstance(k.get("solver", False), bool):
            raise _fail(f"{api}.solver", "true or false", k["solver"])
        kinds[api] = Kind(api, str(k["summary"]), k["dims"], k["boundary"], k["multi_step"],
                          tuple(launchers), tuple(k["tolerances"]), tuple(k["sources"]),
                          k.get("solver", False))
    if not kinds:
        raise KindError("grader/kinds.json declares no kind")
    return kinds


@lru_cache(maxsize=None)
def load(path: Path = KINDS_JSON) -> dict[str, Kind]:
    """Every kind of grader/kinds.json (cached); raises KindError."""
    return parse(read_json(path, KindError))


def get(api: str) -> Kind:
    """The kind named api; KeyError naming the kinds there are."""
    table = load()
    if api not in table:
        raise KeyError(f"no problem kind {api!r} in grader/kinds.json (kinds: {', '.join(table)})")
    return table[api]


def launcher_names() -> frozenset[str]:
    """Every launcher name of every kind: the C-linkage functions a student file may define."""
    return frozenset(l.name for k in load().values() for l in k.launchers)
