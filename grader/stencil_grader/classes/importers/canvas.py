"""Canvas: its "Download Submissions" file names, its groups CSV, and its Gradebook import CSV.

Everything Canvas-shaped in the kit is here; sites.py registers the module.

The names, as canvas-lms lib/content_zipper.rb writes them
(https://github.com/instructure/canvas-lms/blob/master/lib/content_zipper.rb: add_submission,
get_filename, get_user_name, sanitize_user_name, sanitize_file_name, add_upload_submission,
add_text_or_url), one flat zip of files; RULES below is that code as a table, and the property
test (tests/python/test_import.py) builds names by it and parses them back:

    prefix = [user name, "LATE" if late, user id].compact.join("_"), then every character that is
             not [[:word:]] removed (sanitize_file_name)
    user name: the sortable name ("García, José"), "_<digits>_" turned into "<digits>",
             lower-cased (sanitize_user_name); for a group assignment, the group's name (the
             assignment's representatives carry the group's name: app/models/assignment.rb
             representatives); absent under anonymous grading, where the id is "anon_<id>"
    file:    "<prefix>_<file id>_<display name>" ("\\0 / \\ : * ? \" < > |" runs as "_"), a
             re-upload of one name renamed "<base>-<n><ext>" (app/models/attachment.rb
             make_unique_filename); online entries "<prefix>_text.html", "<prefix>_link.html"
    older Canvas lower-cased the whole prefix: "late" for "LATE".

So a name may be only digits ("20231001"), may be "late" or "anon", and may end in "_<digits>"
(the rule removes only "_<digits>_" inside it).  The parse is therefore done per export: an
export is anonymous when every file has the anonymous form, else every file has a name (never
empty); and a name that could end in "_<digits>" is the shortest that leaves
"[LATE_]<id>_<file id>_<file>", unless only a longer one leaves a file named kernel.cu (then
that one, with a note).

Groups: a group assignment's zip holds one file per group, under the user id of one member
(the representative) and the group's name.  The zip does not say it is a group's, so the
groups CSV of the group set (People > Groups > the set > Export, columns "name",
"canvas_user_id", "user_id", "login_id", "sections", "group_name", "canvas_group_id",
"group_id": https://developerdocs.instructure.com/services/canvas/group-categories/file.group_category_csv)
is passed with --groups; each submission whose user is in a group is that group's, and every
member gets its grade.

The gradebook: a header "Student", "ID", "SIS User ID", "SIS Login ID", "Section", one column
per assignment (an existing assignment of that exact title is updated, any other title creates
one), a "Points Possible" row, then a row per student matched by "ID", the Canvas user id.
Blank cells change nothing.  Source: canvas-lms app/models/gradebook_importer.rb
(row_has_student_headers?, update_column_count, process_pp, process_student, no_score?), and the
Instructor Guide, "How do I import grades in the Gradebook?",
https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807.
Anonymous submissions (ids "anon_...") cannot be matched and are left out, with a note.  Extra
credit as a 0-point assignment: https://vlcross.ucdavis.edu/blog/giving-extra-credit-canvas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..submissions import sheet_cell, shown
from .common import Book, Groups, GroupsError, Parsed, csv_text, read_csv_rows, unwrap
from .export import Export
from .roster import Student

NAME = "canvas"
SOURCE = "kernel.cu"
#: Canvas's rules for a file name of "Download Submissions" (module docstring), as regular
#: expressions: (rule, what it matches).
RULES = {
    "word": (r"[^\W]", "a character of the prefix: [[:word:]] (letters, digits, marks, '_'), Unicode"),
    "late": (r"LATE|late", "the late mark: LATE, or late (older Canvas lower-cased the prefix)"),
    "user_id": (r"\d+", "Canvas's user id"),
    "anon_id": (r"anon_[A-Za-z0-9]+", "the anonymous id under anonymous grading"),
    "file_id": (r"\d+", "the attachment's id"),
    "renamed": (r"kernel-\d+\.cu", "make_unique_filename's name for a re-uploaded kernel.cu"),
}
_TAIL = re.compile(rf"(?:(?P<late>{RULES['late'][0]})_)?(?P<id>{RULES['user_id'][0]})_(?P<file_id>\d+)_(?P<file>.+)",
                   re.S)
_ANON = re.compile(rf"(?:(?P<late>{RULES['late'][0]})_)?(?P<id>{RULES['anon_id'][0]})_(?P<file_id>\d+)_(?P<file>.+)",
                   re.S)
_ONLINE = re.compile(r"(?P<prefix>.+)_(?P<kind>text|link)\.html", re.S)
_PREFIX_NAMED = re.compile(rf"(?P<name>.+?)_(?:(?P<late>{RULES['late'][0]})_)?(?P<id>\d+)", re.S)
_PREFIX_ANON = re.compile(rf"(?:(?P<late>{RULES['late'][0]})_)?(?P<id>{RULES['anon_id'][0]})", re.S)
_ATTACHMENT_UNSAFE = re.compile(r'[\x00/\\:*?"<>|]+')      # sanitize_attachment_filename
RENAMED = re.compile(rf"^{RULES['renamed'][0]}$")
GROUP_COLUMNS = ("canvas_user_id", "group_name")
#: Said on an import without --groups: nothing in Canvas's zip tells a group's file from a student's.
GROUPS_HINT = ("a group assignment's zip holds one file per group under one member's user id: import it with "
               "--groups FILE, the group set's CSV (People > Groups > the set > Export), so that every member is graded")


@dataclass(frozen=True)
class FileName:
    """One parse of a file name: the name ("" when anonymous), late, the id, the file id, the file."""

    name: str
    late: bool
    site_id: str
    file_id: str
    file: str


def sanitize_user_name(sortable: str) -> str:
    """Canvas's sanitize_user_name: "_<digits>_" to "<digits>", lower-cased."""
    return re.sub(r"_(\d+)_", r"\1", sortable).lower()


def sanitize_file_name(prefix: str) -> str:
    """Canvas's sanitize_file_name: every character that is not [[:word:]] removed."""
    return re.sub(r"[^\w]", "", prefix)


def file_name(sortable: str | None, late: bool, site_id: str, file_id: int, display: str, old: bool = False) -> str:
    """The name Canvas gives a file of a submission (module docstring); sortable None: anonymous."""
    user = sanitize_user_name(sortable) if sortable is not None else None
    prefix = sanitize_file_name("_".join(p for p in (user, "LATE" if late else None, site_id) if p is not None))
    if old:
        prefix = prefix.lower()
    return f"{prefix}_{file_id}_{_ATTACHMENT_UNSAFE.sub('_', display)}"


def parses(name: str, anonymous: bool) -> list[FileName]:
    """Every parse of a file name (module docstring), the shortest name first; in an export
    that is not anonymous, a name with no named parse is tried as an anonymous one."""
    m = _ANON.fullmatch(name)
    anon = [FileName("", bool(m["late"]), m["id"], m["file_id"], m["file"])] if m else []
    if anonymous:
        return anon
    found = []
    for at in (m.start() for m in re.finditer("_", name)):
        if at == 0:
            continue
        m = _TAIL.fullmatch(name, at + 1)
        if m:
            found.append(FileName(name[:at], bool(m["late"]), m["id"], m["file_id"], m["file"]))
    return found or anon


def parse_name(name: str, anonymous: bool) -> tuple[FileName | None, str]:
    """(the parse taken, a note when the name was ambiguous) of a file name (module docstring)."""
    found = parses(name, anonymous)
    if not found:
        return None, ""
    kernel = [p for p in found if p.file == SOURCE or RENAMED.match(p.file)]
    chosen = found[0] if found[0] in kernel or not kernel else kernel[0]
    others = [p for p in found if p is not chosen]
    note = (f"the name could also be {others[0].name!r} (user {others[0].site_id}): read as {chosen.name!r} "
            f"(user {chosen.site_id}); check this student") if others else ""
    return chosen, note


def is_anonymous(export: Export) -> bool:
    """Whether every file of the export has the anonymous form."""
    files = [e.path for e in export.entries if len(e.parts) == 1]
    return bool(files) and all(_ANON.fullmatch(p) or (_ONLINE.fullmatch(p) and
                                                      _PREFIX_ANON.fullmatch(_ONLINE.fullmatch(p)["prefix"]))
                               for p in files)


def read_groups(path: Path) -> Groups:
    """The groups CSV of a group set: {user id: (group key, group name)} and the members' names.
    GroupsError when it is not that file."""
    rows = read_csv_rows(path, GROUP_COLUMNS, "Canvas's groups CSV (People > Groups > the group set > Export)")
    groups = Groups(path)
    for row in rows:
        user, group = row.get("canvas_user_id", "").strip(), row.get("group_name", "").strip()
        if not user or not group:
            continue
        key = row.get("canvas_group_id", "").strip() or group
        groups.add(key, group, Student(NAME, user, row.get("name", "").strip()))
    if not groups.members:
        raise GroupsError(f"{path}: no row with both canvas_user_id and group_name")
    return groups


def parse(export: Export, groups: Groups | None) -> Parsed:
    """The export read as Canvas's (module docstring)."""
    parsed = Parsed()
    anonymous = is_anonymous(export)

    def top(e) -> bool:
        return len(e.parts) == 1 and bool(parses(e.path, anonymous) or _ONLINE.fullmatch(e.path))

    unwrap(export, top)
    anonymous = is_anonymous(export)
    for e in export.entries:
        online = _ONLINE.fullmatch(e.path) if len(e.parts) == 1 else None
        prefix = online and ((not anonymous and _PREFIX_NAMED.fullmatch(online["prefix"]))
                             or _PREFIX_ANON.fullmatch(online["prefix"]))
        if prefix:
            student = Student(NAME, prefix["id"], prefix.groupdict().get("name") or "")
            parsed.add(_owner(student, groups), bool(prefix["late"]), None, None, groups)
            parsed.notes.append((e.path, f"an online {'text entry' if online['kind'] == 'text' else 'URL'}, "
                                         "not a file"))
            continue
        found, note = parse_name(e.path, anonymous) if len(e.parts) == 1 else (None, "")
        if found is None:
            parsed.skipped.append((e.path, "not a Canvas file name (<name>_<user id>_<file id>_<file name>)"))
            continue
        if note:
            parsed.notes.append((e.path, note))
        student = Student(NAME, found.site_id, found.name)
        parsed.add(_owner(student, groups), found.late, found.file, e, groups)
    return parsed


def _owner(student: Student, groups: Groups | None) -> Student:
    """The student, or the group they represent (groups given and they are in one)."""
    if groups is None or student.site_id not in groups.of:
        return student
    return groups.group_student(groups.of[student.site_id])


def gradebook(book: Book) -> tuple[dict[str, str], list[str]]:
    """({"canvas.csv": text}, notes) for the roster rows of Canvas students (module docstring)."""
    labs = book.labs
    lines = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + labs,
             ["Points Possible", "", "", "", ""] + [f"{0 if book.facts[l].get('bonus') else book.facts[l]['points']:g}"
                                                     for l in labs]]
    left_out = []
    for folder, row in book.rows:
        if row.get("site_id", "").startswith("anon_"):
            left_out.append(folder)
            continue
        lines.append([sheet_cell(row.get("name", "")), row["site_id"], "", "", ""]
                     + [book.cell(folder, row, lab) for lab in labs])
    notes = [f"canvas.csv leaves out {len(left_out)} anonymous submission(s) ({', '.join(map(shown, left_out))}): "
             "Canvas matches a row by its user id, which an anonymous export does not give"] if left_out else []
    return {"canvas.csv": csv_text(lines)}, notes
