"""The course sites' own rules (classes/importers/canvas.py, moodle.py, gradescope.py): every name
form each site's code can produce parses back (a property test building names as the site's code
does, modelled here), groups imported once for all their members, near misses taken only when the instructor
says so (--accept), and Moodle's worksheet headings in its languages.

The exports follow each site's own code, as the modules cite it: Canvas's lib/content_zipper.rb
(group assignments: one file per group under a representative's user id and the group's name,
app/models/assignment.rb representatives) and its group-category CSV; Moodle's
mod/assign/classes/downloader.php (team assignments: "<group>_<group id>_assignsubmission_file/",
"Default group_assignsubmission_file/") and clean_filename; Gradescope's submission_metadata.yml.
"""

import csv
import io
import re
import zipfile

import pytest

from stencil_grader.classes.importers import canvas, moodle
from stencil_grader.classes.submissions import ClassError
from test_import import LAB, kernel, make_zip, read_roster, run

try:
    from hypothesis import given, settings, strategies as st
except ImportError:                          # tests/install-deps.sh installs python3-hypothesis
    given = None


#: Canvas's sanitize_attachment_filename: runs of these in a display name become "_".
ATTACHMENT_UNSAFE = re.compile(r'[\x00/\\:*?"<>|]+')


def canvas_user(sortable):
    """A user's part of Canvas's prefix: sanitize_user_name ("_<digits>_" to "<digits>", lower-cased),
    then sanitize_file_name (every non-[[:word:]] character removed)."""
    return re.sub(r"[^\w]", "", re.sub(r"_(\d+)_", r"\1", sortable).lower())


def canvas_name(sortable, late, site_id, file_id, display, old=False):
    """The name Canvas's lib/content_zipper.rb gives a file (canvas.py); sortable None: anonymous."""
    prefix = re.sub(r"[^\w]", "", "_".join(p for p in (None if sortable is None else canvas_user(sortable),
                                                       "LATE" if late else None, site_id) if p is not None))
    return f"{prefix.lower() if old else prefix}_{file_id}_{ATTACHMENT_UNSAFE.sub('_', display)}"


needs_hypothesis = pytest.mark.skipif(given is None, reason="Hypothesis is not installed (Debian: python3-hypothesis; "
                                                             "tests/install-deps.sh installs it when run as root)")

if given is not None:
    #: Sortable names as people have them: letters of several scripts, digits, ", ", "-", "'", "_".
    SORTABLE = st.text(st.sampled_from("abcxyzÉéñøß王伟ДЖ0123456789 ,-'_"), min_size=1, max_size=24).filter(
        canvas_user)
    FILES = st.sampled_from(["kernel.cu", "kernel-1.cu", "Kernel.cu", "kernel (1).cu", "9101_kernel.cu",
                             "notes_1_2.txt", "lab 1.zip", "a:b.cu"])
    IDS = st.integers(1, 10 ** 9)


@needs_hypothesis
@settings(max_examples=400, deadline=None)
@given(SORTABLE, st.booleans(), IDS, IDS, FILES, st.booleans())
def test_canvas_names_built_by_its_rules_parse_back(sortable, late, user, file_id, display, old):
    """Canvas's file name of any sortable name (digits only, "Late", "anon", ending in "_12"...),
    late or not, in today's or an older Canvas: the parse taken is the one Canvas built, or,
    where the name is ambiguous by Canvas's own rule (a name ending in "_<digits>"), the true
    parse is among the candidates, a note says so, and a kernel.cu is never lost to it."""
    name = canvas_name(sortable, late, str(user), file_id, display, old)
    truth = canvas.FileName(canvas_user(sortable).lower() if old else canvas_user(sortable), late, str(user),
                            str(file_id), ATTACHMENT_UNSAFE.sub("_", display))
    chosen, note = canvas.parse_name(name, anonymous=False)
    assert truth in canvas.parses(name, anonymous=False)
    if chosen != truth:
        assert note and "check this student" in note
        assert not (truth.file == "kernel.cu" and chosen.file != "kernel.cu")


@needs_hypothesis
@settings(max_examples=200, deadline=None)
@given(st.text("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ123456789", min_size=5, max_size=5),
       st.booleans(), IDS, FILES)
def test_canvas_anonymous_names_parse_back(anon_id, late, file_id, display):
    name = canvas_name(None, late, f"anon_{anon_id}", file_id, display)
    chosen, _ = canvas.parse_name(name, anonymous=True)
    assert (chosen.name, chosen.late, chosen.site_id, chosen.file_id) == ("", late, f"anon_{anon_id}", str(file_id))


@needs_hypothesis
@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("abÉé王 -_'`\"&<>|:\\/.\x01"), min_size=1, max_size=20), IDS,
       st.sampled_from(["4.1", "3.1", "flat"]), st.booleans())
def test_moodle_names_built_by_its_rules_parse_back(who, site_id, style, default_team):
    """Moodle's folder (or flat file) of any full name or group name: the prefix's name and id
    come back; a default group's folder has no id."""
    prefix = moodle.prefix(who, None if default_team else str(site_id))
    path = {"4.1": f"{prefix}_assignsubmission_file/kernel.cu", "3.1": f"{prefix}_assignsubmission_file_/kernel.cu",
            "flat": f"{prefix}_assignsubmission_file_kernel.cu"}[style]
    m = moodle._PREFIX.match(path.split("/")[0])
    name = moodle.prefix(who, None) if default_team else re.sub(moodle.REMOVED, "", who.replace("_", " "))
    assert m and m["name"] == name
    assert m["id"] == (None if default_team else str(site_id))


def test_canvas_names_of_digits_late_and_anon_are_students_of_their_own(tmp_path):
    """A student whose sortable name is only digits, one named "Late", one named "Anon", and a
    LATE one: each their own Canvas user, each file kernel.cu."""
    export = make_zip(tmp_path / "c.zip", {"20231001_5001_9101_kernel.cu": kernel("digits"),
                                           "late_5002_9102_kernel.cu": kernel("named late"),
                                           "anon_5003_9103_kernel.cu": kernel("named anon"),
                                           "late_LATE_5004_9104_kernel.cu": kernel("late late")})
    into = tmp_path / "class"
    result, out = run("canvas", export, into)
    assert result.exit_status == 0, out
    rows = read_roster(into)
    assert {r["site_id"]: (r["name"], r[f"{LAB} late"]) for r in rows.values()} == {
        "5001": ("20231001", "no"), "5002": ("late", "no"), "5003": ("anon", "no"), "5004": ("late", "yes")}
    assert (into / "20231001 (5001)" / LAB / "kernel.cu").read_bytes() == kernel("digits")


# ---------------------------------------------------------------- groups

CANVAS_GROUPS = ("name,canvas_user_id,user_id,login_id,sections,group_name,canvas_group_id,group_id\r\n"
                 "\"Rocket, Jessie\",106,,jessie,S1,Team Rocket,77,\r\n"
                 "\"Rocket, James\",107,,james,S1,Team Rocket,77,\r\n"
                 "\"Meowth, M\",108,,meowth,S1,Team Rocket,77,\r\n"
                 "\"Ketchum, Ash\",201,,ash,S1,Pallet,78,\r\n")


def test_canvas_group_assignment_every_member_gets_the_grading(tmp_path):
    export = make_zip(tmp_path / "c.zip", {"teamrocket_106_9006_kernel.cu": kernel("rocket"),
                                           "pallet_LATE_201_9007_kernel.cu": kernel("pallet")})
    groups = tmp_path / "groups.csv"
    groups.write_text(CANVAS_GROUPS, encoding="utf-8")
    into = tmp_path / "class"
    result, out = run("canvas", export, into, groups=groups)
    assert result.exit_status == 0, out
    assert (into / "Team Rocket (group:77)" / LAB / "kernel.cu").read_bytes() == kernel("rocket")
    rows = read_roster(into)
    members = {r["site_id"]: r for r in rows.values() if r[f"{LAB} group"] == "Team Rocket (group:77)"}
    assert sorted(members) == ["106", "107", "108"] and members["107"]["name"] == "Rocket, James"
    assert rows["Pallet (group:78)"][f"{LAB} late"] == "yes"
    assert not (into / "Rocket, James (107)").exists()             # graded once, in the group's folder
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ClassError, match="no column canvas_user_id, group_name"):
        run("canvas", export, tmp_path / "c2", groups=bad)


def moodle_worksheet(lang="en"):
    h = moodle.HEADINGS[lang]
    text = io.StringIO()
    w = csv.writer(text)
    w.writerow([h["recordid"], h["fullnameuser"], "Email address", "Status", h["submissionteam"], h["gradenoun"]])
    for pid, name, team in ((5001, "Jessie Rocket", "Team Rocket"), (5002, "James Rocket", "Team Rocket"),
                            (5003, "Lone Wolf", h["defaultteam"])):
        w.writerow([h["hiddenuser"] + str(pid), name, "x@example.edu", "", team, ""])
    return text.getvalue()


@pytest.mark.parametrize("lang", ["en", "fr", "zh_cn"])
def test_moodle_team_assignment_with_its_worksheet(tmp_path, lang):
    members = {"Team Rocket_42_assignsubmission_file/kernel.cu": kernel("rocket"),
               "Default group_assignsubmission_file/kernel.cu": kernel("default")}
    export = make_zip(tmp_path / "m.zip", members)
    into = tmp_path / "class"
    with pytest.raises(ClassError, match="Default group_assignsubmission_file has no participant id: .*--groups FILE"):
        run("moodle", export, into)
    sheet = tmp_path / "worksheet.csv"
    sheet.write_text(moodle_worksheet(lang), encoding="utf-8")
    result, out = run("moodle", export, into, groups=sheet)
    assert result.exit_status == 0, out
    rows = read_roster(into)
    assert (into / "Team Rocket (group:42)" / LAB / "kernel.cu").read_bytes() == kernel("rocket")
    by_id = {r["site_id"]: r[f"{LAB} group"] for r in rows.values() if r["site"] == "moodle"}
    assert by_id["5001"] == by_id["5002"] == "Team Rocket (group:42)"
    assert by_id["5003"] == "Default group (group:default)"
    assert "Participant 42" not in (into / "roster.csv").read_text(encoding="utf-8")


# ---------------------------------------------------------------- near misses

def test_near_misses_taken_only_when_accepted(tmp_path):
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("lab1/kernel.cu", kernel("zipped"))
        z.writestr("__MACOSX/lab1/._kernel.cu", b"\0")
    export = make_zip(tmp_path / "c.zip", {"capital_1_11_Kernel.cu": kernel("capital"),
                                           "copy_2_22_kernel (1).cu": kernel("copy"),
                                           "zipped_3_33_lab1.zip": inner.getvalue(),
                                           "other_4_44_notes.cu": kernel("not a kernel")})
    into = tmp_path / "class"
    result, out = run("canvas", export, into)
    assert result.exit_status == 1 and "--accept takes it" in out
    assert not list(into.rglob("kernel.cu"))
    result, out = run("canvas", export, into, accept=["capital (1)", "2", "zipped (3)", "other (4)"])
    assert (into / "capital (1)" / LAB / "kernel.cu").read_bytes() == kernel("capital")
    assert (into / "copy (2)" / LAB / "kernel.cu").read_bytes() == kernel("copy")
    assert (into / "zipped (3)" / LAB / "kernel.cu").read_bytes() == kernel("zipped")
    assert not (into / "other (4)" / LAB).exists() and "not a kernel.cu under another name" in out
    rows = read_roster(into)
    assert "accepted the near miss zipped_3_33_lab1.zip/lab1/kernel.cu (--accept)" in rows["zipped (3)"][f"{LAB} note"]
    assert rows["capital (1)"][f"{LAB} file"] == "capital_1_11_Kernel.cu"


def test_import_command_takes_groups_and_accept(tmp_path):
    from conftest import run_grade
    export = make_zip(tmp_path / "c.zip", {"teamrocket_106_9006_Kernel.cu": kernel("rocket")})
    groups = tmp_path / "groups.csv"
    groups.write_text(CANVAS_GROUPS, encoding="utf-8")
    done = run_grade("import", "--from", "canvas", str(export), "--lab", LAB, "--into", str(tmp_path / "class"),
                     "--groups", str(groups), "--accept", "all")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "class" / "Team Rocket (group:77)" / LAB / "kernel.cu").is_file()
