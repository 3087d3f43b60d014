"""What the handouts must tell a student, checked in their text."""

import re

from conftest import KIT_ROOT

HANDOUTS = KIT_ROOT / "handouts"


def text(name: str) -> str:
    return re.sub(r"\s+", " ", (HANDOUTS / name).read_text())


def test_the_textbooks_unwritten_boundary_is_named_where_the_labs_copy_it():
    """The handouts say PMPP's kernels leave the boundary unwritten, which the labs' NaN poison fails."""
    lab1 = text("01-naive-5pt.md")
    assert "PMPP's chapter 8" in lab1 and "unwritten" in lab1 and "NaN" in lab1 and "`out = in`" in lab1
    for name in ("02-shared-tiling.md", "05-z-coarsening.md"):
        assert re.search(r"textbook's [^.]*(writes only the interior|write the interior only)", text(name)), name


def test_every_grid_between_sweeps_is_float():
    assert "Every grid held between sweeps is `float`" in text("04-max-smem.md")
    assert "every grid of every time step is `float`" in text("08-temporal-blocking.md")
