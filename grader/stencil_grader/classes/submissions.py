"""Reading a submissions directory: who the students are, and where each lab's kernel.cu is.

    SUBMISSIONS/<student>/<lab>/kernel.cu      (one folder per student, mirroring starter/)

What a course's upload tools leave beside the students is skipped, each with a
note for the class summary: hidden entries (`.git`, `.DS_Store`), archive
artefacts (`__MACOSX`, any name starting with `__`), loose files (`notes.txt`,
an unpacked `alice.zip`), and the output folder when it lies inside.

A lab without its kernel.cu is "missing"; when something close was submitted
instead, the message names it, so that the instructor (and the student) sees
why: `Kernel.cu` or `kernel.cu.txt` beside the right place, a folder named
kernel.cu, the file one folder too deep (an archive's own top folder) or
directly in the student's folder, a lab folder spelled with other capitals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

SOURCE = "kernel.cu"
#: How deep below a student's folder the search for a misplaced kernel.cu goes.
SEARCH_DEPTH = 4


class ClassError(ValueError):
    """A usage problem: no such student, no such lab, no submissions directory, a bad --out."""


def stray(name: str) -> str | None:
    """Why an entry of the submissions directory is no student (None: it may be one)."""
    if name.startswith("."):
        return "hidden"
    if name.startswith("__"):
        return "an archive tool's folder (e.g. __MACOSX, left by zip on macOS)"
    return None


@dataclass
class Roster:
    """The students of a submissions directory (sorted) and what was skipped there, and why."""

    root: Path
    students: list[str]
    notes: list[str] = field(default_factory=list)


def read_roster(submissions: Path, only: str | None = None, skip: Path | None = None) -> Roster:
    """The student folders of `submissions`, or [only] after checking it is one of them.

    skip: a folder to leave out (the output folder, when it lies inside).
    Raises ClassError: no such directory; a file instead of a directory (an archive: unpack
    it first); no student folder at all; `only` not among the students.
    """
    if not submissions.exists():
        raise ClassError(f"{submissions}: no such directory (the submissions: one folder per student)")
    if not submissions.is_dir():
        hint = " (an archive? unpack it first)" if submissions.suffix.lower() in (".zip", ".tar", ".gz", ".tgz") \
            else ""
        raise ClassError(f"{submissions} is a file, not a directory of submissions (one folder per "
                         f"student){hint}")
    names, notes = [], []
    for entry in sorted(submissions.iterdir(), key=lambda p: p.name):
        if skip is not None and entry.resolve() == skip:
            continue
        why = stray(entry.name)
        if why is None and not entry.is_dir():
            why = "a file, not a student's folder"
        if why:
            notes.append(f"skipped {entry.name}: {why}")
            continue
        names.append(entry.name)
    if only is not None:
        if only not in names:
            raise ClassError(f"no submissions for student {only!r} in {submissions}")
        return Roster(submissions, [only], notes)
    if not names:
        raise ClassError(f"{submissions} holds no student folder (expected {submissions}/<student>/<lab>/"
                         f"{SOURCE}){'; ' + '; '.join(notes) if notes else ''}")
    return Roster(submissions, names, notes)


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


def find_source(submissions: Path, student: str, lab: str) -> tuple[Path | None, str]:
    """(SUBMISSIONS/student/lab/kernel.cu, "") when it is a file; else (None, why), naming a near
    miss when there is one:

        "found Kernel.cu: the file must be named kernel.cu"
        "kernel.cu is a folder, not a file"
        "found alice/alice/01-naive-5pt/kernel.cu: it must be alice/01-naive-5pt/kernel.cu"
    """
    folder = submissions / student
    expected = folder / lab / SOURCE
    if expected.is_file():
        return expected, ""
    shown = f"{student}/{lab}/{SOURCE}"
    if expected.is_dir():
        return None, f"{shown} is a folder, not a file"
    lab_folder = folder / lab
    if lab_folder.is_dir():
        near = [p for p in sorted(lab_folder.iterdir(), key=lambda p: p.name)
                if p.is_file() and not stray(p.name)
                and (p.name.lower() == SOURCE or p.name.lower().startswith(SOURCE + ".") or p.suffix == ".cu")]
        if near:
            return None, f"{shown} not found; found {near[0].name}: the file must be named {SOURCE}"
        return None, f"{shown} not found (the folder {student}/{lab} holds no {SOURCE})"
    entries = list(_walk(folder, SEARCH_DEPTH))
    for entry in entries:
        if entry.is_file() and entry.name.lower() == SOURCE and entry.parent.name.lower() == lab.lower():
            rel = entry.relative_to(submissions).as_posix()
            return None, f"{shown} not found; found {rel}: it must be {shown}"
    for entry in entries:
        if entry.is_dir() and entry.name.lower() == lab.lower():
            rel = entry.relative_to(submissions).as_posix()
            return None, f"{shown} not found; found the folder {rel}: it must be {student}/{lab}"
    loose = folder / SOURCE
    if loose.is_file():
        return None, f"{shown} not found; found {student}/{SOURCE}: put it in the lab's folder, {shown}"
    return None, f"no submission: {shown} not found"

