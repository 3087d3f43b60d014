"""The problem kinds, read from grader/kinds.json, the one place for their facts (lab.json's "api" names
one); the C harness reads them through labspec.c_header and make_fragment.  A new kind: grader/README.md,
section 7.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import KIT_ROOT
from .files import Validator, read_json

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


def parse(data) -> dict[str, Kind]:
    """Validate the decoded grader/kinds.json; raises KindError naming the key."""
    v = Validator("grader/kinds.json", KindError)
    if not isinstance(data, dict):
        v.fail("the top level", "an object of api -> kind", data)
    kinds = {}
    for api, k in data.items():
        if api.startswith("_"):
            continue                                  # "_about" and other notes
        if not _IDENTIFIER.match(api) or not isinstance(k, dict):
            v.fail(api, "an object keyed by a C identifier", k)
        v.obj(data, api, "", ("summary", "dims", "boundary", "multi_step", "launchers", "tolerances", "sources"),
              optional=("solver",))
        prefix = api + "."
        dims = v.integer(k, "dims", prefix, "2 or 3", lambda n: n in DIMS)
        v.choice(k, "boundary", prefix, BOUNDARIES)
        multi_step = v.boolean(k, "multi_step", prefix)
        if not isinstance(k["launchers"], list) or not k["launchers"]:
            v.fail(prefix + "launchers", "a non-empty list", k["launchers"])
        launchers = []
        for i, entry in enumerate(k["launchers"]):
            where = f"{api}.launchers[{i}]."
            if not isinstance(entry, dict) or not _IDENTIFIER.match(str(entry.get("name", ""))):
                v.fail(where[:-1], "an object with a C identifier as name", entry)
            e = {"bytes_per_cell": None, "bytes_fixed": 0, "flop_per_cell": None} | entry
            flop = e["flop_per_cell"]
            launchers.append(Launcher(
                entry["name"], v.number(e, "bytes_per_cell", where, "a number > 0", lambda x: x > 0),
                v.number(e, "bytes_fixed", where, "a number >= 0", lambda x: x >= 0),
                None if flop is None else v.number(e, "flop_per_cell", where, "a number > 0 or null", lambda x: x > 0)))
        for key, test, what in (("tolerances", _IDENTIFIER.match, "a list of C identifiers"),
                                ("sources", _SOURCE.match, "a list of file names ending in .c or .cu")):
            if not isinstance(k[key], list) or not all(isinstance(x, str) and test(x) for x in k[key]):
                v.fail(prefix + key, what, k[key])
        if not k["sources"]:
            v.fail(prefix + "sources", "a non-empty list", k["sources"])
        solver = v.boolean(k, "solver", prefix) if "solver" in k else False
        kinds[api] = Kind(api, str(k["summary"]), dims, k["boundary"], multi_step, tuple(launchers),
                          tuple(k["tolerances"]), tuple(k["sources"]), solver)
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
