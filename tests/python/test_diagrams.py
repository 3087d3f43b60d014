"""The handouts' diagrams, drawn with matplotlib from the labs' constants (skipped without it)."""

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import KIT_ROOT
from stencil_grader import cli
from stencil_grader.base.cliargs import UsageError
from stencil_grader.instructor import diagrams, roofs
from stencil_grader.instructor.diagrams import constants, sketch, solver

try:
    import matplotlib  # noqa: F401
except ImportError:
    matplotlib = None
drawing = pytest.mark.skipif(matplotlib is None, reason="matplotlib is not installed (Debian: python3-matplotlib): "
                                                        "the diagrams are drawn with it")
DIAGRAM = {d.name: d for d in diagrams.DIAGRAMS}

#: Each picture and the constants it must show, read here from the sources by a pattern of this test's
#: own (`constexpr int NAME = DIGITS;`, `#define NAME DIGITS`), independent of constants.py and of the drawing code.
SHOWN = {
    "02-tile-halo": ("starter/02-shared-tiling", ("OUT_TILE_X", "BLOCK_Y", "ROWS_PER_THREAD")),
    "04-bytes-in-flight": ("starter/04-max-smem", ("THREADS", "VEC", "ROWS")),
    "03-periodic-wrap": ("reference/03-boundary-neat", ("VEC",)),
    "05-three-planes": ("starter/05-z-coarsening", ("PLANES_PER_BLOCK", "BLOCK_Y")),
    "06-register-window": ("reference/06-register-tiling", ("TUNE_AHEAD", "TUNE_OUT_ROWS")),
    "07-reduction-tree": ("starter/07-reduction-residual", ("RES_THREADS", "WARP")),
    "08-overlapped-tile": ("reference/tour/08-temporal-blocking/good_overlapped_tile", ("TX", "TY")),
    "08-pipeline-ring": ("reference/08-temporal-blocking", ("TUNE_K",)),
}


def literal(folder: str, name: str) -> int:
    text = (KIT_ROOT / folder / "kernel.cu").read_text()
    found = re.findall(rf"(?:constexpr\s+int\s+|,\s*){name}\s*=\s*(\d+)\s*[;,]", text) + \
        re.findall(rf"#define\s+{name}\s+(\d+)\b", text)
    assert found, f"{folder}/kernel.cu: no literal {name}"
    return int(found[0])


@drawing
@pytest.mark.parametrize("name", sorted(SHOWN))
def test_a_diagram_shows_the_numbers_of_its_labs_source(name):
    folder, names = SHOWN[name]
    alt, shown = sketch.labels(DIAGRAM[name].draw(KIT_ROOT).svg())
    words = set(re.findall(r"\d+", " ".join(shown)))
    for constant in names:
        assert str(literal(folder, constant)) in words, (constant, shown)
    assert str(literal(folder, names[0])) in re.findall(r"\d+", alt)


@drawing
def test_every_committed_diagram_is_what_the_code_draws():
    """Each committed picture and its alt text are what the code draws from today's constants."""
    problems = diagrams.differences()
    assert not problems, "run `make figures`:\n" + "\n".join(problems)


def test_every_lab_handout_shows_at_least_one_diagram():
    shown = {d.handout for d in diagrams.DIAGRAMS}
    labs = {p.name for p in (KIT_ROOT / "handouts").glob("0*.md")}
    assert labs and shown == labs


@drawing
@pytest.mark.parametrize("diagram", diagrams.DIAGRAMS, ids=lambda d: d.name)
def test_a_diagram_is_plain_readable_svg(diagram):
    """Valid SVG: titled, sized, text as text, no script or outside reference, no label overlapping or cut."""
    drawn = diagram.draw(KIT_ROOT)
    fig, ax = drawn.fig, drawn.ax
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_text()]
    for i, (text, a) in enumerate(boxes):
        assert frame.x0 <= a.x0 and a.x1 <= frame.x1 + 1 and frame.y0 <= a.y0 and a.y1 <= frame.y1, text
        for other, b in boxes[i + 1:]:
            assert not a.overlaps(b), (text, other)
    text = drawn.svg()
    root = ET.fromstring(text)
    assert root.tag == sketch.SVG + "svg" and root.find(sketch.SVG + "title").text == drawn.alt
    assert len(drawn.alt) > 80 and "]" not in drawn.alt              # it is Markdown alt text too
    assert float(root.get("width").removesuffix("pt")) / sketch.PT <= 880
    assert len(list(root.iter(sketch.SVG + "text"))) >= 5
    assert "<script" not in text and "@import" not in text
    assert all(v.startswith("#") for e in root.iter() for k, v in e.attrib.items() if k.endswith("href"))
    assert f"![{drawn.alt}](img/{diagram.name}.svg)" in (KIT_ROOT / "handouts" / diagram.handout).read_text()


DRAW_ALL = ("import json, sys; from pathlib import Path; from stencil_grader.instructor import diagrams; "
            "print(json.dumps({d.name: svg for d, (_, svg) in diagrams.render(Path(sys.argv[1])).items()}))")


@drawing
def test_drawing_is_the_same_in_every_process():
    """Fresh interpreters with other hash seeds draw the same bytes."""
    env = dict(os.environ, PYTHONPATH=str(KIT_ROOT / "grader"))
    drawn = [json.loads(subprocess.run([sys.executable, "-c", DRAW_ALL, str(KIT_ROOT)], capture_output=True,
                                       text=True, check=True, timeout=120,
                                       env=dict(env, PYTHONHASHSEED=seed)).stdout)
             for seed in ("1", "2")]
    here = {d.name: svg for d, (_, svg) in diagrams.render(KIT_ROOT).items()}
    assert drawn[0] == here and drawn[1] == here


def copy_sources(tmp_path):
    """A kit of the lab sources the diagrams read (starter/ and reference/), to change constants in."""
    kit = tmp_path / "kit"
    for part in ("starter", "reference", "handouts"):
        shutil.copytree(KIT_ROOT / part, kit / part)
    return kit


@drawing
def test_a_picture_follows_the_starters_constants(tmp_path):
    """Lab 2's picture and alt text follow the starter's tile constants."""
    kit = copy_sources(tmp_path)
    kernel = kit / "starter" / "02-shared-tiling" / "kernel.cu"
    kernel.write_text(kernel.read_text().replace("constexpr int OUT_TILE_X = 64;", "constexpr int OUT_TILE_X = 32;"))
    drawn = DIAGRAM["02-tile-halo"].draw(kit)
    assert drawn.alt.startswith("The 34 x 34 input tile of a 32 x 32 output tile")
    assert "IN_TILE_X = 34 columns" in sketch.labels(drawn.svg())[1]
    assert [p for p in diagrams.differences(kit) if "02-tile-halo" in p] == [
        "handouts/img/02-tile-halo.svg: differs from what the code draws from the labs' constants (make figures)",
        "handouts/02-shared-tiling.md: the alt text of img/02-tile-halo.svg differs from the picture's "
        "(make figures)"]
    assert kit / "handouts" / "img" / "02-tile-halo.svg" in diagrams.write(kit)
    assert diagrams.differences(kit) == []
    assert f"![{drawn.alt}](img/02-tile-halo.svg)" in (kit / "handouts" / "02-shared-tiling.md").read_text()


def test_without_matplotlib_the_command_names_the_package_and_exits_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # import matplotlib -> ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(UsageError, match="python3-matplotlib"):
        diagrams.render()
    assert cli.main(["figures", "--check"]) == 2
    assert "python3-matplotlib" in capsys.readouterr().err


def test_a_missing_constant_is_named_with_its_file(tmp_path):
    kit = copy_sources(tmp_path)
    kernel = kit / "starter" / "05-z-coarsening" / "kernel.cu"
    kernel.write_text(re.sub(r"constexpr int PLANES_PER_BLOCK = [^;]*;", "", kernel.read_text()))
    with pytest.raises(constants.DiagramError, match="05-z-coarsening/kernel.cu: no integer constant PLANES_PER_BLOCK"):
        DIAGRAM["05-three-planes"].draw(kit)


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


def test_the_overlapped_tiles_redundancy_counts_every_sweeps_cells():
    """Sweep s of K computes (Tx + 2(K-s)) x (Ty + 2(K-s)) cells for Tx Ty useful ones (handout 8, Design 1)."""
    for k, tx, ty in ((2, 128, 64), (8, 128, 64), (8, 32, 32), (16, 64, 64)):
        updates = sum((tx + 2 * (k - s)) * (ty + 2 * (k - s)) for s in range(1, k + 1))
        assert roofs.tile_redundancy(k, tx, ty) == pytest.approx(updates / (k * tx * ty))
    assert [solver.ring_slots(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 4, 4, 8]
