"""Canvas: "Download Submissions" file names, the group set's CSV, the Gradebook import CSV (grader/README.md,
section 9, has the layouts and their ambiguities).  Sources: canvas-lms lib/content_zipper.rb (get_user_name,
sanitize_user_name, sanitize_file_name: "<sortable name>[_LATE]_<user id>_<file id>_<file>", "anon_<id>" when
anonymous, a group's file under one member's id), app/models/attachment.rb make_unique_filename ("kernel-<n>.cu"),
app/models/gradebook_importer.rb (rows matched by ID; blank cells change nothing), the group set's CSV:
https://developerdocs.instructure.com/services/canvas/group-categories/file.group_category_csv"""

import collections
import re
from pathlib import Path

from ..submissions import SOURCE, sheet_cell, shown
from .common import Book, Export, Groups, GroupsError, Parsed, csv_text, read_csv_rows, unwrap
from .roster import GROUP_PREFIX, Student

NAME = "canvas"
_LATE = r"(?:(?P<late>LATE|late)_)?"            # older Canvas lower-cased the whole prefix
_ANON_ID = r"anon_[A-Za-z0-9]+"                  # the user id under anonymous grading
_TAIL = re.compile(rf"{_LATE}(?P<id>\d+)_(?P<file_id>\d+)_(?P<file>.+)", re.S)
_ANON = re.compile(rf"{_LATE}(?P<id>{_ANON_ID})_(?P<file_id>\d+)_(?P<file>.+)", re.S)
_ONLINE = re.compile(r"(?P<prefix>.+)_(?P<kind>text|link)\.html", re.S)
_PREFIX_NAMED = re.compile(rf"(?P<name>.+?)_{_LATE}(?P<id>\d+)", re.S)
_PREFIX_ANON = re.compile(rf"{_LATE}(?P<id>{_ANON_ID})", re.S)
RENAMED = re.compile(r"^kernel-\d+\.cu$")          # make_unique_filename's name for a re-upload
GROUPS_HINT = ("a group assignment's zip holds one file per group under one member's user id: import it with "
               "--groups FILE, the group set's CSV (People > Groups > the set > Export), so that every member is "
               "graded")


#: One parse of a file name: the name ("" when anonymous), late, the user id, the file id, the file.
FileName = collections.namedtuple("FileName", "name late site_id file_id file")


def parses(name: str, anonymous: bool) -> list[FileName]:
    """Every parse of a file name, shortest name first; with no named parse, the anonymous one (if any)."""
    m = _ANON.fullmatch(name)
    anon = [FileName("", bool(m["late"]), m["id"], m["file_id"], m["file"])] if m else []
    if anonymous:
        return anon
    found = [FileName(name[:at], bool(t["late"]), t["id"], t["file_id"], t["file"])
             for at in (u.start() for u in re.finditer("_", name)) if at and (t := _TAIL.fullmatch(name, at + 1))]
    return found or anon


def parse_name(name: str, anonymous: bool) -> tuple[FileName | None, str]:
    """(the parse taken, a note when the name was ambiguous) of a file name (module docstring)."""
    if not (found := parses(name, anonymous)):
        return None, ""
    kernel = [p for p in found if p.file == SOURCE or RENAMED.match(p.file)]
    chosen = found[0] if found[0] in kernel or not kernel else kernel[0]
    other = next((p for p in found if p is not chosen), None)
    return chosen, (f"the name could also be {other.name!r} (user {other.site_id}): read as {chosen.name!r} "
                    f"(user {chosen.site_id}); check this student") if other else ""


def read_groups(path: Path) -> Groups:
    """The group set's CSV: each user's group.  GroupsError when it is not that file."""
    groups = Groups(path)
    for row in read_csv_rows(path, ("canvas_user_id", "group_name"),
                             "Canvas's groups CSV (People > Groups > the group set > Export)"):
        user, group = row.get("canvas_user_id", "").strip(), row.get("group_name", "").strip()
        if user and group:
            groups.add(row.get("canvas_group_id", "").strip() or group, group,
                       Student(NAME, user, row.get("name", "").strip()))
    if not groups.members:
        raise GroupsError(f"{path}: no row with both canvas_user_id and group_name")
    return groups


def parse(export: Export, groups: Groups | None) -> Parsed:
    """The export read as Canvas's (module docstring)."""
    def anonymous() -> bool:
        files = [e.path for e in export.entries if len(e.parts) == 1]
        return bool(files) and all(_ANON.fullmatch(p) or ((m := _ONLINE.fullmatch(p)) and _PREFIX_ANON.fullmatch(
            m["prefix"])) for p in files)

    anon = anonymous()
    unwrap(export, lambda e: len(e.parts) == 1 and (parses(e.path, anon) or _ONLINE.fullmatch(e.path)))
    anon, parsed = anonymous(), Parsed()

    def add(site_id: str, name: str, late: bool, file: str | None, entry) -> None:
        """The file added to its user's submission, or their group's (groups given, they are in one)."""
        key = groups.of.get(site_id) if groups is not None else None
        student = Student(NAME, site_id, name) if key is None else Student(NAME, GROUP_PREFIX + key, groups.names[key])
        parsed.add(student, late, file, entry, None if key is None else groups.members[key])

    for e in export.entries:
        online = _ONLINE.fullmatch(e.path) if len(e.parts) == 1 else None
        prefix = online and ((not anon and _PREFIX_NAMED.fullmatch(online["prefix"]))
                             or _PREFIX_ANON.fullmatch(online["prefix"]))
        if prefix:
            add(prefix["id"], prefix.groupdict().get("name") or "", bool(prefix["late"]), None, None)
            parsed.notes.append((e.path, f"an online {'text entry' if online['kind'] == 'text' else 'URL'}, "
                                         "not a file"))
            continue
        found, note = parse_name(e.path, anon) if len(e.parts) == 1 else (None, "")
        if found is None:
            parsed.skipped.append((e.path, "not a Canvas file name (<name>_<user id>_<file id>_<file name>)"))
            continue
        if note:
            parsed.notes.append((e.path, note))
        add(found.site_id, found.name, found.late, found.file, e)
    return parsed


def gradebook(book: Book) -> tuple[dict[str, str], list[str]]:
    """({"canvas.csv": the Gradebook import CSV}, notes); anonymous submissions left out (Canvas matches by user id)."""
    lines = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + book.labs, ["Points Possible"] + [""] * 4
             + [f"{0 if book.facts[lab].get('bonus') else book.facts[lab]['points']:g}" for lab in book.labs]]
    left_out = [folder for folder, row in book.rows if row.get("site_id", "").startswith("anon_")]
    lines += [[sheet_cell(row.get("name", "")), row["site_id"], "", "", ""] + [book.cell(folder, row, lab)
                                                                              for lab in book.labs]
              for folder, row in book.rows if folder not in left_out]
    notes = [f"canvas.csv leaves out {len(left_out)} anonymous submission(s) ({', '.join(map(shown, left_out))}): "
             "Canvas matches a row by its user id, which an anonymous export does not give"] if left_out else []
    return {"canvas.csv": csv_text(lines)}, notes
