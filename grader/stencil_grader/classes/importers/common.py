"""What the course sites' modules share: a submission (who, late, files; a group's members), an
export read as submissions (Parsed), groups read from a site's group file, the kernel.cu chosen
among a submission's files, and the helper a site's gradebook writer is handed (Book)."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..submissions import SOURCE
from .export import MAX_KERNEL_BYTES, Entry, EntryError, Export, unsafe
from .roster import GROUP_PREFIX, Student  # noqa: F401  (GROUP_PREFIX: the sites use it from here)

_ARCHIVE = (".zip", ".tar", ".tgz", ".gz", ".7z", ".rar")


class GroupsError(ValueError):
    """A group file cannot be read, or is not the site's (the message says which and why)."""


@dataclass
class Groups:
    """A site's groups: each group's name and members by key (the site's group id, else its
    name), and each member's group by their site id.  path: the file they came from."""

    path: Path
    names: dict[str, str] = field(default_factory=dict)
    members: dict[str, list[Student]] = field(default_factory=dict)
    of: dict[str, str] = field(default_factory=dict)

    def add(self, key: str, name: str, member: Student) -> None:
        """member is in the group key (named name); a member listed in two groups: GroupsError."""
        if self.of.get(member.site_id, key) != key:
            raise GroupsError(f"{self.path}: {member.site} id {member.site_id} is in two groups "
                              f"({self.names[self.of[member.site_id]]!r} and {name!r})")
        self.names[key] = name
        self.members.setdefault(key, [])
        if member.site_id not in self.of:
            self.members[key].append(member)
            self.of[member.site_id] = key

    def group_student(self, key: str) -> Student:
        """The group as the roster keeps it: site id "group:<key>", its name."""
        site = self.members[key][0].site if self.members.get(key) else ""
        return Student(site, GROUP_PREFIX + key, self.names[key])

    def members_of(self, student: Student) -> list[Student]:
        """The members of a group student (group_student), [] for anyone else."""
        if not student.site_id.startswith(GROUP_PREFIX):
            return []
        return list(self.members.get(student.site_id[len(GROUP_PREFIX):], []))


def read_csv_rows(path: Path, needed: tuple[str, ...], what: str) -> list[dict[str, str]]:
    """The rows of a CSV file (UTF-8, a BOM allowed) whose header has every column of needed.
    GroupsError naming what the file should have been otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise GroupsError(f"{path}: cannot be read ({err}); give {what}") from None
    reader = csv.DictReader(io.StringIO(text))
    columns = [c.strip() for c in reader.fieldnames or []]
    lacking = [c for c in needed if c not in columns]
    if lacking:
        raise GroupsError(f"{path}: no column {', '.join(lacking)} in its header: give {what}")
    return [{(k or "").strip(): (v or "") for k, v in row.items()} for row in reader]


def csv_text(rows: list[list]) -> str:
    """rows as CSV (RFC 4180: CRLF, and a cell holding CR or LF quoted)."""
    text = io.StringIO()
    csv.writer(text).writerows(rows)
    return text.getvalue()


@dataclass
class Book:
    """What a site's gradebook writer is handed (classfiles.site_gradebooks): the labs and their
    facts ({"title", "points", "bonus"}), the roster rows of the site's students (folder, row),
    the report behind a student's lab (groups resolved), its Gradescope file relative to OUT ("":
    none), and the gradebook cell (near misses and --missing-as-zero resolved)."""

    labs: list[str]
    facts: dict[str, dict]
    rows: list[tuple[str, dict]]
    report: Callable[[str, dict, str], dict | None]
    results: Callable[[str, dict, str], str]
    cell: Callable[[str, dict, str], str]


@dataclass
class Submission:
    """One submission's files for the lab: (path within the submission, entry), whether late
    (None: the site does not say), a group's members (student is then the group: Groups),
    and the site's id of the submission where it gives one (Gradescope)."""

    student: Student
    late: bool | None = None
    files: list[tuple[str, Entry]] = field(default_factory=list)
    members: list[Student] = field(default_factory=list)
    submission_id: str = ""


@dataclass
class Parsed:
    """An export read as a site's layout: the submissions by student, and what was not a
    submission file, as (export path, why): skipped (counted as not imported), or noted."""

    submissions: dict[tuple[str, str], Submission] = field(default_factory=dict)    # by (site, site id)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)

    def add(self, student: Student, late: bool | None, path: str | None, entry: Entry | None,
            groups: Groups | None = None) -> Submission:
        """Add a file (or, with entry None, only the student) to the student's submission; a
        group's submission carries its members (groups.members_of)."""
        sub = self.submissions.setdefault((student.site, student.site_id), Submission(student, late))
        if groups is not None and not sub.members:
            sub.members = groups.members_of(student)
        if late:
            sub.late = True
        if entry is not None:
            sub.files.append((path, entry))
        return sub


def unwrap(export: Export, looks_right) -> None:
    """Strip wrapper folders (a zip of the export's folder) until an entry looks right at the top."""
    for _ in range(2):
        if any(looks_right(e) for e in export.entries) or not export.entries:
            return
        tops = {e.parts[0] for e in export.entries if len(e.parts) > 1}
        if len(tops) != 1 or any(len(e.parts) == 1 for e in export.entries):
            return
        export.strip(1)


@dataclass
class Choice:
    """Which file of a submission is its kernel.cu: `entry` (None: none; ambiguous: because two
    or more files could be), its path in the export, what to say, and whether it is (or was
    taken as) a near miss: something submitted under another name."""

    entry: Entry | None
    path: str = ""
    note: str = ""
    ambiguous: bool = False
    near_miss: bool = False


#: A near miss the instructor may accept (--accept): the file name, case-folded, is kernel.cu with
#: a copy's mark ("kernel (1).cu", "kernel-2.cu", "kernel_2.cu", "kernel copy.cu") or ".txt" after it.
_ACCEPTABLE = re.compile(r"^kernel(?:[ _-]?\(\d+\)| ?-? ?copy(?: \d+)?|[-_]\d+)?\.cu(?:\.txt)?$")
#: Bytes an archive may have for --accept to look inside it (a kernel.cu and little else).
MAX_ARCHIVE_BYTES = 8 * MAX_KERNEL_BYTES


def choose_kernel(sub: Submission, renamed: re.Pattern | None = None, accept: bool = False,
                  site: str = "the site") -> Choice:
    """The submission's kernel.cu: the one file named kernel.cu (or matching `renamed`, the site's
    name for a re-uploaded kernel.cu), at any depth of the submission.  Two or more such files:
    none (the importer never guesses which one the student meant).  None: the near misses
    named; with accept (the instructor said so: --accept), the one near miss taken, when there
    is exactly one: a file named kernel.cu but for case or a copy's mark (_ACCEPTABLE), or a .zip
    holding exactly one kernel.cu (read in memory, its names checked as the export's are)."""
    exact = [(p, e) for p, e in sub.files if p.split("/")[-1] == SOURCE]
    again = [(p, e) for p, e in sub.files if renamed is not None and renamed.match(p.split("/")[-1])]
    found = exact + again
    if len(found) == 1:
        path, entry = found[0]
        note = f"{site} renamed a re-upload {path}" if found == again else \
            (f"found at {path}" if path != SOURCE else "")
        return Choice(entry, entry.path, note)
    if found:
        names = ", ".join(e.path for _, e in found)
        return Choice(None, note=f"{len(found)} files could be the kernel.cu ({names}): none taken; "
                                 f"put the right one in place by hand", ambiguous=True)
    near = [(p, e) for p, e in sub.files if _near_miss(p.split("/")[-1])]
    if near and accept:
        return _accept(near)
    if near:
        names = ", ".join(e.path for _, e in near)
        archive = " (an archive is not opened)" if any(p.lower().endswith(_ARCHIVE) for p, _ in near) else ""
        return Choice(None, note=f"no {SOURCE}; found {names}: the file must be named {SOURCE}{archive}; "
                                 f"--accept takes it", near_miss=True)
    if sub.files:
        return Choice(None, note=f"no {SOURCE} among its {len(sub.files)} file(s)")
    return Choice(None, note=f"no {SOURCE}: no file submitted")


def _accept(near: list[tuple[str, Entry]]) -> Choice:
    """The one acceptable near miss among (path in the submission, entry) (choose_kernel), or why
    none was taken."""
    taken: list[tuple[Entry, str]] = []
    why = []
    for path, e in near:
        name = path.split("/")[-1]
        if _ACCEPTABLE.match(name.lower()):
            taken.append((e, e.path))
        elif name.lower().endswith(".zip"):
            inner, reason = _kernel_in_zip(e)
            if inner is not None:
                taken.append((inner, inner.path))
            else:
                why.append(f"{e.path}: {reason}")
        else:
            why.append(f"{e.path}: not a kernel.cu under another name")
    if len(taken) == 1:
        entry, path = taken[0]
        return Choice(entry, path, f"accepted the near miss {path} (--accept)", near_miss=True)
    if taken:
        return Choice(None, note=f"--accept: {len(taken)} near misses ({', '.join(p for _, p in taken)}): none "
                                 "taken; put the right one in place by hand", ambiguous=True, near_miss=True)
    return Choice(None, note=f"--accept: nothing to take ({'; '.join(why)})", near_miss=True)


def _kernel_in_zip(e: Entry) -> tuple[Entry | None, str]:
    """(an entry for the one kernel.cu inside the .zip e, "") or (None, why not)."""
    try:
        data = e.read(MAX_ARCHIVE_BYTES)
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (EntryError, zipfile.BadZipFile, OSError, UnicodeDecodeError) as err:
        return None, f"cannot be read as a zip ({err})"
    kernels = [i for i in infos if not i.is_dir() and i.filename.split("/")[-1] == SOURCE
               and not any(p.startswith(".") or p == "__MACOSX" for p in i.filename.split("/"))]
    if len(kernels) != 1:
        return None, f"holds {len(kernels)} files named {SOURCE}, not one"
    info = kernels[0]
    if why := unsafe(info.filename):
        return None, f"{info.filename}: {why}"
    if (info.external_attr >> 16) & 0o170000 == 0o120000:
        return None, f"{info.filename}: a symbolic link"
    return Entry(f"{e.path}/{info.filename}", info.file_size, lambda: archive.open(info)), ""


def _near_miss(name: str) -> bool:
    lower = name.lower()
    return lower == SOURCE or lower.startswith(SOURCE + ".") or lower.endswith(".cu") or lower.endswith(_ARCHIVE)
