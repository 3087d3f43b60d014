"""grade.py import: a course site's export of one lab laid out as a class folder (classes/importers/).

The samples are made here with zipfile, laid out as each site's own code writes its export:

  Canvas      https://github.com/instructure/canvas-lms/blob/master/lib/content_zipper.rb
              (get_filename: [sortable name lower-cased, non-word characters removed, "LATE",
              user id or anon_<id>] joined by "_", then "_<file id>_<display name>"),
              https://github.com/instructure/canvas-lms/blob/master/app/models/attachment.rb
              (make_unique_filename: a re-uploaded kernel.cu becomes kernel-1.cu)
  Moodle      https://github.com/moodle/moodle/blob/main/mod/assign/classes/downloader.php
              (folders <Full Name>_<participant id>_assignsubmission_file/; files
              ..._assignsubmission_file_<name> when "Download submissions in folders" is off),
              mod/assign/locallib.php download_submissions() of Moodle 3.1-4.0 (the folder ends
              in "_"), https://github.com/moodle/moodle/commit/381bb721538cbba98ac84447a6da22fdb4dc94a2
  Gradescope  https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/
              (a submission's users: name, email; several for a group),
              https://guides.gradescope.com/hc/en-us/articles/22066784117901-Grading-Online-Assignments
              ("Exporting Submission Data"),
              https://github.com/ucbds-infra/otter-grader/blob/master/otter/grade/metadata.py
              (the export's submission_metadata.yml: submission_<id> keys, :submitters:, :name:)

Names as those sites export them: spaces, accents in NFC and NFD, an apostrophe, a backtick,
quotes, CJK, two students of one name; and what an attacker would put in a zip.
"""

import csv
import importlib.util
import os
import stat
import struct
import subprocess
import unicodedata
import zipfile

import pytest

from conftest import run_grade
from stencil_grader.classes import importers, submissions
from stencil_grader.classes.importers import common, gradescope, roster as roster_mod
from stencil_grader.classes.submissions import ClassError

LAB, LAB2 = "01-naive-5pt", "02-shared-tiling"
#: The tests that read a Gradescope export need PyYAML (grader/requirements.txt).
NEEDS_YAML = pytest.mark.skipif(importlib.util.find_spec("yaml") is None, reason=gradescope.YAML_MISSING)
NFC = unicodedata.normalize("NFC", "José García")
NFD = unicodedata.normalize("NFD", "José García")


def kernel(tag: str) -> bytes:
    return f"// {tag}\n__global__ void sweep(const float *in, float *out) {{}}\n".encode()


def make_zip(path, members, flag_utf8=True):
    """A zip of members: name -> bytes, or name -> ("symlink", target)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            if isinstance(data, tuple):
                info = zipfile.ZipInfo(name)
                info.create_system = 3
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                z.writestr(info, data[1])
            else:
                z.writestr(name, data)
    return path


def run(site, export, into, lab=LAB, **kw):
    lines = []
    result = importers.import_export(site, export, lab, into, say=lines.append, **kw)
    return result, "\n".join(lines)


def read_roster(into):
    with open(into / "roster.csv", newline="", encoding="utf-8") as f:
        return {row["folder"]: row for row in csv.DictReader(f)}


def files_under(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def assert_nothing_outside(tmp_path, into, export_names=()):
    """Every file under tmp_path is the export, or lies in --into."""
    for p in tmp_path.rglob("*"):
        if p.is_file() and p.name not in export_names:
            assert into in p.parents, f"{p} written outside --into"


# ---------------------------------------------------------------- Canvas

CANVAS = {
    f"{'garcíajosé'}_1001_5001_kernel.cu": kernel("garcia"),
    f"{unicodedata.normalize('NFD', 'garcíajosé')}_1002_5002_kernel.cu": kernel("garcia nfd"),
    "smithjohn_1003_5003_kernel.cu": kernel("smith 1003"),
    "smithjohn_1004_5004_kernel.cu": kernel("smith 1004"),
    "obrienpat_LATE_1005_5005_kernel.cu": kernel("obrien late"),          # O'Brien, Pat: apostrophe dropped
    "lee_late_1006_5006_kernel.cu": kernel("lee late, older Canvas"),
    "wangwei_1007_5007_kernel-1.cu": kernel("wang re-upload"),
    "王伟_1008_5008_kernel.cu": kernel("cjk"),
    "twofiles_1009_5009_kernel.cu": kernel("two a"),
    "twofiles_1009_5010_kernel-1.cu": kernel("two b"),
    "nokernel_1010_5011_Kernel.cu": kernel("capital"),
    "txt_1011_5012_kernel.cu.txt": kernel("txt"),
    "paren_1012_5013_kernel (1).cu": kernel("browser copy"),
    "zipper_1013_5014_lab1.zip": b"PK\x05\x06" + b"\0" * 18,
    "texty_1014_text.html": b"<p>my kernel is great</p>",
    "anon_x1y2z_5015_kernel.cu": kernel("anonymous"),
    "LATE_anon_a9b8c_5016_kernel.cu": kernel("anonymous late"),
    "../../evil.cu": kernel("evil"),
    "/tmp/abs_evil.cu": kernel("absolute"),
    "linky_1020_5020_kernel.cu": ("symlink", "/etc/passwd"),
    "big_1021_5021_kernel.cu": b"\0" * (2 << 20),                        # 2 MiB of zeros: a few KB zipped
    "__MACOSX/._smithjohn_1003_5003_kernel.cu": b"\0",
    "readme.txt": b"exported by Canvas",
}


def test_canvas_export(tmp_path):
    export = make_zip(tmp_path / "submissions.zip", CANVAS)
    into = tmp_path / "class"
    result, out = run("canvas", export, into)

    def got(folder):
        return (into / folder / LAB / "kernel.cu").read_bytes()

    assert got("garcíajosé (1001)") == kernel("garcia")
    assert got("garcíajosé (1002)") == kernel("garcia nfd")           # NFD name: the folder in NFC
    assert got("smithjohn (1003)") == kernel("smith 1003")            # one name, two students
    assert got("smithjohn (1004)") == kernel("smith 1004")
    assert got("obrienpat (1005)") == kernel("obrien late")
    assert got("lee (1006)") == kernel("lee late, older Canvas")
    assert got("wangwei (1007)") == kernel("wang re-upload")         # Canvas's kernel-1.cu taken
    assert got("王伟 (1008)") == kernel("cjk")
    assert got("anonymous (anon_x1y2z)") == kernel("anonymous")
    assert got("anonymous (anon_a9b8c)") == kernel("anonymous late")
    for folder in ("twofiles (1009)", "nokernel (1010)", "txt (1011)", "paren (1012)", "zipper (1013)",
                   "texty (1014)", "big (1021)"):
        assert not (into / folder / LAB).exists(), folder
    assert "linky (1020)" not in os.listdir(into)
    assert not list(tmp_path.rglob("evil.cu")) and not os.path.exists("/tmp/abs_evil.cu")
    assert_nothing_outside(tmp_path, into, {"submissions.zip"})

    assert "ambiguous  twofiles (1009): 2 files could be the kernel.cu (twofiles_1009_5009_kernel.cu, " \
           "twofiles_1009_5010_kernel-1.cu): none taken" in out
    assert "nokernel (1010): no kernel.cu; found nokernel_1010_5011_Kernel.cu" in out
    assert "found txt_1011_5012_kernel.cu.txt" in out and "found paren_1012_5013_kernel (1).cu" in out
    assert "found zipper_1013_5014_lab1.zip: the file must be named kernel.cu (an archive is not opened)" in out
    assert "texty_1014_text.html: an online text entry, not a file" in out
    assert "refused    ../../evil.cu: a '..' in the path: would land outside --into" in out
    assert "refused    /tmp/abs_evil.cu: an absolute path" in out
    assert "refused    linky_1020_5020_kernel.cu: a symbolic link" in out
    assert "refused    big_1021_5021_kernel.cu: 2097152 bytes, over the 1 MiB limit" in out
    assert "skipped    readme.txt: not a Canvas file name" in out
    assert "(Canvas renamed a re-upload kernel-1.cu)" in out
    summary = out.splitlines()[-1]
    assert summary.startswith("summary: 17 students: 10 imported (3 late), 0 unchanged; not imported: "
                              "5 without a kernel.cu, 1 with two candidates (none taken), 1 unreadable or "
                              "over 1 MiB; 3 refused entries") and "1 archive artefact(s) ignored" in summary
    assert result.exit_status == 1

    rows = read_roster(into)
    assert len(rows) == 17
    garcia_nfd = rows["garcíajosé (1002)"]
    assert garcia_nfd["name"] == unicodedata.normalize("NFD", "garcíajosé")     # as exported, NFD kept
    assert (garcia_nfd["site"], garcia_nfd["site_id"]) == ("canvas", "1002")
    assert rows["obrienpat (1005)"][f"{LAB} late"] == "yes" and rows["lee (1006)"][f"{LAB} late"] == "yes"
    assert rows["smithjohn (1003)"][f"{LAB} late"] == "no"
    assert rows["smithjohn (1003)"][f"{LAB} file"] == "smithjohn_1003_5003_kernel.cu"
    assert rows["anonymous (anon_a9b8c)"]["name"] == "" and rows["anonymous (anon_a9b8c)"][f"{LAB} late"] == "yes"
    assert "none taken" in rows["twofiles (1009)"][f"{LAB} note"]
    assert rows["twofiles (1009)"][f"{LAB} file"] == ""
    assert "over the 1 MiB limit" in rows["big (1021)"][f"{LAB} note"]


def test_zip_bomb_and_the_size_limit(tmp_path):
    """Exactly 1 MiB is taken; 8 MiB (8 KB zipped) is refused; so is a member whose header lies
    about its size (zipfile decompresses no more than the header says, then the CRC fails)."""
    export = tmp_path / "bomb.zip"
    make_zip(export, {"fine_1_11_kernel.cu": b"a" * (1 << 20), "bomb_2_22_kernel.cu": b"\0" * (8 << 20),
                      "liar_3_33_kernel.cu": b"\0" * (8 << 20)})
    assert export.stat().st_size < 64 << 10
    raw = bytearray(export.read_bytes())          # the liar's central directory entry claims 100 bytes
    at = raw.find(b"PK\x01\x02")
    for _ in range(2):
        at = raw.find(b"PK\x01\x02", at + 4)
    struct.pack_into("<I", raw, at + 24, 100)
    export.write_bytes(bytes(raw))
    result, out = run("canvas", export, tmp_path / "class")
    assert (tmp_path / "class/fine (1)" / LAB / "kernel.cu").stat().st_size == 1 << 20
    assert "refused    bomb_2_22_kernel.cu: 8388608 bytes, over the 1 MiB limit" in out
    assert "refused    liar_3_33_kernel.cu: cannot be read (Bad CRC-32" in out
    assert files_under(tmp_path / "class") == ["fine (1)/01-naive-5pt/kernel.cu", "roster.csv"]
    assert result.exit_status == 1


# ---------------------------------------------------------------- Moodle

MOODLE_STUDENTS = {
    f"{NFC}_4711": kernel("garcia nfc"),
    f"{NFD}_4712": kernel("garcia nfd"),
    "Seán O'Brien_4713": kernel("apostrophe"),
    "Ana `id` Li_4714": kernel("backtick"),
    'Zoë "Zed" Ng_4715': kernel("quotes"),
    "王伟_4716": kernel("cjk"),
    "John Smith_4717": kernel("smith a"),
    "John Smith_4718": kernel("smith b"),
}


def moodle_members(style):
    """One export as Moodle writes it: style '4.1' (folder), '3.1' (folder ending in _), 'flat'."""
    members = {}
    end = {"4.1": "_assignsubmission_file/", "3.1": "_assignsubmission_file_/",
           "flat": "_assignsubmission_file_"}[style]
    for prefix, data in MOODLE_STUDENTS.items():
        members[f"{prefix}{end}kernel.cu"] = data
        members[f"{prefix}_assignsubmission_onlinetext{'_' if style == 'flat' else '/'}onlinetext.html"] = b"<p>"
    members[f"Nico Near_4720{end}Kernel.cu"] = kernel("capital")
    members[f"Zip Per_4721{end}mywork.zip"] = b"PK\x05\x06" + b"\0" * 18
    if style != "flat":
        members[f"Deep Dir_4719{end}lab1/src/kernel.cu"] = kernel("deep")
        members[f"Two Copies_4722{end}kernel.cu"] = kernel("two a")
        members[f"Two Copies_4722{end}old/kernel.cu"] = kernel("two b")
        members[f"Eve Hacker_4723{end}../../evil.cu"] = kernel("evil")
    return members


@pytest.mark.parametrize("style", ["4.1", "3.1", "flat"])
def test_moodle_export(tmp_path, style):
    export = make_zip(tmp_path / "moodle.zip", moodle_members(style))
    into = tmp_path / "class"
    result, out = run("moodle", export, into)
    expect = {
        "José García (4711)": "garcia nfc", "José García (4712)": "garcia nfd",
        "Seán O'Brien (4713)": "apostrophe", "Ana `id` Li (4714)": "backtick",
        'Zoë "Zed" Ng (4715)': "quotes", "王伟 (4716)": "cjk",
        "John Smith (4717)": "smith a", "John Smith (4718)": "smith b",
    }
    for folder, tag in expect.items():
        assert (into / unicodedata.normalize("NFC", folder) / LAB / "kernel.cu").read_bytes() == kernel(tag)
    rows = read_roster(into)
    assert rows[NFC + " (4712)"]["name"] == NFD                 # the name as exported, its folder in NFC
    assert rows[NFC + " (4711)"]["name"] == NFC
    assert rows["Seán O'Brien (4713)"][f"{LAB} late"] == ""      # Moodle's export does not say
    assert "Nico Near (4720): no kernel.cu; found" in out and "Kernel.cu" in out
    assert "Zip Per (4721): no kernel.cu; found" in out and "(an archive is not opened)" in out
    assert "onlinetext plugin's part of the submission" in out
    if style != "flat":
        assert (into / "Deep Dir (4719)" / LAB / "kernel.cu").read_bytes() == kernel("deep")
        assert "found at lab1/src/kernel.cu" in out
        assert "ambiguous  Two Copies (4722): 2 files could be the kernel.cu" in out
        assert "../../evil.cu: a '..' in the path" in out
        assert not list(tmp_path.rglob("evil.cu"))
    assert_nothing_outside(tmp_path, into, {"moodle.zip"})
    assert result.exit_status == 1


def test_moodle_unpacked_folder(tmp_path):
    """The same export, unpacked by the instructor: a folder, with a symbolic link planted in it."""
    export = tmp_path / "moodle"
    for name, data in moodle_members("4.1").items():
        if ".." in name:
            continue
        path = export / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    secret = tmp_path / "secret.cu"
    secret.write_bytes(b"instructor's answer key")
    link_folder = export / "Mal Lory_4730_assignsubmission_file"
    link_folder.mkdir()
    (link_folder / "kernel.cu").symlink_to(secret)
    (export / ".DS_Store").write_bytes(b"\0")
    fifo_folder = export / "Fifi Fo_4731_assignsubmission_file"
    fifo_folder.mkdir()
    os.mkfifo(fifo_folder / "kernel.cu")                 # reading it would wait forever
    into = tmp_path / "class"
    result, out = run("moodle", export, into)
    assert "refused    Fifi Fo_4731_assignsubmission_file/kernel.cu: not a regular file" in out
    assert (into / "王伟 (4716)" / LAB / "kernel.cu").read_bytes() == kernel("cjk")
    assert "refused    Mal Lory_4730_assignsubmission_file/kernel.cu: a symbolic link" in out
    assert not (into / "Mal Lory (4730)" / LAB).exists()
    assert b"answer key" not in b"".join(p.read_bytes() for p in into.rglob("kernel.cu"))
    with pytest.raises(ClassError, match="lies inside the export"):
        run("moodle", export, export / "class")


# ---------------------------------------------------------------- Gradescope

GRADESCOPE_METADATA = """\
---
submission_409194023:
  :submitters:
  - :name: José García
    :sid: '123456789'
    :email: jose@example.edu
  :created_at: 2026-04-26 17:34:00.861687000 Z
  :score: 2.0
  :results:
    score: 2.0
    output: |-
      ======== Assignment: Lab 1
      :submitters:
      - :name: Not A Student
        :sid: '666'
submission_500000001:
  :submitters:
  - :name: 'Seán O''Brien'
    :sid: '111'
    :email: sean@example.edu
  - :name: "Zo\\u00eb \\"Zed\\" Ng"
    :sid: '222'
    :email: zoe@example.edu
  :score: 10.0
submission_600000002:
  :submitters:
  - :name: 王伟
    :email: wang@example.cn
submission_700000003:
  :submitters:
  - :name: "`whoami` ../../x"
    :sid: 333
submission_800000004:
  :submitters: []
"""


def gradescope_members(metadata=GRADESCOPE_METADATA):
    root = "assignment_8046601_export/"
    return {
        f"{root}submission_metadata.yml": metadata.encode(),
        f"{root}submission_409194023/kernel.cu": kernel("garcia"),
        f"{root}submission_500000001/kernel.cu": kernel("group"),
        f"{root}submission_500000001/README.md": b"pair work",
        f"{root}submission_600000002/kernel.cu": kernel("cjk"),
        f"{root}submission_700000003/kernel.cu.txt": kernel("txt"),
        f"{root}submission_999/kernel.cu": kernel("not in metadata"),
        f"{root}.DS_Store": b"\0",
    }


@NEEDS_YAML
def test_gradescope_export(tmp_path):
    export = make_zip(tmp_path / "export.zip", gradescope_members())
    into = tmp_path / "class"
    result, out = run("gradescope", export, into)
    assert (into / "José García (123456789)" / LAB / "kernel.cu").read_bytes() == kernel("garcia")
    group = 'Seán O\'Brien, Zoë "Zed" Ng (group:500000001)'     # a group: one folder, graded once
    assert (into / group / LAB / "kernel.cu").read_bytes() == kernel("group")
    assert not (into / "Seán O'Brien (111)").exists() and not (into / 'Zoë "Zed" Ng (222)').exists()
    assert (into / "王伟 (wang@example.cn)" / LAB / "kernel.cu").read_bytes() == kernel("cjk")  # no SID: e-mail
    assert "Not A Student (666)" not in os.listdir(into)       # autograder output is no submitter
    root = "assignment_8046601_export/"
    assert f"`whoami` .._.._x (333): no kernel.cu; found {root}submission_700000003/kernel.cu.txt" in out
    assert f"skipped    {root}submission_999/kernel.cu: not in a submission folder that " \
           f"submission_metadata.yml names" in out
    assert "submission_800000004: no submitter" in out
    rows = read_roster(into)
    assert rows["Seán O'Brien (111)"]["email"] == "sean@example.edu"
    assert rows["王伟 (wang@example.cn)"]["site_id"] == "wang@example.cn"
    assert rows['Zoë "Zed" Ng (222)']["name"] == 'Zoë "Zed" Ng'
    assert rows["Seán O'Brien (111)"][f"{LAB} file"] == f"{root}submission_500000001/kernel.cu"
    assert rows["Seán O'Brien (111)"][f"{LAB} group"] == rows['Zoë "Zed" Ng (222)'][f"{LAB} group"] == group
    assert rows[group]["site_id"] == "group:500000001" and rows[group][f"{LAB} group"] == ""
    assert f"group      {group}: 2 member(s), graded once for all" in out
    assert result.exit_status == 1


@NEEDS_YAML
def test_gradescope_metadata_reader():
    records = gradescope.read_submitters(GRADESCOPE_METADATA)
    assert list(records) == ["submission_409194023", "submission_500000001", "submission_600000002",
                             "submission_700000003", "submission_800000004"]
    assert records["submission_409194023"] == [{"name": "José García", "sid": "123456789",
                                                "email": "jose@example.edu"}]
    assert [p["name"] for p in records["submission_500000001"]] == ["Seán O'Brien", 'Zoë "Zed" Ng']
    assert records["submission_600000002"] == [{"name": "王伟", "sid": "", "email": "wang@example.cn"}]
    assert records["submission_700000003"][0]["sid"] == "333"
    assert records["submission_800000004"] == []
    # what Psych also writes: tags, comments, CRLF, a long name folded over two lines
    folded = ("submission_1:\r\n  :submitters:\r\n  - :name: !ruby/string Maria  # a comment\r\n"
              "    :sid: '0042'\r\n    :extra:\r\n      - :name: nested, not a submitter\r\n"
              "  - :name: Alexandra Konstantinopoulou-Papadimitriou\r\n"
              "      von Habsburg\r\n    :email: ~\r\n")
    assert gradescope.read_submitters(folded)["submission_1"] == [
        {"name": "Maria", "sid": "0042", "email": ""},
        {"name": "Alexandra Konstantinopoulou-Papadimitriou von Habsburg", "sid": "", "email": ""}]
    for bad, where in (("submission_1:\n  :submitters: Bob\n", "line 2"),
                       ("submission_1:\n  :submitters:\n  - :name: \"unterminated\n", "line 3"),
                       ("  :submitters: []\n", "line 1"),
                       ("submission_1:\n  :submitters:\n  - :name: \"\\q\"\n", "unknown escape")):
        with pytest.raises(gradescope.MetadataError, match=where):
            gradescope.read_submitters(bad)


def test_gradescope_without_metadata_is_refused(tmp_path):
    export = make_zip(tmp_path / "export.zip", {"submission_1/kernel.cu": kernel("x")})
    with pytest.raises(ClassError, match="no submission_metadata.yml in the export"):
        run("gradescope", export, tmp_path / "class")
    assert not (tmp_path / "class").exists()


# ---------------------------------------------------------------- the roster and re-imports

def test_reimport_merges_and_never_overwrites(tmp_path):
    into = tmp_path / "class"
    lab1 = make_zip(tmp_path / "lab1.zip", {"annaa_1_11_kernel.cu": kernel("anna 1"),
                                            "bobb_2_22_kernel.cu": kernel("bob 1")})
    result, _ = run("canvas", lab1, into)
    assert result.exit_status == 0
    with open(into / "roster.csv", encoding="utf-8") as f:          # the instructor adds a column
        rows = list(csv.reader(f))
    rows[0].insert(1, "section")
    for row in rows[1:]:
        row.insert(1, "A1")
    with open(into / "roster.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)

    lab2 = make_zip(tmp_path / "lab2.zip", {"bobb_LATE_2_33_kernel.cu": kernel("bob 2"),
                                            "carolc_3_44_kernel.cu": kernel("carol 2")})
    result, _ = run("canvas", lab2, into, lab=LAB2)
    assert result.exit_status == 0
    roster = read_roster(into)
    assert sorted(roster) == ["annaa (1)", "bobb (2)", "carolc (3)"]
    assert roster["annaa (1)"][f"{LAB} file"] == "annaa_1_11_kernel.cu"       # lab 1 kept
    assert roster["annaa (1)"][f"{LAB2} file"] == ""                          # not in lab 2's export
    assert roster["bobb (2)"][f"{LAB2} late"] == "yes" and roster["bobb (2)"][f"{LAB} late"] == "no"
    assert roster["annaa (1)"]["section"] == "A1" and roster["carolc (3)"]["section"] == ""
    header = (into / "roster.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header[:2] == ["folder", "section"]
    assert files_under(into) == ["annaa (1)/01-naive-5pt/kernel.cu", "bobb (2)/01-naive-5pt/kernel.cu",
                                 "bobb (2)/02-shared-tiling/kernel.cu", "carolc (3)/02-shared-tiling/kernel.cu",
                                 "roster.csv"]

    result, out = run("canvas", lab1, into)                 # the same export again: nothing changes
    assert result.exit_status == 0 and "unchanged  annaa (1)/01-naive-5pt/kernel.cu" in out

    changed = make_zip(tmp_path / "lab1b.zip", {"annaa_1_55_kernel.cu": kernel("anna 1, later")})
    result, out = run("canvas", changed, into)
    assert result.exit_status == 1
    assert "kept       annaa (1)/01-naive-5pt/kernel.cu: already there and different (--force replaces it)" in out
    assert (into / "annaa (1)" / LAB / "kernel.cu").read_bytes() == kernel("anna 1")
    assert read_roster(into)["annaa (1)"][f"{LAB} file"] == "annaa_1_11_kernel.cu"   # still what is on disk

    result, out = run("canvas", changed, into, force=True)
    assert result.exit_status == 0
    assert (into / "annaa (1)" / LAB / "kernel.cu").read_bytes() == kernel("anna 1, later")
    assert read_roster(into)["annaa (1)"][f"{LAB} file"] == "annaa_1_55_kernel.cu"

    renamed = make_zip(tmp_path / "lab2b.zip", {"annaanew_1_66_kernel.cu": kernel("anna 2")})
    run("canvas", renamed, into, lab=LAB2)                  # a new name on the site: the same folder
    assert (into / "annaa (1)" / LAB2 / "kernel.cu").read_bytes() == kernel("anna 2")
    assert read_roster(into)["annaa (1)"]["name"] == "annaanew"


def test_folder_rule():
    def folder(name, site_id="7"):
        return roster_mod.folder_name(roster_mod.Student("gradescope", site_id, name))
    assert folder(NFD) == folder(NFC) == f"{NFC} (7)"
    assert folder("../../etc") == "etc (7)" and folder("a/b\\c") == "a_b_c (7)"
    assert folder(".hidden") == "hidden (7)" and folder("__MACOSX") == "MACOSX (7)"
    assert folder("-rf") == "rf (7)" and folder("") == "anonymous (7)"
    assert folder("line\nbreak\x1b[2J") == "line_break_[2J (7)"
    assert folder("evil\u202etxt.cu") == "evil_txt.cu (7)"
    long = folder("é" * 300, "1234567")
    assert len(long.encode()) <= 255 and long.endswith(" (1234567)")
    assert folder("x", "a/../b") == "x (a_.._b)"


def test_roster_conflict_and_bad_roster(tmp_path):
    into = tmp_path / "class"
    into.mkdir()
    (into / "roster.csv").write_text("folder,site,site_id,name,email\nx (1),moodle,1,x,\n", encoding="utf-8")
    export = make_zip(tmp_path / "c.zip", {"x_1_2_kernel.cu": kernel("x")})
    result, out = run("canvas", export, into)
    assert "conflict   x (1): the folder 'x (1)' belongs to moodle id '1'" in out
    assert result.exit_status == 1 and not (into / "x (1)").exists()
    (into / "roster.csv").write_text("folder,site,site_id,name,email\ny (2),canvas,2,y,\n", encoding="utf-8-sig")
    result, _ = run("canvas", export, into)              # a byte-order mark, as Excel saves CSV UTF-8
    assert sorted(read_roster(into)) == ["x (1)", "y (2)"] and result.exit_status == 0
    (into / "roster.csv").write_text("name,site\nx,canvas\n", encoding="utf-8")
    with pytest.raises(ClassError, match="no 'folder' column"):
        run("canvas", export, into)


def test_symlink_in_the_class_folder_is_not_written_through(tmp_path):
    into, elsewhere = tmp_path / "class", tmp_path / "elsewhere"
    into.mkdir()
    elsewhere.mkdir()
    (into / "x (1)").symlink_to(elsewhere)
    result, out = run("canvas", make_zip(tmp_path / "c.zip", {"x_1_2_kernel.cu": kernel("x")}), into)
    assert "conflict   x (1): " in out and "x (1) is a symbolic link; not written through" in out
    assert list(elsewhere.iterdir()) == [] and result.exit_status == 1


# ---------------------------------------------------------------- zip member names

def _set_flag(raw: bytearray, on: bool) -> None:
    """Set or clear the UTF-8 flag (bit 11) in every local and central header."""
    for sig, off in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.find(sig)
        while at >= 0:
            flags = struct.unpack_from("<H", raw, at + off)[0]
            struct.pack_into("<H", raw, at + off, flags | 0x800 if on else flags & ~0x800)
            at = raw.find(sig, at + 4)


def test_zip_names_utf8_unflagged_and_invalid(tmp_path):
    path = make_zip(tmp_path / "m.zip", {"José Núñez_5_assignsubmission_file/kernel.cu": kernel("utf8"),
                                         "Bad XX_6_assignsubmission_file/kernel.cu": kernel("latin")})
    raw = bytearray(path.read_bytes().replace(b"Bad XX", b"Bad \xe9\xe9"))   # Latin-1 bytes, no flag
    _set_flag(raw, False)                                  # as rubyzip and Info-ZIP write UTF-8 names
    path.write_bytes(bytes(raw))
    result, out = run("moodle", path, tmp_path / "class")
    assert (tmp_path / "class" / "José Núñez (5)" / LAB / "kernel.cu").read_bytes() == kernel("utf8")
    assert "the name is not valid UTF-8 and not flagged as UTF-8" in out
    assert sorted(os.listdir(tmp_path / "class")) == ["José Núñez (5)", "roster.csv"]

    _set_flag(raw, True)                                   # flagged UTF-8 but not: the archive is refused
    path.write_bytes(bytes(raw))
    with pytest.raises(ClassError, match="flagged UTF-8 but is not valid UTF-8"):
        run("moodle", path, tmp_path / "class2")
    assert not (tmp_path / "class2").exists()


def test_export_reader_refuses_unsafe_names():
    for name in ("/etc/passwd", "C:/x.cu", "a\\..\\b.cu", "a/../b.cu", "a//b.cu", "./a.cu"):
        assert common.unsafe(name), name
    for name in ("a.cu", "José García_1_assignsubmission_file/sub dir/kernel.cu", "..a/b..c"):
        assert common.unsafe(name) is None, name


# ---------------------------------------------------------------- the command and the class folder

def test_import_command(tmp_path):
    export = make_zip(tmp_path / "c.zip", {"annaa_1_11_kernel.cu": kernel("a")})
    into = tmp_path / "class"
    ok = run_grade("import", "--from", "canvas", export, "--lab", LAB, "--into", into)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "imported   annaa (1)/01-naive-5pt/kernel.cu  <- annaa_1_11_kernel.cu" in ok.stdout
    for site, source, lab, message in (
            ("canvas", export, "99-nope", "--lab '99-nope': not a lab of the kit"),
            ("canvas", tmp_path / "none.zip", LAB, "no such file or folder"),
            ("moodle", export, LAB, "nothing in it is laid out as a Moodle export"),
            ("canvas", into / "roster.csv", LAB, "not a zip file")):
        bad = run_grade("import", "--from", site, source, "--lab", lab, "--into", into)
        assert bad.returncode == 2, bad.stdout + bad.stderr
        assert message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    # what the class grader then reads: the imported kernel.cu in its place, nothing run on the way
    assert submissions.find_source(into, "annaa (1)", LAB)[0] == into / "annaa (1)" / LAB / "kernel.cu"


def test_import_runs_no_program(tmp_path, monkeypatch):
    """No student string can reach a shell: the importer starts no process at all."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"the importer started a process: {args}")
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(os, "system", refuse)
    export = make_zip(tmp_path / "m.zip", moodle_members("4.1"))
    result, _ = run("moodle", export, tmp_path / "class")
    assert result.counts["imported"] == 9
