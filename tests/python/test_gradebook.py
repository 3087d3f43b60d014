"""The course sites' gradebooks (classes/classfiles.py, importers/<site>.py): a class imported from each site's export
(grade.py import), graded, and the files that carry its grades back, read as each site reads them.

  Canvas      app/models/gradebook_importer.rb (canvas-lms): a header "Student", "ID", "SIS User ID",
              "SIS Login ID", "Section", then the assignments; a "Points Possible" row; rows matched by
              the ID column (the user id of the export's file names); a blank cell changes nothing
  Moodle      mod/assign/feedback/offline/importgradeslib.php: the columns "Identifier" ("Participant
              <id>": the export's participant id), "Grade", "Last modified (grade)"; a blank grade is
              skipped
  Gradescope  https://gradescope-autograders.readthedocs.io/en/latest/specs/: one results.json per
              lab (one assignment per lab), tests with name, score, max_score, output, visibility

A bonus lab (lab.json "bonus": true) is extra credit: 0 points possible in Canvas, never a 0 for a
student who did not submit it; what is no grade (not_measured) is never a 0 anywhere.
"""

import csv
import datetime
import json
import os
import shutil
import subprocess
import types
import zipfile
from unittest.mock import ANY

import pytest

from conftest import FAKE_LAB, GOOD_KERNEL, grade_class
from stencil_grader import cli
from stencil_grader.classes import gsautograder, importers, outdir, plan
from stencil_grader.classes.importers import common, roster
from test_import import NEEDS_YAML, make_zip

BONUS = "08-fake-bonus"
NOT_A_GRADE = GOOD_KERNEL + "// NO_GPU\n"


def bonus_lab(fake_kit):
    """A second fake lab, lab.json saying "bonus": true."""
    target = fake_kit.root / "labs" / BONUS
    shutil.copytree(fake_kit.lab_dir, target)
    data = json.loads((target / "lab.json").read_text())
    data.update(lab=BONUS, number=8, title="Fake bonus lab", bonus=True)
    (target / "lab.json").write_text(json.dumps(data, indent=2))


def imported(fake_kit, tmp_path, site, exports):
    """The class folder made by `grade.py import` of each (lab, zip members) export."""
    into = tmp_path / "class"
    for i, (lab, members) in enumerate(exports):
        export = make_zip(tmp_path / f"{site}-{i}.zip", {k: v.encode() if isinstance(v, str) else v
                                                          for k, v in members.items()})
        result = importers.import_export(site, export, lab, into, kit_root=fake_kit.root, say=lambda line: None)
        assert result.exit_status == 0
    return into


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_canvas_gradebook_import_csv(fake_kit, tmp_path):
    bonus_lab(fake_kit)
    subs = imported(fake_kit, tmp_path, "canvas", [
        (FAKE_LAB, {"garcíajosé_1001_5001_kernel.cu": GOOD_KERNEL,
                    "smithjohn_1003_5003_kernel.cu": GOOD_KERNEL + "// WRONG\n",
                    "nogpu_1005_5005_kernel.cu": NOT_A_GRADE,
                    "anon_x1y2z_5015_kernel.cu": GOOD_KERNEL}),
        (BONUS, {"garcíajosé_1001_6001_kernel.cu": GOOD_KERNEL})])
    out = tmp_path / "out"
    result = grade_class(subs, out, fake_kit)
    rows = read(out / "gradebook" / "canvas.csv")
    # Canvas's importer: row 0 the header (Student, ID, SIS User ID, SIS Login ID, Section), then
    # "Points Possible"; the bonus lab is worth 0 points: what Canvas adds on top of the total
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", FAKE_LAB, BONUS]
    assert "Student" in rows[0][0] and "ID" in rows[0][1] and "Section" in rows[0][4]
    assert rows[1] == ["Points Possible", "", "", "", "", "100", "0"]
    by_id = {r[1]: r for r in rows[2:]}
    assert set(by_id) == {"1001", "1003", "1005"}                  # the anonymous one cannot be matched
    assert by_id["1001"][5:] == ["100.00", "100.00"] and by_id["1001"][0] == "garcíajosé"
    assert by_id["1003"][5:] == ["40.00", ""]                     # bonus never submitted: blank, never 0
    assert by_id["1005"][5:] == ["", ""]                          # not measured: blank (no change), never 0
    notes = "\n".join(result.summary)
    assert "canvas.csv leaves out 1 anonymous submission(s) (anonymous (anon_x1y2z))" in notes
    assert f"course-site gradebooks: {out / 'gradebook'}/ (canvas.csv)" in notes
    # --missing-as-zero: a required lab never submitted is 0; a bonus lab still is not
    (subs / "smithjohn (1003)" / FAKE_LAB / "kernel.cu").unlink()
    grade_class(subs, out, fake_kit, missing_as_zero=True, regrade=True)
    by_id = {r[1]: r for r in read(out / "gradebook" / "canvas.csv")[2:]}
    assert by_id["1003"][5:] == ["0", ""] and by_id["1005"][5:] == ["", ""]
    # the Gradescope files: one per lab and student with a grade (the bonus lab says it is one)
    garcia = json.loads(outdir.gradescope_path(out, BONUS, "garcíajosé (1001)").read_text())
    assert garcia["extra_data"]["bonus"] is True and garcia["score"] == 100
    assert not outdir.gradescope_path(out, FAKE_LAB, "nogpu (1005)").exists()
    assert not outdir.gradescope_path(out, BONUS, "smithjohn (1003)").exists()


def test_a_new_course_site_is_one_module_and_its_name(fake_kit, tmp_path, monkeypatch):
    """A made-up site, "Slate": its export flat "<id>_<file>" files, its gradebook one CSV of ids and
    cells.  The module below and its entry in importers.SITES are all it takes: `grade.py import
    --from slate` is a choice, the import does the rest (kernel.cu chosen, near misses named, the
    roster), and the class files write its gradebook."""
    def parse(export, groups):
        parsed = common.Parsed()
        for e in export.entries:
            site_id, _, file = e.path.partition("_")
            parsed.add(roster.Student("slate", site_id, f"Student {site_id}"), None, file, e)
        return parsed

    def gradebook(book):
        return {"slate.csv": common.csv_text([["id"] + book.labs] + [
            [row["site_id"]] + [book.cell(folder, row, lab) for lab in book.labs] for folder, row in book.rows])}, []

    monkeypatch.setitem(importers.SITES, "slate", types.SimpleNamespace(NAME="slate", parse=parse, gradebook=gradebook))
    assert cli.build_parser().parse_args(["import", "--from", "slate", "x.zip", "--lab", FAKE_LAB,
                                          "--into", "class"]).site == "slate"
    export = make_zip(tmp_path / "slate.zip", {"7_kernel.cu": GOOD_KERNEL.encode(), "8_Kernel.cu": b"//\n",
                                              "9_kernel.cu": (GOOD_KERNEL + "// WRONG\n").encode()})
    lines = []
    result = importers.import_export("slate", export, FAKE_LAB, tmp_path / "class", kit_root=fake_kit.root,
                                     say=lines.append)
    assert result.exit_status == 1 and "no kernel.cu; found 8_Kernel.cu" in "\n".join(lines)
    grade_class(tmp_path / "class", tmp_path / "out", fake_kit)
    assert read(tmp_path / "out" / "gradebook" / "slate.csv") == [      # a near miss: blank, never 0
        ["id", FAKE_LAB], ["7", "100.00"], ["8", ""], ["9", "40.00"]]


def test_moodle_grading_worksheets(fake_kit, tmp_path):
    subs = imported(fake_kit, tmp_path, "moodle", [(FAKE_LAB, {
        "=HYPERLINK(x) Evil_4701_assignsubmission_file/kernel.cu": GOOD_KERNEL,
        "Ann Lee_4702_assignsubmission_file/kernel.cu": GOOD_KERNEL + "// WRONG\n",
        "Bo Nogpu_4703_assignsubmission_file/kernel.cu": NOT_A_GRADE})])
    out = tmp_path / "out"
    grade_class(subs, out, fake_kit)
    rows = read(out / "gradebook" / f"moodle-{FAKE_LAB}.csv")
    head = rows[0]
    # what Moodle's importer looks for, by heading; the participant id after "Participant "
    assert {"Identifier", "Grade", "Last modified (grade)"} <= set(head)
    by_id = {r[head.index("Identifier")]: dict(zip(head, r)) for r in rows[1:]}
    assert set(by_id) == {"Participant 4701", "Participant 4702", "Participant 4703"}
    assert by_id["Participant 4702"]["Grade"] == "40.00" and by_id["Participant 4702"]["Maximum Grade"] == "100"
    assert by_id["Participant 4703"]["Grade"] == ""                 # not measured: skipped by Moodle, never 0
    assert by_id["Participant 4701"]["Full name"].startswith("'=")  # no formula for a spreadsheet
    graded_at = by_id["Participant 4702"]["Last modified (grade)"]
    assert datetime.datetime.fromisoformat(graded_at).tzinfo is not None   # a time strtotime() reads


@NEEDS_YAML
def test_gradescope_files_and_index(fake_kit, tmp_path):
    metadata = ("submission_1:\n  :submitters:\n  - :name: Ann Lee\n    :sid: '111'\n    :email: ann@example.edu\n"
                "submission_2:\n  :submitters:\n  - :name: Bo Ng\n    :email: bo@example.edu\n")
    root = "assignment_1_export/"
    subs = imported(fake_kit, tmp_path, "gradescope", [(FAKE_LAB, {
        f"{root}submission_metadata.yml": metadata, f"{root}submission_1/kernel.cu": GOOD_KERNEL + "// WRONG\n",
        f"{root}submission_2/kernel.cu": NOT_A_GRADE})])
    out = tmp_path / "out"
    grade_class(subs, out, fake_kit)
    rows = read(out / "gradebook" / f"gradescope-{FAKE_LAB}.csv")
    assert rows[0] == ["folder", "site_id", "email", "name", "score", "results"]
    ann = next(r for r in rows if r[1] == "111")
    assert ann[2:5] == ["ann@example.edu", "Ann Lee", "40.00"]
    results = json.loads((out / ann[5]).read_text())
    assert ann[5] == f"gradescope/{FAKE_LAB}/Ann Lee (111)/results.json" and results["score"] == 40
    assert str(tmp_path) not in json.dumps(results)                # no instructor path reaches the student
    assert all(t["visibility"] == "visible" for t in results["tests"])
    bo = next(r for r in rows if r[2] == "bo@example.edu")
    assert bo[4:] == ["", ""]                                      # not measured: no score, no file
    # the student's pages name no path of the instructor's either
    page = (outdir.student_dir(out, "Ann Lee (111)") / f"{FAKE_LAB}.html").read_text()
    assert str(tmp_path) not in page and "cd labs/01-fake-5pt &amp;&amp; make check SEED=777" in page


def test_no_roster_no_site_files(fake_kit, tmp_path):
    subs = tmp_path / "subs"
    (subs / "ann" / FAKE_LAB).mkdir(parents=True)
    (subs / "ann" / FAKE_LAB / "kernel.cu").write_text(GOOD_KERNEL)
    out = tmp_path / "out"
    result = grade_class(subs, out, fake_kit)
    assert not (out / "gradebook").exists() and outdir.gradescope_path(out, FAKE_LAB, "ann").is_file()
    assert any("no roster.csv in" in line and "grade.py import writes it" in line for line in result.summary)


@NEEDS_YAML
def test_gradescope_autograder_serves_each_submitter_their_grade(fake_kit, tmp_path, monkeypatch):
    """grade.py gradescope-autograder: the zip, unpacked as Gradescope does (/autograder/source,
    run_autograder run per submission, submission_metadata.json beside it), copies the submitter's
    results.json from the class grading, found by e-mail (any case) or SID, only to the very
    submission id that was graded (a resubmission: "not graded yet"); each member of a group gets
    the group's one grading; a submitter with no grade gets a failed run and no results file,
    never a 0."""
    metadata = ("submission_1:\n  :submitters:\n  - :name: \"=Ann Lee\"\n    :sid: '111'\n    :email: ann@example.edu\n"
                "submission_2:\n  :submitters:\n  - :name: Bo Ng\n    :email: bo@example.edu\n"
                "submission_3:\n  :submitters:\n  - :name: \"José `id` O'Neil\"\n    :sid: '333'\n    :email: cy@example.edu\n"
                "submission_4:\n  :submitters:\n  - :name: Di Pair\n    :sid: '444'\n    :email: di@example.edu\n"
                "  - :name: Ed Pair\n    :sid: '555'\n    :email: ed@example.edu\n")
    root = "assignment_1_export/"
    subs = imported(fake_kit, tmp_path, "gradescope", [(FAKE_LAB, {
        f"{root}submission_metadata.yml": metadata, f"{root}submission_1/kernel.cu": GOOD_KERNEL + "// WRONG\n",
        f"{root}submission_2/kernel.cu": NOT_A_GRADE, f"{root}submission_3/kernel.cu": GOOD_KERNEL,
        f"{root}submission_4/kernel.cu": GOOD_KERNEL + "// pair\n"})])
    out = tmp_path / "out"
    grade_class(subs, out, fake_kit)
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)
    assert cli.main(["gradescope-autograder", str(out), "--lab", FAKE_LAB]) == 0
    made = gsautograder.default_zip(out, FAKE_LAB)
    with zipfile.ZipFile(made) as archive:
        names = sorted(archive.namelist())
        assert names == ["grades/1.json", "grades/2.json", "grades/3.json", "index.json", "run_autograder",
                         "serve.py", "setup.sh"]
        assert all(archive.getinfo(n).external_attr >> 16 & 0o777 == 0o755
                   for n in ("run_autograder", "setup.sh", "serve.py"))
        container = tmp_path / "autograder"
        archive.extractall(container / "source")
    for name in ("run_autograder", "setup.sh", "serve.py"):
        (container / "source" / name).chmod(0o755)

    def submit(*users, id=3):
        """One Gradescope run of submission `id`: (exit status, its output, the results.json it left or None)."""
        shutil.rmtree(container / "results", ignore_errors=True)
        (container / "submission_metadata.json").write_text(json.dumps({"id": id, "users": list(users)}))
        run = subprocess.run([str(container / "source" / "run_autograder")], capture_output=True, text=True,
                             env={**os.environ, "AUTOGRADER_ROOT": str(container)}, timeout=60)
        results = container / "results" / "results.json"
        return run.returncode, run.stdout + run.stderr, results.read_bytes() if results.exists() else None

    ann = outdir.gradescope_path(out, FAKE_LAB, "=Ann Lee (111)").read_bytes()
    cy = outdir.gradescope_path(out, FAKE_LAB, "José `id` O'Neil (333)").read_bytes()
    assert json.loads(ann)["score"] == 40 and json.loads(cy)["score"] == 100
    pair = outdir.gradescope_path(out, FAKE_LAB, "Di Pair, Ed Pair (group:4)").read_bytes()
    assert submit({"email": "Ann@Example.EDU", "sid": "", "name": "Ann"}, id=1) == (0, ANY, ann)
    assert submit({"email": "new@example.edu", "sid": "333"}) == (0, ANY, cy)          # by SID
    assert submit({"email": "zed@example.edu"}, {"email": "cy@example.edu"}) == (0, ANY, cy)
    assert submit({"email": "di@example.edu"}, id=4) == (0, ANY, pair)                 # a group: one grading,
    assert submit({"email": "ed@example.edu"}, id=4) == (0, ANY, pair)                 # served to each member
    status, said, results = submit({"email": "ann@example.edu"}, id=77)                # a resubmission
    assert (status, results) == (1, None) and "Not graded yet" in said and "id 77" in said and "(id 1," in said
    status, said, results = submit({"email": "bo@example.edu", "name": "Bo Ng"}, id=2)  # not measured: no file
    assert (status, results) == (1, None) and "bo@example.edu" in said and "no score was given" in said
    assert submit({"email": "nobody@example.edu"})[::2] == (1, None)
    # a kernel.cu changed in CLASS since the grading: its old grade is not served
    (subs / "José `id` O'Neil (333)" / FAKE_LAB / "kernel.cu").write_text(GOOD_KERNEL + "// resubmitted\n")
    built = gsautograder.build(out, FAKE_LAB)
    assert built.served == 2 and built.without_grade == ["Bo Ng (bo@example.edu)", "José `id` O'Neil (333)"]
    (subs / "José `id` O'Neil (333)" / FAKE_LAB / "kernel.cu").write_text(GOOD_KERNEL)

    # an existing --zip is replaced only with --force; the default one is rebuilt from OUT
    elsewhere = tmp_path / "mine.zip"
    elsewhere.write_text("the instructor's")
    with pytest.raises(gsautograder.GradescopeZipError, match="--force"):
        gsautograder.build(out, FAKE_LAB, elsewhere)
    assert elsewhere.read_text() == "the instructor's"
    assert gsautograder.build(out, FAKE_LAB, elsewhere, force=True).served == 3
    assert gsautograder.build(out, FAKE_LAB).served == 3
    # the gradebook CSV keeps its formula-like name as text
    row = next(r for r in read(out / "gradebook" / f"gradescope-{FAKE_LAB}.csv") if r[1] == "111")
    assert row[0] == "'=Ann Lee (111)" and row[3] == "'=Ann Lee"


def test_gradescope_autograder_refusals(fake_kit, tmp_path):
    """No class grading, no Gradescope roster, or an e-mail on two folders: refused, nothing written."""
    with pytest.raises(gsautograder.GradescopeZipError, match="holds no class grading"):
        gsautograder.build(tmp_path, FAKE_LAB)
    subs = fake_kit.root / "submissions"
    for student in ("ann", "bo"):
        (subs / student / FAKE_LAB).mkdir(parents=True)
        (subs / student / FAKE_LAB / "kernel.cu").write_text(GOOD_KERNEL)
    out = tmp_path / "out"
    grade_class(subs, out, fake_kit)
    with pytest.raises(gsautograder.GradescopeZipError, match="roster"):
        gsautograder.build(out, FAKE_LAB)
    (subs / "roster.csv").write_text("folder,site,site_id,name,email\nann,gradescope,1,Ann,a@x.edu\n"
                                     "bo,gradescope,2,Bo,A@X.edu\n")
    with pytest.raises(gsautograder.GradescopeZipError, match="two student folders"):
        gsautograder.build(out, FAKE_LAB)
    assert not gsautograder.default_zip(out, FAKE_LAB).exists()


def test_gradebooks_count_only_what_was_asked(fake_kit, tmp_path):
    """One lab imported of a kit with two: the grading, class.csv and canvas.csv hold that lab only;
    --missing-as-zero writes no 0 for a near miss (shown as such), and every member of a group
    gets the group's one grading."""
    from test_sites import CANVAS_GROUPS
    bonus_lab(fake_kit)
    export = make_zip(tmp_path / "c.zip", {"ann_1_11_kernel.cu": GOOD_KERNEL.encode(),
                                           "bo_2_22_Kernel.cu": GOOD_KERNEL.encode(),
                                           "teamrocket_106_33_kernel.cu": (GOOD_KERNEL + "// WRONG\n").encode()})
    groups = tmp_path / "groups.csv"
    groups.write_text(CANVAS_GROUPS, encoding="utf-8")
    subs = tmp_path / "class"
    importers.import_export("canvas", export, FAKE_LAB, subs, kit_root=fake_kit.root, say=lambda line: None,
                            groups=groups)
    out = tmp_path / "out"
    result = grade_class(subs, out, fake_kit, missing_as_zero=True)
    rows = read(out / "gradebook" / "canvas.csv")
    assert rows[0][5:] == [FAKE_LAB]                                # the bonus lab was not given: no column
    by_id = {r[1]: r[5:] for r in rows[2:]}
    assert by_id == {"1": ["100.00"], "2": [""], "106": ["40.00"], "107": ["40.00"], "108": ["40.00"]}
    table = read(out / "class.csv")
    assert table[0] == ["student", FAKE_LAB, "total"]
    assert dict((r[0], r[1]) for r in table[1:]) == {"Team Rocket (group:77)": "40.00", "ann (1)": "100.00",
                                                     "bo (2)": "near miss"}
    summary = "\n".join(result.summary)
    assert "1 lab(s) submitted under another name (a near miss)" in summary and "never submitted" not in summary
    assert "labs: 01-fake-5pt, the ones roster.csv says were imported" in summary


def test_moodle_worksheet_headings_in_its_languages(fake_kit, tmp_path):
    """The worksheet carries Identifier, Grade and Last modified (grade) in each language of
    moodle.HEADINGS, each identifier with that language's 'hiddenuser'; a team's members each
    get the team's grade."""
    from stencil_grader.classes.importers import moodle
    from test_sites import moodle_worksheet
    sheet = tmp_path / "worksheet.csv"
    sheet.write_text(moodle_worksheet("de"), encoding="utf-8")
    export = make_zip(tmp_path / "m.zip", {"Team Rocket_42_assignsubmission_file/kernel.cu": GOOD_KERNEL.encode(),
                                           "Default group_assignsubmission_file/kernel.cu": GOOD_KERNEL.encode()})
    subs = tmp_path / "class"
    importers.import_export("moodle", export, FAKE_LAB, subs, kit_root=fake_kit.root, say=lambda line: None,
                            groups=sheet)
    out = tmp_path / "out"
    grade_class(subs, out, fake_kit)
    rows = read(out / "gradebook" / f"moodle-{FAKE_LAB}.csv")
    head = rows[0]
    for lang, h in moodle.HEADINGS.items():
        ident, grade_col = head.index(h["recordid"]), head.index(h["gradenoun"])
        assert h["lastmodifiedgrade"] in head
        got = {r[ident]: r[grade_col] for r in rows[1:]}
        assert got == {f"{h['hiddenuser']}{pid}": "100.00" for pid in (5001, 5002, 5003)}, lang
    assert head.count("ID") == 1 and "Participant 5001" in rows[1] + rows[2] + rows[3]
