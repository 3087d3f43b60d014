"""Gradescope: "Export Submissions" and its submission_metadata.yml; grader/README.md, section 9.  Sources:
https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/,
https://guides.gradescope.com/hc/en-us/articles/22066784117901-Grading-Online-Assignments and otter-grader's reader
(otter/grade/metadata.py): submission_<id>/ folders and Ruby Psych's YAML naming each one's :submitters: (:name:,
:sid:, :email:; several for a group).  A student's id is the SID, else the e-mail.  PyYAML's base resolver keeps
every scalar text (a SID "0042"); only :submitters: is read."""

import re

from ..submissions import sheet_cell
from .common import Book, EntryError, Export, ExportError, Parsed, csv_text
from .roster import GROUP_PREFIX, Student

NAME = "gradescope"
METADATA = "submission_metadata.yml"
#: Bytes submission_metadata.yml may have (64 MiB: it carries autograder output).
MAX_METADATA_BYTES = 64 << 20
#: What reading submission_metadata.yml needs (grader/requirements.txt).
YAML_MISSING = ("reading Gradescope's submission_metadata.yml needs PyYAML: install Debian's python3-yaml "
                "(or pip install PyYAML)")
_SUBMISSION = re.compile(r"^submission_(\d+)$")    # a submission's folder, named for its id
_NULL = ("~", "null", "Null", "NULL")


class MetadataError(ValueError):
    """submission_metadata.yml is not what Gradescope writes (the message names the line)."""


def submission_id(path_in_export: str) -> str:
    """The submission id of a path "[assignment_<id>_export/]submission_<id>/...", "" if none."""
    return next((m[1] for part in path_in_export.split("/")[:2] if (m := _SUBMISSION.match(part))), "")


def read_submitters(text: str) -> dict[str, list[dict[str, str]]]:
    """{submission folder: [{"name", "sid", "email"}, ...]}, every value text; MetadataError naming the line."""
    try:
        import yaml
    except ModuleNotFoundError:
        raise MetadataError(YAML_MISSING) from None

    def pairs(node, what: str) -> dict[str, object]:
        if not isinstance(node, yaml.MappingNode):
            raise MetadataError(f"line {node.start_mark.line + 1}: {what} is not a mapping")
        return {str(k.value).lstrip(":"): v for k, v in node.value if isinstance(k, yaml.ScalarNode)}

    def text_of(node) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise MetadataError(f"line {node.start_mark.line + 1}: a submitter's field is not text")
        return "" if node.value in _NULL else node.value

    try:
        root = yaml.compose(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "context_mark", None) or getattr(err, "problem_mark", None)
        raise MetadataError((f"line {mark.line + 1}: " if mark else "")
                            + f"{getattr(err, 'problem', None) or err}") from None
    records: dict[str, list[dict[str, str]]] = {}
    for key, record in pairs(root, "the file").items() if root is not None else ():
        people = pairs(record, key).get("submitters")
        if people is not None and not isinstance(people, yaml.SequenceNode) and people.value not in ("", *_NULL):
            raise MetadataError(f"line {people.start_mark.line + 1}: :submitters: holds {people.value!r}, not a list")
        people = people.value if isinstance(people, yaml.SequenceNode) else []
        records[key] = [{k: text_of(fields[k]) if k in fields else "" for k in ("name", "sid", "email")}
                        for fields in (pairs(p, "a submitter") for p in people)]
    return records


def parse(export: Export, groups: None) -> Parsed:
    """The export read as Gradescope's; ExportError without one readable metadata file."""
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
        students = [Student(NAME, p["sid"] or p["email"], p["name"], p["email"]) for p in people
                    if p["sid"] or p["email"]]
        parsed.skipped += [(key, f"a submitter with neither sid nor email in {METADATA}")] * (
            len(people) - len(students))
        if not people:
            parsed.notes.append((key, f"no submitter in {METADATA}"))
        if students:            # several: a group, named for its members
            owners[key] = (students[0], []) if len(students) == 1 else (Student(
                NAME, GROUP_PREFIX + (submission_id(key) or key), ", ".join(s.name or s.site_id for s in students)),
                students)
    for e in export.entries:
        parts = e.parts[len(base):] if e.parts[:len(base)] == base else ()
        if parts == (METADATA,):
            continue
        if len(parts) < 2 or parts[0] not in records:
            parsed.skipped.append((e.path, f"not in a submission folder that {METADATA} names"))
        elif parts[0] in owners:
            student, members = owners[parts[0]]
            parsed.add(student, None, "/".join(parts), e, members)
    for student, members in owners.values():        # who submitted no file
        parsed.add(student, None, None, None, members)
    return parsed


def gradebook(book: Book) -> tuple[dict[str, str], list[str]]:
    """({"gradescope-<lab>.csv": text}, []): folder, SID or e-mail, e-mail, name, score, results.json path in OUT."""
    return {f"gradescope-{lab}.csv": csv_text(
        [["folder", "site_id", "email", "name", "score", "results"]]
        + [[sheet_cell(folder), sheet_cell(row["site_id"]), sheet_cell(row.get("email", "")),
            sheet_cell(row.get("name", "")), book.cell(folder, row, lab), book.results(folder, row, lab)]
           for folder, row in book.rows]) for lab in book.labs}, []
