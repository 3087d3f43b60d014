"""grader/kinds.json, the one place for the facts of each problem kind, against the C side:
the student API header declares exactly its launchers, and every lab build compiles in exactly
the kind the table describes (`bench --describe`)."""

import json
import subprocess

import pytest

from conftest import KIT_ROOT
from stencil_grader.base import kinds, labspec
from stencil_grader.grading import symbols

HEADER = KIT_ROOT / "grader" / "include" / "stencil_lab.h"


def test_the_student_api_declares_exactly_the_launchers_of_the_kinds():
    assert symbols.api_names(HEADER) == kinds.launcher_names()


def test_every_lab_names_a_kind():
    for lab_dir in labspec.discover_labs():
        spec = labspec.load(lab_dir / "lab.json")
        assert spec.kind.api == spec.api


def built_benches():
    """(lab, bench program) of every lab built by `make test-build` (or `make check`)."""
    found = []
    for lab_dir in labspec.discover_labs():
        for impl in ("starter", "reference"):
            bench = KIT_ROOT / "build" / lab_dir.name / impl / "bench"
            if bench.is_file():
                found.append((lab_dir.name, bench))
                break
    return found


@pytest.mark.skipif(not built_benches(), reason="no lab built here: `make test` builds them first (make test-build)")
@pytest.mark.parametrize("lab, bench", built_benches(), ids=lambda x: getattr(x, "name", x))
def test_each_build_compiled_in_the_kind_of_kinds_json(lab, bench):
    """The C side reads the table through lab_config.h; a module that restated a fact (a
    launcher name, the boundary, the bytes per cell) would show here."""
    described = json.loads(subprocess.run([bench, "--describe"], capture_output=True, text=True,
                                          timeout=30, check=True).stdout)
    kind = labspec.load(KIT_ROOT / "labs" / lab / "lab.json").kind
    assert described["api"] == kind.api and described["dims"] == kind.dims
    assert described["dirichlet_dims"] == kind.dirichlet_dims
    assert described["multi_step"] == kind.multi_step and described["solver"] == kind.solver
    assert [(l["name"], l["bytes_per_cell"], l["bytes_fixed"]) for l in described["launchers"]] == \
        [(l.name, l.bytes_per_cell, l.bytes_fixed) for l in kind.launchers]


@pytest.mark.parametrize("broken, words", [
    ({"x": {"summary": "s", "dims": 4}}, "x.boundary is missing"),
    ({"x": {"summary": "s", "dims": 4, "boundary": "dirichlet", "multi_step": False, "launchers": [],
            "tolerances": [], "sources": ["a.c"]}}, "x.dims must be 2 or 3"),
    ({"x": {"summary": "s", "dims": 2, "boundary": "neumann", "multi_step": False,
            "launchers": [{"name": "f", "bytes_per_cell": 8}], "tolerances": [], "sources": ["a.c"]}},
     "x.boundary must be dirichlet or periodic"),
    ({"x": {"summary": "s", "dims": 2, "boundary": "dirichlet", "multi_step": False,
            "launchers": [{"name": "f", "bytes_per_cell": 0}], "tolerances": [], "sources": ["a.c"]}},
     "bytes_per_cell must be a number > 0"),
    ({"x": {"summary": "s", "dims": 2, "boundary": "dirichlet", "multi_step": False,
            "launchers": [{"name": "f", "bytes_per_cell": 8}], "tolerances": [], "sources": ["a.py"]}},
     "sources must be a list of file names ending in .c or .cu"),
    ({}, "declares no kind"),
])
def test_a_broken_table_is_refused_naming_the_key(broken, words):
    with pytest.raises(kinds.KindError, match=words):
        kinds.parse(broken)
