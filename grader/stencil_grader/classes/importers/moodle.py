"""Moodle: "Download all submissions" names, the grading worksheet (groups in, grades out); layouts in grader/README.md,
section 9.  Sources: mod/assign/classes/downloader.php get_student_prefix ("<who>_<id>_assignsubmission_file/",
"..._file_/" in 3.1 to 4.0, flat "..._file_<file>"; a team's group name and id, "Default group" with none;
clean_filename), mod/assign/gradingtable.php (recordid, fullnameuser, submissionteam) and
mod/assign/feedback/offline/importgradeslib.php (the upload finds its columns by heading in the uploader's language:
hence every language of HEADINGS side by side; for another, rename the English headings and "Participant ")."""

import re
import unicodedata
from pathlib import Path

from ..submissions import sheet_cell
from .common import Book, Export, ExportError, Groups, GroupsError, Parsed, csv_text, read_csv_rows, unwrap
from .roster import GROUP_PREFIX, Student

NAME = "moodle"
#: Moodle's language strings the worksheets use, per language: mod/assign/lang/en/assign.php and
#: lang/en/moodle.php of https://github.com/moodle/moodle (en: 'hiddenuser' is "Participant "
#: with its space), and the language packs of AMOS as mirrored at
#: https://github.com/projectestac/moodle-langpacks (fr, de, es, zh_cn: <lang>/assign.php,
#: <lang>/moodle.php, commit 6340d351fc13 of 2026-06-18).
HEADINGS = {lang: dict(zip(("recordid", "hiddenuser", "gradenoun", "lastmodifiedgrade", "submissionteam",
                            "defaultteam", "fullname", "fullnameuser"), strings)) for lang, strings in {
    "en": ("Identifier", "Participant ", "Grade", "Last modified (grade)", "Group", "Default group", "Full name",
           "User full name"),
    "fr": ("Identifiant", "Participant", "Note", "Dernière modification (note)", "Groupe", "Groupe par défaut",
           "Nom complet", "Nom complet de l’utilisateur"),
    "de": ("ID", "Teilnehmer/in", "Bewertung", "Zuletzt geändert (Bewertung)", "Gruppe", "Standard-Gruppe",
           "Vollständiger Name", "Vollständiger Name"),
    "es": ("Identificador", "Participante", "Calificación", "Última modificación (calificación)", "Grupo",
           "Grupo predeterminado", "Nombre completo", "Nombre completo del usuario"),
    "zh_cn": ("标识符", "参与人", "成绩", "上次修改（评分）", "小组", "默认小组", "全名", "用户全名")}.items()}
#: What clean_filename (clean_param PARAM_FILE) removes.
REMOVED = r"[\x00-\x1f\x7f&<>\"`|':\\/]"
# Read leniently: any name without "_" (what get_student_prefix writes, and a folder renamed by hand).
_PREFIX = re.compile(r"^(?P<name>[^_]*?)(?:_(?P<id>\d+))?_assignsubmission_"
                     r"(?P<plugin>[a-z]+)(?:_(?P<rest>.*))?$", re.S)
GROUPS_HINT = ("a team assignment's folders are named for the group, and its id is the group's: import it with "
               "--groups FILE, FILE being the assignment's grading worksheet, so that every member is graded")
GROUP_HELP = ("the assignment's grading worksheet (View all submissions > Download grading worksheet; "
              "feedback type 'Offline grading worksheet')")


def prefix(who: str, site_id: str | None) -> str:
    """get_student_prefix: who with '_' as ' ', '_<id>' unless None, clean_filename'd ("." and ".." as "")."""
    text = re.sub(REMOVED, "", who.replace("_", " ") + (f"_{site_id}" if site_id is not None else ""))
    return "" if text in (".", "..") else text


def _key(name: str) -> str:
    """A team's key in Groups: its name as a folder prefix shows it, NFC, case-folded."""
    return unicodedata.normalize("NFC", prefix(name, None)).casefold()


def read_groups(path: Path) -> Groups:
    """The grading worksheet in any language of HEADINGS: each participant's group; GroupsError if it is not one."""
    try:
        header = Path(path).read_text(encoding="utf-8-sig").splitlines()[0]
    except (OSError, UnicodeDecodeError, IndexError) as err:
        raise GroupsError(f"{path}: cannot be read ({err}); give {GROUP_HELP}") from None
    h = next((h for h in HEADINGS.values() if h["recordid"] in header and h["submissionteam"] in header), None)
    if h is None:
        raise GroupsError(f"{path}: no Identifier and Group columns in any of Moodle's languages "
                          f"({', '.join(HEADINGS)}); give {GROUP_HELP}")
    groups, hidden = Groups(path), h["hiddenuser"].strip()
    for row in read_csv_rows(path, (h["recordid"], h["submissionteam"]), GROUP_HELP):
        ident = row.get(h["recordid"], "")
        site_id = ident[len(hidden):].strip() if ident.startswith(hidden) else ""
        team = row.get(h["submissionteam"], "").strip()
        team = "" if team in (x["defaultteam"] for x in HEADINGS.values()) or team == "-" else team
        if site_id.isdigit():
            groups.add(_key(team), team, Student(NAME, site_id, row.get(h["fullnameuser"]) or row.get(h["fullname"])
                                                 or ""))
    if not groups.members:
        raise GroupsError(f"{path}: no participant row; give {GROUP_HELP}")
    return groups


def parse(export: Export, groups: Groups | None) -> Parsed:
    """The export read as Moodle's; ExportError for a folder without an id (a team's) when groups is None."""
    parsed = Parsed()
    unwrap(export, lambda e: _PREFIX.match(e.parts[0]))
    for e in export.entries:
        m = _PREFIX.match(e.parts[0])
        if not m or (len(e.parts) == 1) == (not m["rest"]):
            parsed.skipped.append((e.path, "not a Moodle submission (<Full Name>_<id>_assignsubmission_file, "
                                           "a folder, or ..._file_<file name>)"))
            continue
        if m["id"] is None and groups is None:
            raise ExportError(f"{e.parts[0]} has no participant id: the export of a team assignment; import it "
                              f"with --groups FILE, FILE being {GROUP_HELP}")
        student, members = Student(NAME, m["id"], m["name"]), []
        if groups is not None and (m["id"] is None or _key(m["name"]) in groups.members):
            key = _key(m["name"]) if m["id"] is not None else ""
            if key not in groups.members:
                parsed.skipped.append((e.path, f"the group {m['name']!r} is not in {groups.path}"))
                continue
            student, members = Student(NAME, f"{GROUP_PREFIX}{m['id'] or 'default'}", m["name"]), groups.members[key]
        if m["plugin"] != "file":
            parsed.notes.append((e.path, f"the {m['plugin']} plugin's part of the submission (not a file): ignored"))
            continue
        parsed.add(student, None, m["rest"] if len(e.parts) == 1 else "/".join(e.parts[1:]), e, members)
    return parsed


def gradebook(book: Book) -> tuple[dict[str, str], list[str]]:
    """({"moodle-<lab>.csv": text} of each lab: its grading worksheet (module docstring), [])."""
    written = {}
    head = ["Full name", "Maximum Grade"] + [h[k] for h in HEADINGS.values()
                                             for k in ("recordid", "gradenoun", "lastmodifiedgrade")]
    for lab in book.labs:
        lines = [head]
        for folder, row in book.rows:
            graded_at = ((book.report(folder, row, lab) or {}).get("class") or {}).get("graded_at", "")
            grade = book.cell(folder, row, lab)
            lines.append([sheet_cell(row.get("name", "")), f"{book.facts[lab]['points']:g}"]
                         + [v for h in HEADINGS.values() for v in (h["hiddenuser"] + row["site_id"], grade, graded_at)])
        written[f"moodle-{lab}.csv"] = csv_text(lines)
    return written, []
