"""CLASS/roster.csv (grader/README.md, section 9): a row per folder (BASE_COLUMNS; site_id "group:<id>" for a group),
and per imported lab "<lab> <field>" of LAB_FIELDS.  An import only adds or updates rows and columns, and a student
the roster has (same site and id) keeps their folder."""

import csv
import io
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ...base.files import write_atomic
from ..submissions import ROSTER

BASE_COLUMNS = ("folder", "site", "site_id", "name", "email")
LAB_FIELDS = ("late", "file", "note", "files", "group")
#: The prefix of a group's site_id (is_group).
GROUP_PREFIX = "group:"
NAME_MAX = 255          # the longest file name most file systems take, in bytes of UTF-8
_BIDI_CONTROLS = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class RosterError(ValueError):
    """roster.csv cannot be read or merged into (the message says what is wrong)."""


@dataclass(frozen=True)
class Student:
    """A student as the site exported them: site, identifier, name as written, e-mail ("" if none)."""
    site: str
    site_id: str
    name: str
    email: str = ""


def clean(text: str) -> str:
    """text in NFC, '/', '\\', control and bidi characters as '_', leading '.', '_', '-', spaces dropped."""
    text = unicodedata.normalize("NFC", text)
    text = "".join("_" if c in "/\\" or c in _BIDI_CONTROLS or unicodedata.category(c) == "Cc" else c
                   for c in text)
    return text.strip().lstrip("._- ")


def folder_name(student: Student) -> str:
    """"<name> (<site id>)", each part clean()ed and cut to fit NAME_MAX bytes ("anonymous" for no name)."""
    def cut(text: str, max_bytes: int) -> str:
        return text.encode("utf-8")[:max_bytes].decode("utf-8", "ignore").rstrip()
    tail = f" ({cut(clean(student.site_id), 128) or 'no id'})"
    return (cut(clean(student.name), NAME_MAX - len(tail.encode("utf-8"))) or "anonymous") + tail


def is_group(row: dict) -> bool:
    """Whether a roster row is a group's (its site_id starts with GROUP_PREFIX)."""
    return row.get("site_id", "").startswith(GROUP_PREFIX)


def imported_labs(row_columns: list[str], labs: list[str]) -> list[str]:
    """The labs of `labs` (in that order) that a roster with these columns has imported."""
    return [lab for lab in labs if f"{lab} file" in row_columns]


@dataclass
class Roster:
    """roster.csv in memory: its columns in order and its rows by folder."""
    path: Path
    columns: list[str]
    rows: dict[str, dict[str, str]]

    @classmethod
    def load(cls, path: Path) -> "Roster":
        """The roster at path (empty when none); RosterError: unreadable, no 'folder' column, a folder twice."""
        path = Path(path)
        if not path.exists():
            return cls(path, list(BASE_COLUMNS), {})
        try:
            text = path.read_text(encoding="utf-8-sig")        # -sig: as Excel saves "CSV UTF-8"
        except (OSError, UnicodeDecodeError) as err:
            raise RosterError(f"{path}: cannot read ({err}); move it away to start a new roster") from None
        reader = csv.DictReader(io.StringIO(text))
        columns = list(reader.fieldnames or [])
        if "folder" not in columns:
            raise RosterError(f"{path}: no 'folder' column in its header (expected {', '.join(BASE_COLUMNS)}, "
                              f"then per lab: late, file, note)")
        rows: dict[str, dict[str, str]] = {}
        for row in reader:
            folder = row.get("folder") or ""
            if folder in rows:
                raise RosterError(f"{path}: the folder {folder!r} is listed twice")
            rows[folder] = {k: v or "" for k, v in row.items() if k is not None}
        columns += [c for c in BASE_COLUMNS if c not in columns]
        return cls(path, columns, rows)

    def folder_for(self, student: Student) -> tuple[str, str]:
        """(folder, "") for the student (their row's, else folder_name()), or ("", why) when another student's."""
        for folder, row in self.rows.items():
            if row.get("site") == student.site and row.get("site_id") == student.site_id:
                return folder, ""
        folder = folder_name(student)
        if (row := self.rows.get(folder)) is None:
            return folder, ""
        return "", (f"the folder {folder!r} belongs to {row.get('site')} id {row.get('site_id')!r} "
                    f"in {ROSTER}; import this student by hand")

    def record(self, folder: str, student: Student, lab: str | None = None, **fields: str) -> None:
        """Add or update the student's row; with lab, set that lab's fields (LAB_FIELDS)."""
        row = self.rows.setdefault(folder, {})
        row.update(folder=folder, site=student.site, site_id=student.site_id, name=student.name)
        if student.email or "email" not in row:
            row["email"] = student.email
        if lab is not None:
            self.columns += [f"{lab} {f}" for f in LAB_FIELDS if f"{lab} {f}" not in self.columns]
            row.update({f"{lab} {key}": value for key, value in fields.items()})

    def has_lab(self, folder: str, lab: str) -> bool:
        """Whether the folder's row says something about the lab already."""
        return any(self.rows.get(folder, {}).get(f"{lab} {f}") for f in LAB_FIELDS)

    def save(self) -> Path:
        """Write roster.csv (by rename), rows in folder order, every column kept."""
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=self.columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows({c: self.rows[folder].get(c, "") for c in self.columns} for folder in sorted(self.rows))
        return write_atomic(self.path, text.getvalue())
