"""The class folder, SUBMISSIONS/<student>/<lab>/kernel.cu (grader/README.md, section 9, `submissions.py`).  A folder
may have any name: it is only read, never handed to a shell or make."""

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from ..base.cliargs import UsageError

SOURCE = "kernel.cu"
#: The roster a course-site importer writes at the top of a class folder (not a student).
ROSTER = "roster.csv"
#: How deep below a student's folder the search for a misplaced kernel.cu goes.
SEARCH_DEPTH = 4


class ClassError(UsageError, ValueError):
    """A usage problem: no such student, no such lab, no submissions directory, a bad --out (exit 2)."""


def stray(name: str) -> str | None:
    """Why an entry of the submissions directory is no student (None: it may be one)."""
    return "hidden" if name.startswith(".") else \
        "an archive tool's folder (e.g. __MACOSX, left by zip on macOS)" if name.startswith("__") else None


#: What a printed name shows escaped: control characters (a newline, ESC) and the
#: bidirectional overrides and isolates, which could forge or reorder lines of a summary.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(name: str) -> str:
    """A folder name as printed: _UNPRINTABLE characters and bytes not UTF-8 as \\xNN or \\uNNNN."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


#: A cell starting with one of these is a formula to Excel, LibreOffice and Google Sheets
#: (OWASP, "CSV Injection": https://owasp.org/www-community/attacks/CSV_Injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def sheet_cell(text: str) -> str:
    """A student's text as a CSV cell no spreadsheet evaluates: after a "'" when it starts with FORMULA_START."""
    return "'" + text if text[:1] in FORMULA_START else text


@dataclass
class Students:
    """The students of a submissions directory (sorted) and what was skipped there, and why."""
    students: list[str]
    notes: list[str] = field(default_factory=list)


def read_students(submissions: Path, only: str | None = None) -> Students:
    """The student folders of `submissions`, or [only] after checking it is one.  ClassError: no such folder, a
    file (an archive?), no student folder, `only` not among them."""
    if not submissions.exists():
        raise ClassError(f"{submissions}: no such directory (the submissions: one folder per student)")
    if not submissions.is_dir():
        hint = " (an archive? unpack it first)" if submissions.suffix.lower() in (".zip", ".tar", ".gz", ".tgz") \
            else ""
        raise ClassError(f"{submissions} is a file, not a directory of submissions (one folder per "
                         f"student){hint}")
    names, notes = [], []
    for entry in sorted(submissions.iterdir(), key=lambda p: p.name):
        if entry.name == ROSTER and entry.is_file():
            continue
        why = stray(entry.name)
        if why is None and not entry.is_dir():
            why = "a file, not a student's folder"
        if why:
            notes.append(f"skipped {shown(entry.name)}: {why}")
            continue
        names.append(entry.name)
    if only is not None:
        if only not in names:
            same = [n for n in names if unicodedata.normalize("NFC", n) == unicodedata.normalize("NFC", only)]
            hint = (f"; the folder {shown(same[0])!r} is that name in another Unicode form: give it as it is written "
                    "there" if same else "")
            raise ClassError(f"no submissions for student {shown(only)!r} in {submissions} (a name of one of "
                             f"its student folders, as written){hint}")
        return Students([only], notes)
    if not names:
        raise ClassError(f"{submissions} holds no student folder (expected {submissions}/<student>/<lab>/"
                         f"{SOURCE}){'; ' + '; '.join(notes) if notes else ''}")
    return Students(names, notes)


def _walk(folder: Path, depth: int):
    """Files and folders under `folder`, at most `depth` levels down, stray entries left out."""
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError:
        return
    for entry in entries:
        if stray(entry.name):
            continue
        yield entry
        if entry.is_dir() and not entry.is_symlink() and depth > 1:
            yield from _walk(entry, depth - 1)


def near_miss(why: str) -> bool:
    """Whether find_source's why names something submitted in the wrong place or name."""
    return "; found " in why or why.endswith("is a folder, not a file")


def find_source(submissions: Path, student: str, lab: str) -> tuple[Path | None, str]:
    """(SUBMISSIONS/student/lab/kernel.cu, "") when it is a file, else (None, why), naming a near miss when there
    is one: "found Kernel.cu", "kernel.cu is a folder", "found alice/alice/01-naive-5pt/kernel.cu: it must be ..."."""
    folder = submissions / student
    expected = folder / lab / SOURCE
    if expected.is_file():
        return expected, ""
    who = shown(student)
    want = f"{who}/{lab}/{SOURCE}"
    if expected.is_dir():
        return None, f"{want} is a folder, not a file"
    lab_folder = folder / lab
    if lab_folder.is_dir():
        near = [p for p in sorted(lab_folder.iterdir(), key=lambda p: p.name)
                if p.is_file() and not stray(p.name)
                and (p.name.lower() == SOURCE or p.name.lower().startswith(SOURCE + ".") or p.suffix == ".cu")]
        if near:
            return None, f"{want} not found; found {shown(near[0].name)}: the file must be named {SOURCE}"
        return None, f"{want} not found (the folder {who}/{lab} holds no {SOURCE})"
    entries = list(_walk(folder, SEARCH_DEPTH))
    if hit := next((e for e in entries if e.is_file() and e.name.lower() == SOURCE
                    and e.parent.name.lower() == lab.lower()), None):
        return None, f"{want} not found; found {shown(hit.relative_to(submissions).as_posix())}: it must be {want}"
    if hit := next((e for e in entries if e.is_dir() and e.name.lower() == lab.lower()), None):
        return None, (f"{want} not found; found the folder {shown(hit.relative_to(submissions).as_posix())}: it must "
                      f"be {who}/{lab}")
    if (folder / SOURCE).is_file():
        return None, f"{want} not found; found {who}/{SOURCE}: put it in the lab's folder, {want}"
    return None, f"no submission: {want} not found"
