"""grader/kinds.json against the C side: the API header, each kind module's calls, its function table."""

import json
import re
import subprocess

import pytest

from conftest import KIT_ROOT
from stencil_grader.base import kinds, labspec
from stencil_grader.grading import whitelist

HEADER = KIT_ROOT / "grader" / "include" / "stencil_lab.h"


def test_the_student_api_declares_exactly_the_launchers_of_the_kinds():
    assert whitelist.api_names(HEADER) == kinds.launcher_names()


def test_every_lab_names_a_kind():
    for lab_dir in labspec.discover_labs():
        spec = labspec.load(lab_dir / "lab.json")
        assert spec.kind.api == spec.api


def built_labs():
    """(lab, build directory) of every lab built by `make test-build` (or `make check`)."""
    found = []
    for lab_dir in labspec.discover_labs():
        for impl in ("starter", "reference"):
            build = KIT_ROOT / "build" / lab_dir.name / impl
            if (build / "bench").is_file() and list(build.glob("kind_*.o")):
                found.append((lab_dir.name, build))
                break
    return found


def undefined_symbols(objects):
    out = subprocess.run(["nm", "-u", *map(str, objects)], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip() and not line.endswith(":")}


NOT_BUILT = "no lab built here: `make test` builds them first (make test-build)"


@pytest.mark.skipif(not built_labs(), reason=NOT_BUILT)
@pytest.mark.parametrize("lab, build", built_labs(), ids=lambda x: getattr(x, "name", x))
def test_each_kind_module_calls_the_launchers_and_reference_of_its_table_entry(lab, build):
    """A kind module's objects call its table entry's launchers and CPU reference (dims, boundary)."""
    kind = labspec.load(KIT_ROOT / "labs" / lab / "lab.json").kind
    used = undefined_symbols(sorted(build.glob("kind_*.o")))
    assert used & kinds.launcher_names() == {l.name for l in kind.launchers}
    references = {name for name in used if name.startswith("cpu_")}
    assert references, f"{lab}: the kind module calls no CPU reference"
    assert all(("3d" in name) == (kind.dims == 3) for name in references), references
    assert all(("periodic" in name) == (kind.boundary == "periodic") for name in references), references


@pytest.mark.skipif(not built_labs(), reason=NOT_BUILT)
@pytest.mark.parametrize("lab, build", built_labs(), ids=lambda x: getattr(x, "name", x))
def test_each_kind_modules_function_table_matches_the_table_and_the_cases(lab, build):
    """`bench --describe`: a solver, case modes and determinism exactly as kinds.json and the cases say."""
    described = json.loads(subprocess.run([build / "bench", "--describe"], capture_output=True, text=True,
                                          timeout=30, check=True).stdout)
    kind = labspec.load(KIT_ROOT / "labs" / lab / "lab.json").kind
    assert described["api"] == kind.api and described["solver"] == kind.solver
    listed = subprocess.run([build / "check", "--list"], capture_output=True, text=True, timeout=30,
                            check=True).stdout
    modes = set(re.findall(r"\((determinism|convergence)\)", listed))
    assert described["case_modes"] == bool(modes)
    assert described["deterministic"] == ("determinism" in modes)
    assert described["bench_arrays"] >= 2 * len(kind.launchers)


@pytest.mark.parametrize("broken, words", [
    ({"x": {"summary": "s", "dims": 4}}, "x.boundary is missing"),
    ({"x": {"summary": "s", "dims": 4, "boundary": "dirichlet", "multi_step": False, "launchers": [],
            "tolerances": [], "sources": ["a.c"]}}, "x.dims must be 2 or 3"),
    ({"x": {"summary": "s", "dims": 2, "boundary": "neumann", "multi_step": False,
            "launchers": [{"name": "f", "bytes_per_cell": 8}], "tolerances": [], "sources": ["a.c"]}},
     "x.boundary must be one of dirichlet, periodic"),
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
