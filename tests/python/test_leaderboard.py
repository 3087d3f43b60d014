"""classes/leaderboard.py on the recorded H100 class: opt-in pseudonyms, correct labs, a board per GPU."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import DATA
from test_html import needs_jinja2
from stencil_grader.base.files import write_json
from stencil_grader.classes import classhtml, classtable, leaderboard, outdir

LABS = ["01-naive-5pt", "02-shared-tiling"]
HOSTILE = '<img src=x onerror=alert(1)>"\u202eevil'


def write_roster(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    columns = ["folder", "site", "site_id", "name", "email", leaderboard.COLUMN]
    with open(folder / "roster.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in columns})
    return folder / "roster.csv"


@pytest.fixture
def graded(tmp_path):
    """The recorded class: alice (a hostile pseudonym), carol, dave opted in; bob, erin, frank not on a board."""
    out = tmp_path / "grades"
    shutil.copytree(DATA / "html" / "class", out)
    subs = tmp_path / "class"
    write_roster(subs, [{"folder": "alice", "name": "Alice A", leaderboard.COLUMN: HOSTILE},
                        {"folder": "bob", "name": "Bob B", leaderboard.COLUMN: ""},
                        {"folder": "carol", "name": "Carol C", leaderboard.COLUMN: "  Blue Falcon "},
                        {"folder": "dave", "name": "Dave D", leaderboard.COLUMN: "dd"},
                        {"folder": "frank", "name": "Frank F", leaderboard.COLUMN: "ff"}])
    write_json(out / outdir.MANIFEST, {"submissions": str(subs), "layout": outdir.LAYOUT})
    return out, subs


def test_only_who_opted_in_and_only_correct_labs(graded):
    out, subs = graded
    names, notes = leaderboard.pseudonyms(classtable.class_roster(out)[0])
    assert notes == [] and set(names) == {"alice", "carol", "dave", "frank"}
    assert names["carol"] == "Blue Falcon" and "\u202e" not in names["alice"]
    table = outdir.read_reports(out, LABS)
    boards = leaderboard.boards(table, names, LABS)
    assert list(boards) == LABS
    (lab1,), (lab2,) = boards[LABS[0]], boards[LABS[1]]
    assert lab1.gpu == lab2.gpu == "NVIDIA H100 80GB HBM3"
    ratio = {s: table[s][LABS[0]]["performance"]["ratio"] for s in table}
    assert [r.student for r in lab1.rows] == ["alice", "carol", "dave"]          # bob, erin: not opted in; frank: incorrect
    assert [r.rank for r in lab1.rows] == [1, 2, 3] and lab1.rows[0].ratio == ratio["alice"]
    assert [r.ratio for r in lab1.rows] == sorted((r.ratio for r in lab1.rows), reverse=True)
    assert [r.student for r in lab2.rows] == ["alice", "carol"]                  # dave's lab 2 is incorrect


def test_gpu_models_are_ranked_apart(graded):
    out, _ = graded
    path = outdir.report_path(out, "carol", LABS[0])
    data = json.loads(path.read_text())
    data["gpu"]["device"]["name"] = data["gpu"]["assigned"]["name"] = "NVIDIA H200"
    path.write_text(json.dumps(data))
    names, _ = leaderboard.pseudonyms(classtable.class_roster(out)[0])
    boards = leaderboard.boards(outdir.read_reports(out, LABS), names, LABS)[LABS[0]]
    assert [(b.gpu, [r.student for r in b.rows]) for b in boards] == \
        [("NVIDIA H100 80GB HBM3", ["alice", "dave"]), ("NVIDIA H200", ["carol"])]
    assert [r.rank for r in boards[1].rows] == [1]


@pytest.mark.parametrize("change", [
    {"verdict": "constraint"}, {"verdict": "forbidden"}, {"verdict": "implausible"}, {"verdict": "not_measured"},
    {"final": False}, {"performance": {"ratio": None}},
    {"launches": [{"name": "stream", "status": "fail", "message": "another stream"}]},
    {"static": [{"name": "no_div_rem", "status": "fail", "message": "div in a loop"}]}])
def test_a_flagged_or_unmeasured_lab_is_never_on_a_board(graded, change):
    out, _ = graded
    table = outdir.read_reports(out, LABS)
    report = table["alice"][LABS[0]]
    assert leaderboard.eligible(report)
    report.update(change)
    assert not leaderboard.eligible(report)
    names, _ = leaderboard.pseudonyms(classtable.class_roster(out)[0])
    (board,) = leaderboard.boards(table, names, LABS)[LABS[0]]
    assert "alice" not in [r.student for r in board.rows]


@needs_jinja2
def test_the_class_page_shows_pseudonyms_never_folders(graded):
    out, _ = graded
    page = classhtml.write_class_html(classtable.load(out, LABS)).read_text()
    section = re.search(r'<section id="leaderboard">.*?</section>', page, re.S).group(0)
    assert "Blue Falcon" in section and "&lt;img src=x onerror=alert(1)&gt;&quot;" in section
    assert "<img" not in page and "\u202e" not in section
    for folder in ("alice", "bob", "carol", "dave", "erin", "frank"):
        assert folder not in section.lower().replace("falcon", "")
    assert section.count("<tr><td>1</td>") == 2                      # one board per lab
    assert "4 student(s) opted in" in section


@needs_jinja2
def test_no_roster_column_no_leaderboard(graded):
    out, subs = graded
    (subs / "roster.csv").write_text("folder,site,site_id,name\nalice,canvas,1,Alice\n")
    assert 'id="leaderboard"' not in classhtml.write_class_html(classtable.load(out, LABS)).read_text()
    (subs / "roster.csv").unlink()
    assert leaderboard.pseudonyms(classtable.class_roster(out)[0]) == ({}, [])
    (subs / "roster.csv").write_text("folder,leaderboard\nalice,x\nalice,y\n")       # unreadable: nobody shown
    roster, why = classtable.class_roster(out)
    assert roster is None and "listed twice" in why and leaderboard.pseudonyms(roster) == ({}, [])


@needs_jinja2
def test_a_pseudonym_chosen_twice_is_said(graded):
    out, subs = graded
    write_roster(subs, [{"folder": "alice", leaderboard.COLUMN: "same"}, {"folder": "carol", leaderboard.COLUMN: "same"}])
    names, notes = leaderboard.pseudonyms(classtable.class_roster(out)[0])
    assert names == {"alice": "same", "carol": "same"} and "chosen by 2 students" in notes[0]
    page = classhtml.write_class_html(classtable.load(out, LABS)).read_text()
    assert "chosen by 2 students" in page


def test_gradescope_entries_follow_the_autograder_spec(graded):
    """results.json's `leaderboard` follows Gradescope's spec, for each opted-in (student, lab) alone."""
    out, _ = graded
    names, _ = leaderboard.pseudonyms(classtable.class_roster(out)[0])
    table = outdir.read_reports(out, LABS)
    entries = leaderboard.gradescope_entries(table, names)
    assert set(entries) == {("alice", LABS[0]), ("carol", LABS[0]), ("dave", LABS[0]), ("alice", LABS[1]),
                            ("carol", LABS[1])}
    json.dumps(entries[("alice", LABS[0])])
    for items in entries.values():
        assert [i["name"] for i in items] == ["ratio to copy bandwidth", "GB/s", "GPU"]
        for item in items:
            assert set(item) <= {"name", "value", "order"} and item.get("order", "desc") in ("asc", "desc")
            assert isinstance(item["value"], (int, float, str)) and not isinstance(item["value"], bool)
        assert items[-1]["value"] == "NVIDIA H100 80GB HBM3"
    ratio = table["carol"][LABS[1]]["performance"]["ratio"]
    assert entries[("carol", LABS[1])][0] == {"name": "ratio to copy bandwidth", "value": round(ratio, 4),
                                              "order": "desc"}


def test_the_class_files_write_the_entries_of_who_opted_in(graded):
    """class_files writes leaderboard entries for opted-in students only; none when nobody opted in."""
    from stencil_grader.classes import classfiles

    out, subs = graded
    classfiles.class_files(out, LABS)
    def board_of(student, lab):
        return json.loads(outdir.gradescope_path(out, lab, student).read_text()).get("leaderboard")
    assert board_of("alice", LABS[0])[0]["name"] == "ratio to copy bandwidth"
    assert board_of("carol", LABS[1])[-1] == {"name": "GPU", "value": "NVIDIA H100 80GB HBM3"}
    assert board_of("bob", LABS[0]) is None                                       # not opted in
    assert board_of("dave", LABS[1]) is None                                      # opted in, lab 2 incorrect
    write_roster(subs, [{"folder": "alice", leaderboard.COLUMN: ""}])
    classfiles.class_files(out, LABS)
    assert board_of("alice", LABS[0]) is None
