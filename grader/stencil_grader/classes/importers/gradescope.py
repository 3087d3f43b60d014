"""Gradescope: its "Export Submissions" layout, its groups, and the per-lab index of its files.

Everything Gradescope-shaped in the importer and the gradebooks is here; sites.py registers the
module (the autograder that serves the grades is gsautograder.py and gsserve.py).

The export: a zip (assignment_<id>_export/) of submission_<id>/ folders holding the files as
uploaded, and submission_metadata.yml naming each folder's submitters (:name:, :sid:, :email:),
several for a group.  A student's identifier is the SID, else the e-mail.  Sources:
https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/ (the submission's
users: name, email, several for a group),
https://guides.gradescope.com/hc/en-us/articles/22066784117901-Grading-Online-Assignments
("Exporting Submission Data"), and the reader of that export in otter-grader,
https://github.com/ucbds-infra/otter-grader/blob/master/otter/grade/metadata.py
(GradescopeParser: submission_metadata.yml, ":submitters", ":name").  The YAML subset is read by
metadata_yml.py.  RULES: the names the export uses, as a table.

Groups need no file: a submission with several submitters is one group, imported once into a
folder of its own ("<the members' names> (group:<submission id>)"), graded once, and each member
gets that grading (roster.csv: each member's "<lab> group").  The submission id is kept in the
roster ("<lab> file" is "submission_<id>/..."), so that the autograder serves a grade only to
the very submission that was graded (submission_id).

The gradebook: OUT/gradebook/gradescope-<lab>.csv, each Gradescope student's folder, SID (or
e-mail), e-mail and name beside the score and the results.json path (relative to OUT) that
serves them: the lookup an autograder serving the files needs.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..submissions import sheet_cell
from .common import GROUP_PREFIX, Book, Groups, Parsed, csv_text
from .export import MAX_METADATA_BYTES, EntryError, Export, ExportError
from .metadata_yml import MetadataError, read_submitters
from .roster import Student

NAME = "gradescope"
METADATA = "submission_metadata.yml"
RULES = {
    "wrapper": (r"assignment_\d+_export", "the export's top folder"),
    "submission": (r"submission_(\d+)", "a submission's folder; the digits are Gradescope's submission id"),
}
_SUBMISSION = re.compile(rf"^{RULES['submission'][0]}$")
HEAD = ("folder", "site_id", "email", "name", "score", "results")


def submission_id(path_in_export: str) -> str:
    """The submission id of a file's path in the export ("[assignment_<id>_export/]submission_<id>/..."),
    "" if none."""
    for part in path_in_export.split("/")[:2]:
        m = _SUBMISSION.match(part)
        if m:
            return m.group(1)
    return ""


def read_groups(path: Path) -> Groups:
    """Gradescope's groups are in the export itself (module docstring): no file is read."""
    raise ExportError(f"--groups {path}: Gradescope's export names each group's members itself "
                      f"({METADATA}); give no --groups")


def parse(export: Export, groups: Groups | None) -> Parsed:
    """The export read as Gradescope's (module docstring); ExportError without a readable metadata file."""
    found = sorted((e for e in export.entries if e.parts[-1] == METADATA), key=lambda e: len(e.parts))
    if not found:
        raise ExportError(f"no {METADATA} in the export (Gradescope's \"Export Submissions\" "
                          f"puts one beside the submission_<id> folders)")
    if len(found) > 1 and len(found[1].parts) == len(found[0].parts):
        raise ExportError(f"two {METADATA} files ({found[0].path}, {found[1].path}): import one "
                          f"assignment's export at a time")
    try:
        records = read_submitters(found[0].read(MAX_METADATA_BYTES).decode("utf-8"))
    except (EntryError, UnicodeDecodeError, MetadataError) as err:
        raise ExportError(f"{found[0].path}: {err}") from None
    base = found[0].parts[:-1]                      # assignment_<id>_export/, or the top
    parsed = Parsed()
    owners: dict[str, tuple[Student, list[Student]]] = {}
    for key, people in records.items():
        students = []
        for person in people:
            student = _student(person)
            if student is None:
                parsed.skipped.append((key, f"a submitter with neither sid nor email in {METADATA}"))
            else:
                students.append(student)
        if not people:
            parsed.notes.append((key, f"no submitter in {METADATA}"))
        if len(students) > 1:
            name = ", ".join(s.name or s.site_id for s in students)
            owners[key] = (Student(NAME, GROUP_PREFIX + (submission_id(key) or key), name), students)
        elif students:
            owners[key] = (students[0], [])
    seen = set()
    for e in export.entries:
        parts = e.parts[len(base):] if e.parts[:len(base)] == base else ()
        if parts == (METADATA,):
            continue
        if len(parts) < 2 or parts[0] not in records:
            parsed.skipped.append((e.path, f"not in a submission folder that {METADATA} names"))
            continue
        seen.add(parts[0])
        if parts[0] in owners:
            student, members = owners[parts[0]]
            sub = parsed.add(student, None, "/".join(parts), e)
            sub.members, sub.submission_id = members, submission_id(parts[0])
    for key, (student, members) in owners.items():
        if key not in seen:
            sub = parsed.add(student, None, None, None)
            sub.members = members
    return parsed


def _student(person: dict[str, str]) -> Student | None:
    site_id = person["sid"] or person["email"]
    return Student(NAME, site_id, person["name"], person["email"]) if site_id else None


def gradebook(book: Book) -> tuple[dict[str, str], list[str]]:
    """({"gradescope-<lab>.csv": text} of each lab (module docstring), [])."""
    written = {}
    for lab in book.labs:
        lines = [list(HEAD)]
        for folder, row in book.rows:
            lines.append([sheet_cell(folder), sheet_cell(row["site_id"]), sheet_cell(row.get("email", "")),
                          sheet_cell(row.get("name", "")), book.cell(folder, row, lab), book.results(folder, row, lab)])
        written[f"gradescope-{lab}.csv"] = csv_text(lines)
    return written, []
