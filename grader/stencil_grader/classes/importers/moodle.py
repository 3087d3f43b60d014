"""Moodle: its "Download all submissions" names, its grading worksheet (groups in, grades out).

Everything Moodle-shaped in the kit is here; sites.py registers the module.

The names, as mod/assign/classes/downloader.php writes them
(https://github.com/moodle/moodle/blob/main/mod/assign/classes/downloader.php:
get_student_prefix, load_submissionplugin_filelist), a zip with a folder per submission:

    <prefix>_assignsubmission_file/<the files>          (4.1 and later)
    <prefix>_assignsubmission_file_/<the files>         (3.1 to 4.0: locallib.php download_submissions)
    <prefix>_assignsubmission_file_<file name>          ("Download submissions in folders" off)
    prefix: clean_filename(str_replace('_', ' ', <who>) . '_' . <id>)
        who, id: the student's full name and participant id (assign's get_uniqueid_for_user;
                 blind marking: get_string('participant') for the name);
                 a team assignment: the group's name and the group's id, or, for students in
                 no group, get_string('defaultteam') ("Default group") and no id at all.
    clean_filename (lib/moodlelib.php clean_param PARAM_FILE) removes control characters and
    & < > " ` | ' : \\ /; so a prefix's name holds no "_" and none of those.

RULES is that as a table; the property test (tests/python/test_import.py) builds names by it and
parses them back.  The online text plugin's part (..._assignsubmission_onlinetext...) is noted
and ignored (https://github.com/moodle/moodle/commit/381bb721538cbba98ac84447a6da22fdb4dc94a2:
"Each submission is then put in a separate folder ... and files are not renamed").

Groups: a team assignment's folder is named for the group and its id is the group's, not a
participant's; nothing in the zip tells a team "Team Rocket_42" from a student "Team Rocket"
(participant 42).  So a team assignment is imported with --groups: the assignment's grading
worksheet (View all submissions > Download grading worksheet, with "Offline grading worksheet"
feedback on), whose columns Identifier ("Participant <id>"), the full name and Group
(mod/assign/gradingtable.php: 'recordid', 'fullnameuser', 'submissionteam') say who is in
which group.  Without it, an export with a folder that has no id (the default group's) is
refused in one line naming that file.

The gradebook: each lab's grading worksheet, uploaded at the assignment (Upload grading
worksheet).  Moodle finds its columns by their headings in the uploading user's language:
get_string('recordid', 'assign'), get_string('gradenoun') (formerly 'grade') and
get_string('lastmodifiedgrade', 'assign'); an identifier is get_string('hiddenuser', 'assign')
followed by the participant id, which it strips by length; a blank grade is skipped
(mod/assign/feedback/offline/importgradeslib.php init, next).  The worksheet written here
carries those three columns in each language of HEADINGS, side by side (Moodle reads the
three in its own language and ignores the others), so that it uploads as it is from a Moodle
in English, French, German, Spanish or Simplified Chinese.  For another language, rename the
three English headings to that language's strings (Site administration > Language > Language
customisation, mod_assign: recordid, lastmodifiedgrade, hiddenuser; core: gradenoun) and the
"Participant " before each id to its 'hiddenuser'.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from ..submissions import sheet_cell
from .common import GROUP_PREFIX, Book, Groups, GroupsError, Parsed, csv_text, read_csv_rows, unwrap
from .export import Export, ExportError
from .roster import Student

NAME = "moodle"
#: Moodle's language strings the worksheets use, per language: mod/assign/lang/en/assign.php and
#: lang/en/moodle.php of https://github.com/moodle/moodle (en: 'hiddenuser' is "Participant "
#: with its space), and the language packs of AMOS as mirrored at
#: https://github.com/projectestac/moodle-langpacks (fr, de, es, zh_cn: <lang>/assign.php,
#: <lang>/moodle.php, commit 6340d351fc13 of 2026-06-18).
HEADINGS = {
    "en": {"recordid": "Identifier", "hiddenuser": "Participant ", "gradenoun": "Grade",
           "lastmodifiedgrade": "Last modified (grade)", "submissionteam": "Group", "defaultteam": "Default group",
           "fullname": "Full name", "fullnameuser": "User full name"},
    "fr": {"recordid": "Identifiant", "hiddenuser": "Participant", "gradenoun": "Note",
           "lastmodifiedgrade": "Dernière modification (note)", "submissionteam": "Groupe",
           "defaultteam": "Groupe par défaut", "fullname": "Nom complet",
           "fullnameuser": "Nom complet de l’utilisateur"},
    "de": {"recordid": "ID", "hiddenuser": "Teilnehmer/in", "gradenoun": "Bewertung",
           "lastmodifiedgrade": "Zuletzt geändert (Bewertung)", "submissionteam": "Gruppe",
           "defaultteam": "Standard-Gruppe", "fullname": "Vollständiger Name", "fullnameuser": "Vollständiger Name"},
    "es": {"recordid": "Identificador", "hiddenuser": "Participante", "gradenoun": "Calificación",
           "lastmodifiedgrade": "Última modificación (calificación)", "submissionteam": "Grupo",
           "defaultteam": "Grupo predeterminado", "fullname": "Nombre completo",
           "fullnameuser": "Nombre completo del usuario"},
    "zh_cn": {"recordid": "标识符", "hiddenuser": "参与人", "gradenoun": "成绩", "lastmodifiedgrade": "上次修改（评分）",
              "submissionteam": "小组", "defaultteam": "默认小组", "fullname": "全名", "fullnameuser": "用户全名"},
}
#: Moodle's rules for a name of "Download all submissions" (module docstring): (rule, meaning).
RULES = {
    "removed": (r"[\x00-\x1f\x7f&<>\"`|':\\/]", "what clean_filename removes (PARAM_FILE)"),
    "name": (r"[^_\x00-\x1f\x7f&<>\"`|':\\/]*", "a name: '_' made ' ', then clean_filename"),
    "id": (r"\d+", "the participant id, or a team's group id"),
    "plugin": (r"assignsubmission_[a-z]+", "the submission plugin: assignsubmission_file, ..._onlinetext"),
}
# Read leniently: any name without "_" (RULES' names and more: a folder renamed by hand).
_PREFIX = re.compile(rf"^(?P<name>[^_]*?)(?:_(?P<id>{RULES['id'][0]}))?_assignsubmission_"
                     rf"(?P<plugin>[a-z]+)(?:_(?P<rest>.*))?$", re.S)
GROUPS_HINT = ("a team assignment's folders are named for the group, and its id is the group's: import it with "
               "--groups FILE, FILE being the assignment's grading worksheet, so that every member is graded")
GROUP_HELP = ("the assignment's grading worksheet (View all submissions > Download grading worksheet; "
              "feedback type 'Offline grading worksheet')")


def clean_filename(text: str) -> str:
    """Moodle's clean_filename (clean_param PARAM_FILE)."""
    text = re.sub(RULES["removed"][0], "", text)
    return "" if text in (".", "..") else text


def prefix(who: str, site_id: str | None) -> str:
    """get_student_prefix: who with '_' as ' ', '_<id>' unless None (the default group), cleaned."""
    return clean_filename(who.replace("_", " ") + (f"_{site_id}" if site_id is not None else ""))


def _key(name: str) -> str:
    return unicodedata.normalize("NFC", prefix(name, None)).casefold()


def read_groups(path: Path) -> Groups:
    """The team assignment's grading worksheet (module docstring), in any language of HEADINGS:
    each participant's group.  GroupsError when it is not that file."""
    try:
        header = Path(path).read_text(encoding="utf-8-sig").splitlines()[0]
    except (OSError, UnicodeDecodeError, IndexError) as err:
        raise GroupsError(f"{path}: cannot be read ({err}); give {GROUP_HELP}") from None
    lang = next((l for l, h in HEADINGS.items() if h["recordid"] in header and h["submissionteam"] in header), None)
    if lang is None:
        raise GroupsError(f"{path}: no Identifier and Group columns in any of Moodle's languages "
                          f"({', '.join(HEADINGS)}); give {GROUP_HELP}")
    h = HEADINGS[lang]
    rows = read_csv_rows(path, (h["recordid"], h["submissionteam"]), GROUP_HELP)
    groups = Groups(path)
    for row in rows:
        ident = row.get(h["recordid"], "")
        site_id = ident[len(h["hiddenuser"].strip()):].strip() if ident.startswith(h["hiddenuser"].strip()) else ""
        if not site_id.isdigit():
            continue
        name = row.get(h["fullnameuser"]) or row.get(h["fullname"]) or ""
        team = row.get(h["submissionteam"], "").strip()
        team = "" if team in (x["defaultteam"] for x in HEADINGS.values()) or team == "-" else team
        groups.add(_key(team), team, Student(NAME, site_id, name))
    if not groups.members:
        raise GroupsError(f"{path}: no participant row; give {GROUP_HELP}")
    return groups


def parse(export: Export, groups: Groups | None) -> Parsed:
    """The export read as Moodle's (module docstring)."""
    parsed = Parsed()
    unwrap(export, lambda e: _PREFIX.match(e.parts[0]))
    for e in export.entries:
        m = _PREFIX.match(e.parts[0])
        if not m or (len(e.parts) == 1 and not m["rest"]) or (len(e.parts) > 1 and m["rest"]):
            parsed.skipped.append((e.path, "not a Moodle submission (<Full Name>_<id>_assignsubmission_file, "
                                           "a folder, or ..._file_<file name>)"))
            continue
        team = groups is not None and (m["id"] is None or _key(m["name"]) in groups.members)
        if m["id"] is None and groups is None:
            raise ExportError(f"{e.parts[0]} has no participant id: the export of a team assignment; import it "
                              f"with --groups FILE, FILE being {GROUP_HELP}")
        if team:
            key = _key(m["name"]) if m["id"] is not None else ""
            if key not in groups.members:
                parsed.skipped.append((e.path, f"the group {m['name']!r} is not in {groups.path}"))
                continue
            groups.names[key] = m["name"]
            student = Student(NAME, f"{GROUP_PREFIX}{m['id'] or 'default'}", m["name"])
            members = groups.members[key]
        else:
            student, members = Student(NAME, m["id"], m["name"]), []
        if m["plugin"] != "file":
            parsed.notes.append((e.path, f"the {m['plugin']} plugin's part of the submission (not a file): ignored"))
            continue
        path = m["rest"] if len(e.parts) == 1 else "/".join(e.parts[1:])
        sub = parsed.add(student, None, path, e)
        sub.members = members
    return parsed


def gradebook(book: Book) -> tuple[dict[str, str], list[str]]:
    """({"moodle-<lab>.csv": text} of each lab: its grading worksheet (module docstring), [])."""
    written = {}
    head = ["Full name", "Maximum Grade"] + [h[k] for h in HEADINGS.values()
                                             for k in ("recordid", "gradenoun", "lastmodifiedgrade")]
    for lab in book.labs:
        lines = [head]
        for folder, row in book.rows:
            report = book.report(folder, row, lab) or {}
            graded_at = (report.get("class") or {}).get("graded_at", "")
            grade = book.cell(folder, row, lab)
            lines.append([sheet_cell(row.get("name", "")), f"{book.facts[lab]['points']:g}"]
                         + [v for h in HEADINGS.values() for v in (h["hiddenuser"] + row["site_id"], grade, graded_at)])
        written[f"moodle-{lab}.csv"] = csv_text(lines)
    return written, []
