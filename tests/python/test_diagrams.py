"""The handouts' diagrams (grader/stencil_grader/instructor/diagrams/): drawn by code from the labs' own
constants, committed as handouts/img/*.svg, shown by the handouts with the picture's own alt text.

No GPU, browser or plotting library is needed: the pictures are SVG text, compared byte for byte.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import KIT_ROOT
from stencil_grader.instructor import diagrams
from stencil_grader.instructor.diagrams import constants, solver, svg

SVG_NS = "{http://www.w3.org/2000/svg}"


def test_every_committed_diagram_is_what_the_code_draws():
    """make figures draws them; this fails when a lab's constants, or the drawing code, changed and the
    committed picture (or a handout's alt text) was not redrawn."""
    problems = diagrams.differences()
    assert not problems, "run `make figures`:\n" + "\n".join(problems)


def test_every_lab_handout_shows_at_least_one_diagram():
    shown = {d.handout for d in diagrams.DIAGRAMS}
    labs = {p.name for p in (KIT_ROOT / "handouts").glob("0*.md")}
    assert labs and shown == labs


@pytest.mark.parametrize("diagram", diagrams.DIAGRAMS, ids=lambda d: d.name)
def test_a_diagram_is_plain_readable_svg(diagram):
    """Valid XML, a title (the alt text) and a description, the size a Markdown preview shows at 100 %,
    fonts every system has, no script, no external reference; no label on another, none cut off."""
    canvas = diagram.draw(KIT_ROOT)
    text = canvas.svg()
    root = ET.fromstring(text)
    assert root.tag == SVG_NS + "svg" and root.get("role") == "img"
    assert root.find(SVG_NS + "title").text == canvas.title and len(canvas.title) > 80
    assert int(root.get("width")) <= 880 and root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    families = {e.get("font-family") for e in root.iter(SVG_NS + "text")}
    assert families <= {"sans-serif", "monospace"}
    assert "<script" not in text and "href" not in text and "@import" not in text
    for i, a in enumerate(canvas.labels):
        assert a.x0 >= 0 and a.y0 >= 0 and a.x1 <= canvas.width and a.y1 <= canvas.height, a.text
        for b in canvas.labels[i + 1:]:
            assert not a.overlaps(b), (a.text, b.text)
    assert "](" not in canvas.title and "]" not in canvas.title        # it is Markdown alt text too
    markdown = (KIT_ROOT / "handouts" / diagram.handout).read_text()
    assert f"![{canvas.title}](img/{diagram.name}.svg)" in markdown


DRAW_ALL = ("import json, sys; from pathlib import Path; from stencil_grader.instructor import diagrams; "
            "print(json.dumps({d.name: d.draw(Path(sys.argv[1])).svg() for d in diagrams.DIAGRAMS}))")


def test_drawing_is_the_same_in_every_process():
    """Two fresh interpreters with different string-hash seeds (so any set or hash order in the
    drawing code differs) draw the same bytes as this process: `make figures` on one machine and
    `figures --check` on another agree."""
    env = dict(os.environ, PYTHONPATH=str(KIT_ROOT / "grader"))
    drawn = [json.loads(subprocess.run([sys.executable, "-c", DRAW_ALL, str(KIT_ROOT)], capture_output=True,
                                       text=True, check=True, timeout=120,
                                       env=dict(env, PYTHONHASHSEED=seed)).stdout)
             for seed in ("1", "2")]
    here = {d.name: d.draw(KIT_ROOT).svg() for d in diagrams.DIAGRAMS}
    assert drawn[0] == here and drawn[1] == here


def copy_sources(tmp_path):
    """A kit of the lab sources the diagrams read (starter/ and reference/), to change constants in."""
    kit = tmp_path / "kit"
    for part in ("starter", "reference", "handouts"):
        shutil.copytree(KIT_ROOT / part, kit / part)
    return kit


def test_a_picture_follows_the_starters_constants(tmp_path):
    """The tile of lab 2's picture is the starter's: change the starter, and the picture and its alt
    text change with it (so neither can disagree with the file a student edits)."""
    kit = copy_sources(tmp_path)
    kernel = kit / "starter" / "02-shared-tiling" / "kernel.cu"
    kernel.write_text(kernel.read_text().replace("constexpr int OUT_TILE_X = 64;", "constexpr int OUT_TILE_X = 32;"))
    tile = next(d for d in diagrams.DIAGRAMS if d.name == "02-tile-halo")
    drawn = tile.draw(kit)
    assert drawn.title.startswith("The 34 x 34 input tile of a 32 x 32 output tile")
    assert drawn.svg() != tile.draw(KIT_ROOT).svg()
    problems = diagrams.differences(kit)
    assert [p for p in problems if "02-tile-halo" in p] == [
        "handouts/img/02-tile-halo.svg: differs from what the code draws from the labs' constants (make figures)",
        "handouts/02-shared-tiling.md: the alt text of img/02-tile-halo.svg differs from the picture's "
        "(make figures)"]
    written = diagrams.write(kit)
    assert kit / "handouts" / "img" / "02-tile-halo.svg" in written
    assert diagrams.differences(kit) == []
    assert f"![{drawn.title}](img/02-tile-halo.svg)" in (kit / "handouts" / "02-shared-tiling.md").read_text()


def test_a_missing_constant_is_named_with_its_file(tmp_path):
    kit = copy_sources(tmp_path)
    kernel = kit / "starter" / "05-z-coarsening" / "kernel.cu"
    kernel.write_text(re.sub(r"constexpr int PLANES_PER_BLOCK = [^;]*;", "", kernel.read_text()))
    planes = next(d for d in diagrams.DIAGRAMS if d.name == "05-three-planes")
    with pytest.raises(constants.DiagramError, match=r"05-z-coarsening/kernel.cu: no integer constant PLANES_PER_BLOCK"):
        planes.draw(kit)


def test_constants_are_read_as_the_compiler_would(tmp_path):
    source = tmp_path / "kernel.cu"
    source.write_text("#define TUNE_K 8   /* sweeps */\n"
                      "constexpr int K = TUNE_K, VEC = 4;      // two at once\n"
                      "constexpr int HALO = (K + VEC - 1) / VEC * VEC;\n"
                      "/* constexpr int GONE = 1; */\n"
                      "constexpr int PICK = K > 4 ? 1 : 2;    // not an integer expression here: skipped\n"
                      "constexpr int ring(int n) { return n; }\n")
    assert constants.read(source) == {"TUNE_K": 8, "K": 8, "VEC": 4, "HALO": 8}
    assert constants.need(source, "K", "HALO") == (8, 8)


def test_the_overlapped_tiles_redundancy_is_the_handouts_formula():
    """R(K, Tx, Ty) = 1 + (K-1)(Tx+Ty)/(Tx Ty) + 2(K-1)(2K-1)/(3 Tx Ty) (handout 8, Design 1)."""
    for k, tx, ty in ((2, 128, 64), (8, 128, 64), (8, 32, 32), (16, 64, 64)):
        formula = 1 + (k - 1) * (tx + ty) / (tx * ty) + 2 * (k - 1) * (2 * k - 1) / (3 * tx * ty)
        assert solver.redundancy(k, tx, ty) == pytest.approx(formula)
    assert [solver.ring_slots(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 4, 4, 8]


def test_svg_numbers_and_text_are_written_the_same_everywhere():
    assert [svg.num(v) for v in (3, 2.5, 2.25, -0.01, 0.04, 1e-9)] == ["3", "2.5", "2.2", "0", "0", "0"]
    c = svg.Canvas(100, 50, "a <title> & more")
    c.text(10, 20, "x < y & z")
    out = c.svg()
    assert "x &lt; y &amp; z" in out and "a &lt;title&gt; &amp; more" in out
    ET.fromstring(out)
