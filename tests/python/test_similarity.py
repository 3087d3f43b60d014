"""classes/similarity.py on a made-up class of the kit's own code: copies flagged, independent solutions not."""

from __future__ import annotations

import csv
import itertools
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import FAKE_LAB, GOOD_KERNEL, KIT_ROOT, SIMILARITY_DEPS, grade_class, put
from stencil_grader.base.files import write_json
from stencil_grader import cli
from stencil_grader.classes import outdir, similarity, submissions

sys.path.insert(0, str(KIT_ROOT / "tests" / "submissions"))
import check_verdicts  # noqa: E402  (needs the path above)

LAB = "02-shared-tiling"
HOSTILE = '=bob "the copier" <img src=x onerror=alert(1)> $(touch PWNED)'


@pytest.fixture(scope="module")
def cd():
    try:
        return similarity.require()
    except Exception as err:
        pytest.skip(f"copydetect is not installed ({err}); tests/install-deps.sh installs it into "
                    f"{SIMILARITY_DEPS} (needs PyPI)")


# ---------------------------------------------------------------- made-up copies

def renamed(text: str) -> str:
    """A disguised copy: declared names renamed (the API's kept), comments replaced, indentation changed."""
    from pygments import lexers, token
    keep = {"x", "y", "z", "c0", "xm", "xp", "ym", "yp", "zm", "zp", "constexpr", "static_assert",
            "stencil2d_sweep", "stencil2d_run", "stencil3d_sweep", "stencil2d_periodic_sweep", "jacobi_sweep",
            "residual_norm", "stencil2d_coeffs", "stencil3d_coeffs", "cudaStream_t", "size_t", "dim3"}
    names: dict[str, str] = {}
    out = ["// my own solution, written from scratch\n"]
    for kind, value in lexers.get_lexer_by_name("cuda").get_tokens(text):
        if kind in token.Comment and kind not in token.Comment.Preproc and kind is not token.Comment.PreprocFile:
            out.append("/* step */" if "\n" not in value else "\n")
        elif kind in (token.Name, token.Name.Function, token.Name.Class) and value not in keep:
            out.append(names.setdefault(value, f"my_{len(names)}_{value[::-1].lower()}"))
        else:
            out.append(value.replace("    ", "\t"))
    return "".join(out)


def reordered(text: str) -> str:
    """The file's top-level definitions (each ending with a `}` in column 0) in reverse order."""
    chunks, current = [], []
    for line in text.split("\n"):
        current.append(line)
        if line.startswith("}"):
            chunks.append("\n".join(current))
            current = []
    assert len(chunks) >= 2, "nothing to reorder"
    return "\n".join(chunks[::-1]) + "\n" + "\n".join(current)


def independent_solutions(lab: str) -> dict[str, str]:
    """The lab's reference and its good_* and book_* submissions, each written apart."""
    found = {f"reference/{lab}": (KIT_ROOT / "reference" / lab / "kernel.cu").read_text()}
    for entry in check_verdicts.collect(lab=lab):
        if entry.name.startswith(("good_", "book_")):
            found[entry.id] = check_verdicts.source_bytes(entry.path).decode()
    return found


@pytest.fixture
def made_up_class(tmp_path) -> Path:
    """Lab 2: alice, two renamed copies of her, dave's reference, two starters; lab 1: ann, ben's reference."""
    subs = tmp_path / "class"
    own = check_verdicts.source_bytes(KIT_ROOT / "tests" / "submissions" / LAB / "good_input_mapped").decode()
    starter = (KIT_ROOT / "starter" / LAB / "kernel.cu").read_text()
    put(subs, "alice", LAB, own)
    put(subs, HOSTILE, LAB, renamed(own))
    put(subs, "carol", LAB, reordered(renamed(own)))
    put(subs, "dave", LAB, (KIT_ROOT / "reference" / LAB / "kernel.cu").read_text())
    put(subs, "erin", LAB, starter)
    put(subs, "frank", LAB, starter)
    lab1 = "01-naive-5pt"
    put(subs, "ann", lab1, check_verdicts.source_bytes(KIT_ROOT / "tests" / "submissions" / lab1
                                                       / "good_row_per_thread").decode())
    put(subs, "ben", lab1, renamed((KIT_ROOT / "reference" / lab1 / "kernel.cu").read_text()))
    return subs


def pair_scores(result) -> dict[frozenset, float]:
    return {frozenset((p.a, p.b)): p.score for p in result.pairs}


# ---------------------------------------------------------------- the class

def test_the_copies_are_flagged_and_the_independent_solutions_are_not(cd, made_up_class, tmp_path):
    out = tmp_path / "out"
    lines = []
    results = {r.lab: r for r in similarity.run(made_up_class, out, [LAB, "01-naive-5pt"], say=lines.append)}
    lab2 = results[LAB]
    flagged = {frozenset((p.a, p.b)) for p in lab2.flagged}
    ref = f"reference/{LAB}/kernel.cu"
    assert flagged == {frozenset(("alice", HOSTILE)), frozenset(("alice", "carol")), frozenset((HOSTILE, "carol")),
                       frozenset(("dave", ref))}, sorted(map(sorted, flagged))
    scores = pair_scores(lab2)
    for copy in ("alice", "carol"):
        assert scores[frozenset((HOSTILE, copy))] >= 0.9
    for mine in ("alice", HOSTILE, "carol"):                   # independent of the reference: low
        assert scores[frozenset((mine, "dave"))] < similarity.FLAG - 0.3
        assert scores[frozenset((mine, ref))] < similarity.FLAG - 0.3
    assert scores[frozenset(("erin", "frank"))] == 0.0         # the shared skeleton counts for nothing
    assert {p.b_kind for p in lab2.pairs} == {"student", "kit"}
    assert not any(p.a_kind != "student" for p in lab2.pairs)  # the kit's files are not compared with each other
    assert [frozenset((p.a, p.b)) for p in results["01-naive-5pt"].flagged] == \
        [frozenset(("ben", "reference/01-naive-5pt/kernel.cu"))]

    folder = out / "similarity" / LAB
    assert sorted(p.name for p in folder.iterdir()) == ["pair-1.html", "pair-2.html", "pair-3.html", "pair-4.html",
                                                        "pairs.csv", "pairs.txt", "similarity.json"]
    rows = list(csv.DictReader(open(folder / "pairs.csv", newline="")))
    assert len(rows) == len(lab2.pairs) == 6 * 5 // 2 + 6 * 1
    assert [float(r["score"]) for r in rows] == sorted((float(r["score"]) for r in rows), reverse=True)
    assert {r["page"] for r in rows if r["flagged"] == "yes"} == {f"pair-{i}.html" for i in range(1, 5)}
    hostile = "'" + HOSTILE                    # by the csv module, after a "'": no spreadsheet formula
    assert any(r["a"] == hostile or r["b"] == hostile for r in rows)
    assert not any(r[k][:1] in submissions.FORMULA_START for r in rows for k in ("a", "b"))
    text = (folder / "pairs.txt").read_text()
    assert "4 pair(s) flagged" in text and "never a grade" in text and "flagged at 0.80" in text
    data = json.loads((folder / "similarity.json").read_text())
    assert data["threshold"] == similarity.FLAG and data["noise"] == similarity.NOISE and len(data["flagged"]) == 4
    assert data["highest"]["erin"]["score"] == 0.0 and data["highest"]["dave"]["other_kind"] == "kit"
    assert any("4 flagged" in line for line in lines)
    assert not any(p.suffix == ".json" for p in out.rglob("*") if "students" in p.parts)   # no grade written


def test_the_thresholds_hold_on_every_lab(cd):
    """On every lab, copies score at least FLAG + 0.10 and independent solutions at most FLAG - 0.05."""
    copies, independent = [], []
    for lab_dir in sorted((KIT_ROOT / "labs").glob("*/lab.json")):
        lab = lab_dir.parent.name
        boilerplate = set(similarity.fingerprint(cd, (KIT_ROOT / "starter" / lab / "kernel.cu").read_text()).hashes)
        solutions = independent_solutions(lab)
        prints = {name: similarity.fingerprint(cd, text, boilerplate) for name, text in solutions.items()}
        for a, b in itertools.combinations(solutions, 2):
            _, (sa, sb), _ = cd.compare_files(prints[a], prints[b])
            independent.append((max(sa, sb), a, b))
        for name, text in solutions.items():
            for how, copy in (("renamed", renamed(text)), ("reordered", reordered(renamed(text)))):
                _, (sa, sb), _ = cd.compare_files(prints[name], similarity.fingerprint(cd, copy, boilerplate))
                copies.append((max(sa, sb), name, how))
    worst_copy, worst_independent = min(copies), max(independent)
    print(f"\nlowest copy {worst_copy}; highest independent pair {worst_independent} "
          f"({len(copies)} copies, {len(independent)} independent pairs)")
    assert len(independent) >= 8 and len(copies) >= 20
    assert worst_copy[0] >= similarity.FLAG + 0.10, f"a copy scored only {worst_copy}"
    assert worst_independent[0] <= similarity.FLAG - 0.05, f"independent solutions scored {worst_independent}"


def test_repeated_code_still_counts_with_a_boilerplate(cd):
    """A file's repeated code still counts once the boilerplate is removed (copydetect's filter drops it)."""
    text = (KIT_ROOT / "reference" / "01-naive-5pt" / "kernel.cu").read_text()
    doubled = text + "\n" + text
    unrelated = set(similarity.fingerprint(cd, (KIT_ROOT / "starter" / "07-reduction-residual"
                                                / "kernel.cu").read_text()).hashes)
    alone = similarity.fingerprint(cd, doubled)
    kept = similarity.fingerprint(cd, doubled, unrelated)
    shared = alone.hashes & unrelated
    assert kept.hashes == alone.hashes - shared
    assert sum(len(v) for v in kept.hash_idx.values()) == sum(len(v) for h, v in alone.hash_idx.items()
                                                              if h not in shared)


def test_struct_names_map_back_onto_themselves(cd):
    """Every struct of the references maps back onto its own name (copydetect misplaces it)."""
    from pygments import lexers, token
    checked = 0
    for path in sorted((KIT_ROOT / "reference").glob("*/kernel.cu")):
        text = path.read_text()
        classes = [v for k, v in lexers.get_lexer_by_name("cuda").get_tokens(text) if k in token.Name.Class]
        fp = similarity.fingerprint(cd, text)
        rows = [(int(j), int(v)) for j, v in fp.offsets[1:]]
        mapped = []
        for r, (j, v) in enumerate(rows):
            if fp.filtered_code[j:j + 1] == "O" and (r == 0 or rows[r - 1][0] < j):
                mapped.append(re.match(r"\w+", text[j + v:]).group(0))
        assert mapped == classes, path
        checked += len(classes)
    assert checked >= 5


def test_against_a_folder_of_earlier_terms_and_public_solutions(cd, made_up_class, tmp_path):
    against = tmp_path / "against"
    own = (made_up_class / "alice" / LAB / "kernel.cu").read_text()
    put(against / "2025-fall", "zoe (42)", LAB, own)                     # alice's file, handed in last year
    (against / "public" / LAB).mkdir(parents=True)
    (against / "public" / LAB / "blog post.cu").write_text(renamed(own))
    (against / "public" / "01-naive-5pt").mkdir(parents=True)
    (against / "public" / "01-naive-5pt" / "other.cu").write_text(own)   # another lab's folder: not this lab
    result = similarity.run(made_up_class, tmp_path / "out", [LAB], against)[0]
    found = {(p.a, p.b) for p in result.flagged if p.b_kind == "against"}
    assert ("alice", f"2025-fall/zoe (42)/{LAB}/kernel.cu") in found
    assert ("alice", f"public/{LAB}/blog post.cu") in found
    assert not any("01-naive-5pt" in p.b for p in result.pairs)
    assert not any(p.a_kind != "student" for p in result.pairs)


def test_a_second_run_leaves_no_stale_page_and_pages_are_capped(cd, made_up_class, tmp_path, monkeypatch):
    out = tmp_path / "out"
    similarity.run(made_up_class, out, [LAB])
    assert len(list((out / "similarity" / LAB).glob("pair-*.html"))) == 4
    similarity.run(made_up_class, out, [LAB], threshold=0.99)
    assert sorted(p.name for p in (out / "similarity" / LAB).glob("pair-*.html")) == ["pair-1.html", "pair-2.html"]
    monkeypatch.setattr(similarity, "MAX_PAGES", 3)                 # a class where many copied
    result = similarity.run(made_up_class, out, [LAB])[0]
    assert len(result.flagged) == 4 and [p.page for p in result.flagged][3] == ""
    assert sorted(p.name for p in (out / "similarity" / LAB).glob("pair-*.html")) == \
        ["pair-1.html", "pair-2.html", "pair-3.html"]
    assert "pages written for the 3 highest" in (out / "similarity" / LAB / "pairs.txt").read_text()


# ---------------------------------------------------------------- the pages

TROJAN = ('/* </pre><script>alert("x")</script> */\n'
          '__global__ void k(float *a) { if (a[0] > 0) { /*\u202e } \u2066 if (admin) { \u2069 \u2066*/ a[0] = 1; } }\n')


def test_the_pair_page_escapes_code_and_names(cd, made_up_class, tmp_path):
    for student in ("alice", HOSTILE):
        path = made_up_class / student / LAB / "kernel.cu"
        path.write_text(path.read_text() + TROJAN)
    result = similarity.run(made_up_class, tmp_path / "out", [LAB])[0]
    pair = next(p for p in result.flagged if {p.a, p.b} == {"alice", HOSTILE})
    page = (tmp_path / "out" / "similarity" / LAB / pair.page).read_text()
    assert "<script" not in page and "<img" not in page and HOSTILE not in page and "</pre><script>" not in page
    assert "&lt;script&gt;" in page and "\u202e" not in page and "\u2066" not in page
    assert page.count('<span class="ctl">\\u202e</span>') == 2
    assert "<link" not in page and not re.search(r"<[a-z]+[^<>]*\ssrc=", page) and "<mark>" in page
    for ident in ("pair", "sides", "side-a", "side-b"):
        assert f'id="{ident}"' in page


def test_highlighted_code_is_escaped_marked_and_shows_controls(cd):
    import numpy
    text = "ab\ncd <x>\u202e\n\nef"
    shown = similarity.highlighted(text, numpy.array([[1, 8], [4, 20]]))
    assert shown == 'a<mark>b\nc</mark>d &lt;x<mark>&gt;<span class="ctl">\\u202e</span>\n\nef</mark>'
    assert similarity.highlighted("<b>", None) == "&lt;b&gt;"          # nothing matched: escaped all the same


def test_the_pages_render_in_headless_chromium(cd, made_up_class, tmp_path):
    from test_html import assert_not_blank, chromium, run_chromium
    if chromium() is None:
        pytest.skip("chromium is not installed (tests/install-deps.sh installs Debian's chromium when run as root)")
    out = tmp_path / "out"
    similarity.run(made_up_class, out, [LAB])
    page = out / "similarity" / LAB / "pair-2.html"
    shot = page.with_suffix(".png")
    run_chromium([f"--screenshot={shot}", "--window-size=1400,1200"], page)
    assert_not_blank(shot)
    dom = run_chromium(["--dump-dom"], page)
    assert dom.returncode == 0 and 'id="side-b"' in dom.stdout and "<mark>" in dom.stdout


# ---------------------------------------------------------------- class.html and grade.py

def recorded_class(tmp_path: Path, made_up: Path) -> Path:
    """The recorded class of test_html.py (alice ... frank), made the output folder of `made_up`."""
    out = tmp_path / "grades"
    shutil.copytree(KIT_ROOT / "tests" / "python" / "data" / "html" / "class", out)
    write_json(out / outdir.MANIFEST, {"submissions": str(made_up.resolve()), "layout": outdir.LAYOUT})
    return out


def test_the_class_page_has_a_similarity_column(cd, made_up_class, tmp_path, capsys):
    out = recorded_class(tmp_path, made_up_class)
    assert cli.main(["similarity", str(made_up_class), "--out", str(out), "--lab", LAB]) == 0
    said = capsys.readouterr().out
    assert "class page:" in said and "4 flagged" in said
    page = (out / "class.html").read_text()
    assert "<th>similarity</th>" in page
    alice = re.search(r'<tr><td><a href="students/alice/index.html">.*?</tr>', page).group(0)
    assert len(re.findall(rf'href="similarity/{LAB}/pair-\d\.html">{LAB} (0\.9\d|1\.00)</a> with ', alice)) == 2
    assert "&lt;img src=x" in alice and "<img" not in page and "<script" not in page
    erin = re.search(r'<tr><td><a href="students/erin/index.html">.*?</tr>', page).group(0)
    assert "at most 0.00" in erin
    for href in re.findall(r'href="([^"]+)"', page):
        assert (out / href.replace("%3C", "<")).exists(), href
    before = {p: p.read_bytes() for p in (out / "students").rglob("*.json")}
    assert before and all(json.loads(b)["verdict"] for b in before.values())   # grades untouched:
    assert {p: p.read_bytes() for p in (out / "students").rglob("*.json")} == before


def test_without_copydetect_the_command_says_how_to_install_it(made_up_class, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "copydetect", None)          # import copydetect raises ImportError
    out = tmp_path / "out"
    assert cli.main(["similarity", str(made_up_class), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "python3 -m pip install copydetect" in err
    assert not out.exists()
    assert cli.main(["class", str(made_up_class), "--out", str(out), "--similarity"]) == 2
    assert "pip install copydetect" in capsys.readouterr().err and not out.exists()
    assert cli.main(["class", str(made_up_class), "--out", str(out), "--against", str(tmp_path)]) == 2
    assert "--against goes with --similarity" in capsys.readouterr().err


def test_refusals(cd, made_up_class, tmp_path, capsys):
    out = tmp_path / "out"
    for argv, said in ((["--lab", "99-nope"], "unknown lab"), (["--against", str(tmp_path / "none")], "no such folder"),
                       (["--threshold", "1.5"], "give a score in (0, 1]")):
        assert cli.main(["similarity", str(made_up_class), "--out", str(out)] + argv) == 2
        assert said in capsys.readouterr().err and not out.exists()
    other = tmp_path / "other"
    put(other, "yann", LAB, "x")
    similarity.run(other, out, [LAB])
    assert cli.main(["similarity", str(made_up_class), "--out", str(out)]) == 2
    assert "holds the results of another class" in capsys.readouterr().err


def test_class_grading_with_similarity_changes_no_grade(cd, fake_kit, tmp_path):
    """`grade.py class --similarity` writes the same grades; the class page and summary name the pairs."""
    subs = fake_kit.root / "submissions"
    long = GOOD_KERNEL + "".join(f"__device__ float f{i}(float a) {{ return a * {i}.5f + {i}; }}\n" for i in range(12))
    for student, text in (("ann", long), ("bob", renamed(long)), ("cid", "__global__ void k(float *o, int n) { for (int i = 0; i < n; i += 2) o[i] = 2.0f * i; }\n"
                                             "// RATIO=0.5\n")):
        put(subs, student, FAKE_LAB, text)
    plain = grade_class(subs, tmp_path / "plain", fake_kit)
    with_similarity = grade_class(subs, tmp_path / "with", fake_kit, similarity=True)
    assert [(g.student, g.verdict, g.points) for g in plain.gradings] == \
        [(g.student, g.verdict, g.points) for g in with_similarity.gradings]
    assert (tmp_path / "plain" / "class.csv").read_text() == (tmp_path / "with" / "class.csv").read_text()
    assert any(f"similarity of {FAKE_LAB}: 1 pair(s) flagged" in line for line in with_similarity.summary)
    assert any(f"no starter file for {FAKE_LAB}" in line
               for line in (tmp_path / "with" / "similarity" / FAKE_LAB / "pairs.txt").read_text().splitlines())
    page = (tmp_path / "with" / "class.html").read_text()
    assert "<th>similarity</th>" in page and "<th>similarity</th>" not in (tmp_path / "plain" / "class.html").read_text()
    svg = re.search(r'<svg id="ratios-.*?</svg>', page, re.S)
    assert svg is not None, "the class page has no chart of the bandwidth ratios"
    ET.fromstring(svg.group(0))
