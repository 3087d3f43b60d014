"""What the course sites' modules share (grader/README.md, section 9): the export (a .zip or its folder) read
without extracting (checked relative paths; unsafe entries, links and names not UTF-8 refused, each with why;
an unflagged zip name valid as UTF-8 read so, as rubyzip writes it), submissions (Parsed), groups, the kernel.cu
chosen (choose_kernel) and what a gradebook writer is handed (Book).  Sizes are checked as files are read."""

import contextlib
import csv
import io
import os
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from ...grading.build import MAX_SOURCE_BYTES
from ..submissions import SOURCE
from .roster import Student

_ARCHIVE = (".zip", ".tar", ".tgz", ".gz", ".7z", ".rar")
#: A near miss --accept takes: kernel.cu, case-folded, with a copy's mark ("kernel (1).cu",
#: "kernel-2.cu", "kernel_2.cu", "kernel copy.cu") or ".txt" after it.
_ACCEPTABLE = re.compile(r"^kernel(?:[ _-]?\(\d+\)| ?-? ?copy(?: \d+)?|[-_]\d+)?\.cu(?:\.txt)?$")
#: Bytes an archive may have for --accept to look inside it (a kernel.cu and little else).
MAX_ARCHIVE_BYTES = 8 * MAX_SOURCE_BYTES


class ExportError(ValueError):
    """The export as a whole cannot be read: no such file or folder, not a zip, a damaged zip."""


class EntryError(ValueError):
    """One file of the export cannot be taken: over the size limit, or unreadable (the reason)."""


@dataclass(frozen=True)
class Entry:
    """One regular file of the export: '/'-separated relative path, and its size as claimed (checked when read)."""
    path: str
    size: int
    opener: Callable[[], contextlib.AbstractContextManager] = field(repr=False, compare=False)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.path.split("/"))

    def read(self, limit: int) -> bytes:
        """The file's bytes; EntryError when it has more than `limit` bytes or cannot be read."""
        if self.size > limit:
            raise EntryError(f"{self.size} bytes, over the {limit / (1 << 20):g} MiB limit")
        try:
            with self.opener() as f:
                data = f.read(limit + 1)
                if len(data) > limit:
                    raise EntryError(f"over the {limit / (1 << 20):g} MiB limit (its header said {self.size} bytes)")
                if len(data) < self.size:
                    raise EntryError(f"{len(data)} bytes where its header says {self.size}")
                return data
        except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, OSError) as err:
            raise EntryError(f"cannot be read ({err})") from None


@dataclass
class Export:
    """What an export holds: its files, the entries refused (path, why), the artefacts ignored."""
    entries: list[Entry]
    refused: list[tuple[str, str]]
    ignored: int = 0


def unsafe(path: str) -> str | None:
    """Why a '/'-separated entry name could not be extracted under a folder safely (None: it can)."""
    if path.startswith("/") or (len(path) > 1 and path[1] == ":" and path[0].isalpha()):
        return "an absolute path: would land outside --into"
    if "\\" in path:
        return "a backslash in the name (a Windows path): could land outside --into"
    parts = path.split("/")
    if ".." in parts:
        return "a '..' in the path: would land outside --into"
    if "." in parts or "" in parts:
        return "an empty or '.' component in the path"
    return None


def _artefact(parts: tuple[str, ...]) -> bool:
    """Whether a path is what archive tools leave beside the submissions (ignored, counted)."""
    return any(p.startswith(".") or p == "__MACOSX" for p in parts)


@contextlib.contextmanager
def open_export(path: Path) -> Iterator[Export]:
    """The export (a .zip or a folder), open while the block runs; ExportError when neither or unreadable."""
    path = Path(path)
    if path.is_dir():
        yield _read_folder(path)
        return
    if not path.exists():
        raise ExportError(f"{path}: no such file or folder (the export: the site's .zip or its unpacked folder)")
    try:
        archive = zipfile.ZipFile(path)
    except UnicodeDecodeError:
        raise ExportError(f"{path}: a member name is flagged UTF-8 but is not valid UTF-8 (a damaged or "
                          f"crafted archive); nothing imported") from None
    except (zipfile.BadZipFile, OSError) as err:
        raise ExportError(f"{path}: not a zip file the importer can read ({err}); give the .zip the "
                          f"site exported, or the folder it unpacks to") from None
    with archive:
        yield read_zip(archive)


def read_zip(archive: zipfile.ZipFile) -> Export:
    """What the zip holds (module docstring); the archive must stay open while its entries are read."""
    export = Export([], [])
    for info in archive.infolist():
        name, why = info.filename, None
        if not info.flag_bits & 0x800 and not name.isascii():
            try:
                name = name.encode("cp437").decode("utf-8")
            except UnicodeDecodeError:
                why = (f"the name is not valid UTF-8 and not flagged as UTF-8 (cp437 would read it as {name!r}); "
                       f"unzip the export and import the folder, after renaming it")
        if why is None and info.is_dir():
            continue
        why = why or unsafe(name) or (stat.S_ISLNK(info.external_attr >> 16)
                                      and "a symbolic link: could point outside --into")
        if why:
            export.refused.append((name, why))
        elif _artefact(tuple(name.split("/"))):
            export.ignored += 1
        else:
            export.entries.append(Entry(name, info.file_size, lambda info=info: archive.open(info)))
    return export


def _read_folder(root: Path) -> Export:
    export = Export([], [])

    def unreadable(err: OSError) -> None:
        export.refused.append((Path(err.filename).relative_to(root).as_posix(), f"cannot be read ({err.strerror})"))

    for folder, dirnames, filenames in os.walk(root, onerror=unreadable, followlinks=False):
        for name in sorted(dirnames + filenames):
            rel, full = (Path(folder).relative_to(root) / name).as_posix(), Path(folder) / name
            info = full.lstat()
            skip = _artefact((name,))               # the folders above it are not: they were pruned
            why = ("the name is not valid UTF-8" if any("\ud800" <= c <= "\udfff" for c in rel) else
                   "a symbolic link: could point outside --into" if stat.S_ISLNK(info.st_mode) else
                   "not a regular file" if not (skip or name in dirnames or stat.S_ISREG(info.st_mode)) else "")
            if why:
                export.refused.append((rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), why))
            elif skip:
                export.ignored += 1
            elif name not in dirnames:
                export.entries.append(Entry(rel, info.st_size, lambda full=full: os.fdopen(
                    os.open(full, os.O_RDONLY | os.O_NOFOLLOW), "rb")))
            if (why or skip) and name in dirnames:
                dirnames.remove(name)
    return export


class GroupsError(ValueError):
    """A group file cannot be read, or is not the site's (the message says which and why)."""


@dataclass
class Groups:
    """A site's groups: names and members by key (group id, else name), each member's key by site id."""
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
        if member.site_id not in self.of:
            self.members.setdefault(key, []).append(member)
            self.of[member.site_id] = key


def read_csv_rows(path: Path, needed: tuple[str, ...], what: str) -> list[dict[str, str]]:
    """The rows of a UTF-8 CSV whose header has every column of needed; GroupsError naming `what` otherwise."""
    try:
        reader = csv.DictReader(io.StringIO(Path(path).read_text(encoding="utf-8-sig")))
    except (OSError, UnicodeDecodeError) as err:
        raise GroupsError(f"{path}: cannot be read ({err}); give {what}") from None
    lacking = [c for c in needed if c not in [c.strip() for c in reader.fieldnames or []]]
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
    """What a site's gradebook(book) is handed: labs, their facts, (folder, roster row) of the site's students, and
    for (folder, row, lab) its report (a group's for a member), Gradescope file ("": none) and gradebook cell."""
    labs: list[str]
    facts: dict[str, dict]
    rows: list[tuple[str, dict]]
    report: Callable[[str, dict, str], dict | None]
    results: Callable[[str, dict, str], str]
    cell: Callable[[str, dict, str], str]


@dataclass
class Submission:
    """One submission: its files as (path within it, entry), late (None: not said), a group's members."""
    student: Student
    late: bool | None = None
    files: list[tuple[str, Entry]] = field(default_factory=list)
    members: list[Student] = field(default_factory=list)


@dataclass
class Parsed:
    """An export read as a site's: submissions by (site, site id); (export path, why) skipped or noted."""
    submissions: dict[tuple[str, str], Submission] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)

    def add(self, student: Student, late: bool | None, path: str | None, entry: Entry | None,
            members: list[Student] | None = None) -> None:
        """Add a file (entry None: only the student) to the student's submission."""
        sub = self.submissions.setdefault((student.site, student.site_id), Submission(student, late))
        sub.members = members if members is not None else sub.members
        sub.late = True if late else sub.late
        if entry is not None:
            sub.files.append((path, entry))


def unwrap(export: Export, looks_right: Callable[[Entry], object]) -> None:
    """Strip wrapper folders (a zip of the export's folder) until an entry looks right at the top."""
    for _ in range(2):
        if not export.entries or any(looks_right(e) for e in export.entries):
            return
        if len({e.parts[0] for e in export.entries}) != 1 or any(len(e.parts) == 1 for e in export.entries):
            return
        export.entries = [Entry("/".join(e.parts[1:]), e.size, e.opener) for e in export.entries]


@dataclass
class Choice:
    """A submission's kernel.cu: entry (None: none taken; ambiguous: several could be), and what to say."""
    entry: Entry | None
    note: str = ""
    ambiguous: bool = False


def choose_kernel(sub: Submission, renamed: re.Pattern | None, accept: bool, site: str) -> Choice:
    """The one kernel.cu (or `renamed`) at any depth of the submission; none when two or more.  Without one, the
    near misses named, or with accept the one taken: a name matching _ACCEPTABLE, or a .zip holding one kernel.cu."""
    exact = [(p, e) for p, e in sub.files if p.split("/")[-1] == SOURCE]
    again = [(p, e) for p, e in sub.files if renamed is not None and renamed.match(p.split("/")[-1])]
    found = exact + again
    if len(found) == 1:
        path, entry = found[0]
        return Choice(entry, f"{site} renamed a re-upload {path}" if again else
                      (f"found at {path}" if path != SOURCE else ""))
    if found:
        return Choice(None, f"{len(found)} files could be the kernel.cu ({', '.join(e.path for _, e in found)}): "
                            f"none taken; put the right one in place by hand", ambiguous=True)
    near = [(p.split("/")[-1].lower(), e) for p, e in sub.files]
    near = [(n, e) for n, e in near if n == SOURCE or n.startswith(SOURCE + ".") or n.endswith((".cu",) + _ARCHIVE)]
    if not near:
        return Choice(None, f"no {SOURCE} among its {len(sub.files)} file(s)" if sub.files
                      else f"no {SOURCE}: no file submitted")
    if not accept:
        archive = " (an archive is not opened)" if any(n.endswith(_ARCHIVE) for n, _ in near) else ""
        return Choice(None, f"no {SOURCE}; found {', '.join(e.path for _, e in near)}: the file must be named "
                            f"{SOURCE}{archive}; --accept takes it")
    taken, why = [], []
    for name, e in near:
        if _ACCEPTABLE.match(name):
            taken.append(e)
            continue
        if not name.endswith(".zip"):
            why.append(f"{e.path}: not a kernel.cu under another name")
            continue
        try:
            inner = read_zip(zipfile.ZipFile(io.BytesIO(e.read(MAX_ARCHIVE_BYTES))))
        except (EntryError, zipfile.BadZipFile, OSError, UnicodeDecodeError) as err:
            why.append(f"{e.path}: cannot be read as a zip ({err})")
            continue
        kernels = [k for k in inner.entries if k.parts[-1] == SOURCE]
        refused = [f"{e.path}: {p}: {no}" for p, no in inner.refused if p.split("/")[-1] == SOURCE]
        if refused or len(kernels) != 1:
            why += refused[:1] or [f"{e.path}: holds {len(kernels)} files named {SOURCE}, not one"]
        else:
            taken.append(Entry(f"{e.path}/{kernels[0].path}", kernels[0].size, kernels[0].opener))
    if len(taken) == 1:
        return Choice(taken[0], f"accepted the near miss {taken[0].path} (--accept)")
    if taken:
        return Choice(None, f"--accept: {len(taken)} near misses ({', '.join(e.path for e in taken)}): none "
                            "taken; put the right one in place by hand", ambiguous=True)
    return Choice(None, f"--accept: nothing to take ({'; '.join(why)})")
