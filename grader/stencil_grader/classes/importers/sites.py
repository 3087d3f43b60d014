"""The three course sites' export layouts (cited in importers/__init__.py), read into submissions:
who submitted, whether late, which files; and which of a submission's files is the kernel.cu."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..submissions import SOURCE
from .export import MAX_METADATA_BYTES, Entry, EntryError, Export, ExportError
from .metadata_yml import MetadataError, read_submitters
from .roster import Student

SITES = ("canvas", "moodle", "gradescope")

# Canvas: <name>[_LATE]_<user id>_<file id>_<file name>, the name [[:word:]] characters only, no
# "_<digits>_" in it (Canvas removes those), so the first "_[LATE_]<id>_<id>_" ends it.  Under
# anonymous grading: [LATE_]anon_<anonymous id>_<file id>_<file name>.  "late" is LATE in
# today's Canvas, lower case in older ones (which lower-cased the whole prefix).
_CANVAS_FILE = re.compile(r"^(?:(?P<name>.*?)_)??(?:(?P<late>LATE|late)_)?(?P<id>anon_[A-Za-z0-9]+|\d+)"
                          r"_(?P<file_id>\d+)_(?P<file>.+)$", re.S)
_CANVAS_ONLINE = re.compile(r"^(?:(?P<name>.*?)_)??(?:(?P<late>LATE|late)_)?(?P<id>anon_[A-Za-z0-9]+|\d+)"
                            r"_(?P<kind>text|link)\.html$", re.S)
# Moodle: <Full Name>_<participant id>_assignsubmission_<plugin>, then "" (4.1+), "_" (3.1-4.0) or
# "_<file name>" (no folders); Moodle turns "_" in names into spaces, so the name has none.
_MOODLE = re.compile(r"^(?P<name>[^_]*)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)(?:_(?P<rest>.*))?$", re.S)
_CANVAS_RENAMED = re.compile(r"^kernel-\d+\.cu$")      # Canvas's name for a re-uploaded kernel.cu
_ARCHIVE = (".zip", ".tar", ".tgz", ".gz", ".7z", ".rar")
GRADESCOPE_METADATA = "submission_metadata.yml"


@dataclass
class Submission:
    """One student's files for the lab: (path within the submission, entry), and whether late
    (None: the site does not say)."""

    student: Student
    late: bool | None = None
    files: list[tuple[str, Entry]] = field(default_factory=list)


@dataclass
class Parsed:
    """An export read as a site's layout: the submissions by student, and what was not a
    submission file, as (export path, why): skipped (counted as not imported), or noted."""

    submissions: dict[tuple[str, str], Submission] = field(default_factory=dict)    # by (site, site id)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)

    def add(self, student: Student, late: bool | None, path: str | None, entry: Entry | None) -> None:
        """Add a file (or, with entry None, only the student) to the student's submission."""
        sub = self.submissions.setdefault((student.site, student.site_id), Submission(student, late))
        if late:
            sub.late = True
        if entry is not None:
            sub.files.append((path, entry))


def _unwrap(export: Export, looks_right) -> None:
    """Strip wrapper folders (a zip of the export's folder) until an entry looks right at the top."""
    for _ in range(2):
        if any(looks_right(e) for e in export.entries) or not export.entries:
            return
        tops = {e.parts[0] for e in export.entries if len(e.parts) > 1}
        if len(tops) != 1 or any(len(e.parts) == 1 for e in export.entries):
            return
        export.strip(1)


def _canvas(export: Export) -> Parsed:
    parsed = Parsed()
    _unwrap(export, lambda e: len(e.parts) == 1 and (_CANVAS_FILE.match(e.path) or _CANVAS_ONLINE.match(e.path)))
    for e in export.entries:
        m = _CANVAS_ONLINE.match(e.path) if len(e.parts) == 1 else None
        if m:
            student = Student("canvas", m["id"], m["name"] or "")
            parsed.add(student, bool(m["late"]), None, None)
            parsed.notes.append((e.path, f"an online {'text entry' if m['kind'] == 'text' else 'URL'}, not a file"))
            continue
        m = _CANVAS_FILE.match(e.path) if len(e.parts) == 1 else None
        if not m:
            parsed.skipped.append((e.path, "not a Canvas file name (<name>_<user id>_<file id>_<file name>)"))
            continue
        student = Student("canvas", m["id"], m["name"] or "")
        parsed.add(student, bool(m["late"]), m["file"], e)
    return parsed


def _moodle(export: Export) -> Parsed:
    parsed = Parsed()
    _unwrap(export, lambda e: _MOODLE.match(e.parts[0]))
    for e in export.entries:
        m = _MOODLE.match(e.parts[0])
        if not m or (len(e.parts) == 1 and not m["rest"]) or (len(e.parts) > 1 and m["rest"]):
            parsed.skipped.append((e.path, "not a Moodle submission (<Full Name>_<id>_assignsubmission_file, "
                                           "a folder, or ..._file_<file name>)"))
            continue
        student = Student("moodle", m["id"], m["name"])
        if m["plugin"] != "file":
            parsed.notes.append((e.path, f"the {m['plugin']} plugin's part of the submission (not a file): ignored"))
            continue
        path = m["rest"] if len(e.parts) == 1 else "/".join(e.parts[1:])
        parsed.add(student, None, path, e)
    return parsed


def _gradescope(export: Export) -> Parsed:
    found = sorted((e for e in export.entries if e.parts[-1] == GRADESCOPE_METADATA), key=lambda e: len(e.parts))
    if not found:
        raise ExportError(f"no {GRADESCOPE_METADATA} in the export (Gradescope's \"Export Submissions\" "
                          f"puts one beside the submission_<id> folders)")
    if len(found) > 1 and len(found[1].parts) == len(found[0].parts):
        raise ExportError(f"two {GRADESCOPE_METADATA} files ({found[0].path}, {found[1].path}): import one "
                          f"assignment's export at a time")
    try:
        text = found[0].read(MAX_METADATA_BYTES).decode("utf-8")
        records = read_submitters(text)
    except (EntryError, UnicodeDecodeError, MetadataError) as err:
        raise ExportError(f"{found[0].path}: {err}") from None
    base = found[0].parts[:-1]                      # assignment_<id>_export/, or the top
    parsed = Parsed()
    seen = set()
    for e in export.entries:
        parts = e.parts[len(base):] if e.parts[:len(base)] == base else ()
        if parts == (GRADESCOPE_METADATA,):
            continue
        if len(parts) < 2 or parts[0] not in records:
            parsed.skipped.append((e.path, f"not in a submission folder that {GRADESCOPE_METADATA} names"))
            continue
        seen.add(parts[0])
        for person in records[parts[0]]:
            student = _gradescope_student(person)
            if student:
                parsed.add(student, None, "/".join(parts[1:]), e)
    for key, people in records.items():
        for person in people:
            student = _gradescope_student(person)
            if student is None:
                parsed.skipped.append((key, f"a submitter with neither sid nor email in {GRADESCOPE_METADATA}"))
            elif key not in seen:
                parsed.add(student, None, None, None)
        if not people:
            parsed.notes.append((key, f"no submitter in {GRADESCOPE_METADATA}"))
    return parsed


def _gradescope_student(person: dict[str, str]) -> Student | None:
    site_id = person["sid"] or person["email"]
    return Student("gradescope", site_id, person["name"], person["email"]) if site_id else None


def parse(site: str, export: Export) -> Parsed:
    """The export read as `site`'s layout.  ExportError when nothing in it has that layout (the
    wrong --from, or not an export), or (Gradescope) its metadata cannot be read."""
    parsed = {"canvas": _canvas, "moodle": _moodle, "gradescope": _gradescope}[site](export)
    if not parsed.submissions:
        example = f" (e.g. {parsed.skipped[0][0]!r})" if parsed.skipped else ""
        raise ExportError(f"nothing in it is laid out as a {site.capitalize()} export{example}; is --from right?")
    return parsed


@dataclass
class Choice:
    """Which file of a submission is its kernel.cu: `entry` (None: none; ambiguous: because two
    or more files could be), its path in the export, and what to say."""

    entry: Entry | None
    path: str = ""
    note: str = ""
    ambiguous: bool = False


def choose_kernel(sub: Submission, site: str) -> Choice:
    """The submission's kernel.cu: the one file named kernel.cu (Canvas: or kernel-N.cu, its name
    for a re-uploaded kernel.cu), at any depth of the submission.  Two or more such files: none
    (the importer never guesses which one the student meant).  None: the near misses named."""
    exact = [(p, e) for p, e in sub.files if p.split("/")[-1] == SOURCE]
    renamed = [(p, e) for p, e in sub.files if site == "canvas" and _CANVAS_RENAMED.match(p)]
    found = exact + renamed
    if len(found) == 1:
        path, entry = found[0]
        note = f"Canvas renamed a re-upload {path}" if found == renamed else \
            (f"found at {path}" if path != SOURCE else "")
        return Choice(entry, entry.path, note)
    if found:
        names = ", ".join(e.path for _, e in found)
        return Choice(None, note=f"{len(found)} files could be the kernel.cu ({names}): none taken; "
                                 f"put the right one in place by hand", ambiguous=True)
    near = [e.path for p, e in sub.files if _near_miss(p.split("/")[-1])]
    if near:
        archive = " (an archive is not opened)" if any(p.lower().endswith(_ARCHIVE) for p in near) else ""
        return Choice(None, note=f"no {SOURCE}; found {', '.join(near)}: the file must be named {SOURCE}{archive}")
    if sub.files:
        return Choice(None, note=f"no {SOURCE} among its {len(sub.files)} file(s)")
    return Choice(None, note=f"no {SOURCE}: no file submitted")


def _near_miss(name: str) -> bool:
    lower = name.lower()
    return lower == SOURCE or lower.startswith(SOURCE + ".") or lower.endswith(".cu") or lower.endswith(_ARCHIVE)
