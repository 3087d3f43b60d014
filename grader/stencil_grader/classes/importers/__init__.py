"""`grade.py import`: a course site's export of one lab, laid out as the kit's class folder.

    grade.py import --from canvas|moodle|gradescope EXPORT --lab NN-slug --into CLASS [--force]

EXPORT is the .zip the site gave (read with zipfile, never unpacked) or the folder it was
unpacked into.  Each student gets CLASS/<student folder>/<lab>/kernel.cu, and CLASS/roster.csv
says who each folder is (roster.py: the columns, and the folder rule "<name> (<site id>)").
The three layouts, as each site's own code writes them (the pages cited are what the tests'
samples follow):

  Canvas, "Download Submissions": one flat zip of files
        <name>[_LATE]_<user id>_<file id>_<file name>
    name: the sortable name ("García, José") lower-cased, every non-word character removed
    ("garcíajosé"); LATE (older Canvas: late) for a late submission; under anonymous grading
    [LATE_]anon_<anonymous id>_<file id>_<file name>, without the name; online text and URL
    entries as <prefix>_text.html, <prefix>_link.html.  A file uploaded again under the name of
    an earlier one is renamed kernel-1.cu, kernel-2.cu, ...  Sources:
    https://github.com/instructure/canvas-lms/blob/master/lib/content_zipper.rb (get_filename,
    add_upload_submission, sanitize_file_name, sanitize_user_name),
    https://github.com/instructure/canvas-lms/blob/master/app/models/attachment.rb
    (make_unique_filename: "<base>-<n><ext>").

  Moodle, "Download all submissions": a zip with a folder per student,
        <Full Name>_<participant id>_assignsubmission_file/<the student's files>    (4.1 and later)
        <Full Name>_<participant id>_assignsubmission_file_/<the student's files>   (3.1 to 4.0)
    or, with "Download submissions in folders" off (and before 3.1), files
        <Full Name>_<participant id>_assignsubmission_file_<file name>
    The name has its "_" turned into spaces; the online text plugin's part
    (..._assignsubmission_onlinetext...) is ignored.  Sources:
    https://github.com/moodle/moodle/blob/main/mod/assign/classes/downloader.php
    (get_student_prefix, load_submissionplugin_filelist), mod/assign/locallib.php
    download_submissions() of 3.1 to 4.0 (prefix . '_' . subtype . '_' . type . '_'), and the
    option's help, https://github.com/moodle/moodle/commit/381bb721538cbba98ac84447a6da22fdb4dc94a2
    ("Each submission is then put in a separate folder ... and files are not renamed").

  Gradescope, "Export Submissions": a zip (assignment_<id>_export/) of submission_<id>/
    folders holding the files as uploaded, and submission_metadata.yml naming each folder's
    submitters (:name:, :sid:, :email:; several for a group: each member gets the group's
    kernel.cu).  The student's identifier is the SID, else the e-mail.  Sources:
    https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/ (the
    submission's users: name, email, several for a group),
    https://guides.gradescope.com/hc/en-us/articles/22066784117901-Grading-Online-Assignments
    ("Exporting Submission Data"), and the reader of that export in otter-grader,
    https://github.com/ucbds-infra/otter-grader/blob/master/otter/grade/metadata.py
    (GradescopeParser: submission_metadata.yml, ":submitters", ":name").  The YAML subset is
    read by metadata_yml.py.

What it does with each student's files: the one file named kernel.cu, at any depth of their
submission (Canvas: or kernel-N.cu), is taken (sites.choose_kernel); two candidates: none
(never a guess), and the console says which; none: the near misses are named (Kernel.cu,
kernel.cu.txt, kernel (1).cu, a .zip, which is never opened).  A kernel.cu already in CLASS is
replaced only with --force (the same bytes: "unchanged").  Entries that would land outside
--into, symbolic links, names that are not UTF-8 and files over 1 MiB are refused
(export.py).  Late: Canvas says; Moodle and Gradescope exports do not ("" in the roster).

Exit status: 0 when every student of the export has the lab's kernel.cu in CLASS (imported or
unchanged); 1 when the import ran but something was not taken (no kernel.cu, two candidates,
an existing kernel.cu kept, an entry refused or skipped), each on its own line and counted in
the summary; 2 when nothing was done: a usage error, or an export or roster.csv that cannot be
read (one line saying what was wrong).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ... import KIT_ROOT
from ...base import labspec
from .. import outdir
from ..submissions import ClassError
from . import export as export_mod, roster as roster_mod, sites
from .export import MAX_KERNEL_BYTES, EntryError, ExportError
from .roster import Roster, RosterError

SITES = sites.SITES


@dataclass
class ImportResult:
    """What an import did: the count of each outcome, and its exit status (module docstring)."""

    counts: collections.Counter = field(default_factory=collections.Counter)
    roster: Path | None = None

    @property
    def exit_status(self) -> int:
        bad = ("kept", "no kernel", "ambiguous", "refused", "skipped", "conflict", "unreadable")
        return 1 if any(self.counts[k] for k in bad) else 0


def shown(text: str) -> str:
    """text for the console: control characters escaped, so a name cannot rewrite the screen."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def _target(into: Path, folder: str, lab: str) -> tuple[Path, str]:
    """(CLASS/folder/lab/kernel.cu, "") or (that path, why it may not be written): a symbolic link
    on the way could send the write outside --into; a file where a folder goes, or the reverse."""
    path = into / folder / lab / sites.SOURCE
    for p, kind in ((into / folder, "folder"), (into / folder / lab, "folder"), (path, "file")):
        if p.is_symlink():
            return path, f"{shown(str(p))} is a symbolic link; not written through"
        if p.exists() and not (p.is_dir() if kind == "folder" else p.is_file()):
            return path, f"{shown(str(p))} is there and is not a {kind}"
    return path, ""


def import_export(site: str, export: Path, lab: str, into: Path, force: bool = False,
                  kit_root: Path = KIT_ROOT, say: Callable[[str], None] = print) -> ImportResult:
    """Import one lab of a site's export into the class folder `into` (module docstring).
    Raises ClassError (exit 2) for a usage problem or an export or roster.csv that cannot be read."""
    if site not in SITES:
        raise ClassError(f"--from {site!r}: the sites are {', '.join(SITES)}")
    labs = [d.name for d in labspec.discover_labs(kit_root)]
    if lab not in labs:
        raise ClassError(f"--lab {lab!r}: not a lab of the kit; labs: {', '.join(labs)}")
    export, into = Path(export), Path(into)
    if into.exists() and not into.is_dir():
        raise ClassError(f"--into {into}: a file, not the class folder")
    if export.is_dir() and into.resolve().is_relative_to(export.resolve()):
        raise ClassError(f"--into {into} lies inside the export {export}: choose a class folder outside it")
    try:
        roster = Roster.load(into / roster_mod.ROSTER)
        with export_mod.open_export(export) as listing:
            parsed = sites.parse(site, listing)
            result = ImportResult()
            say(f"import: {site.capitalize()} export {shown(str(export))} -> {shown(str(into))}, lab {lab}")
            into.mkdir(parents=True, exist_ok=True)
            for sub in sorted(parsed.submissions.values(), key=lambda s: roster_mod.folder_name(s.student)):
                _import_one(sub, site, lab, into, roster, force, result, say)
            for path, why in listing.refused:
                result.counts["refused"] += 1
                result.counts[f"refused: {why.split(':')[0]}"] += 1
                say(f"  refused    {shown(path)}: {why}")
            for path, why in parsed.skipped:
                result.counts["skipped"] += 1
                say(f"  skipped    {shown(path)}: {why}")
            by_note = collections.defaultdict(list)
            for path, note in parsed.notes:
                by_note[note].append(path)
            for note, paths in by_note.items():
                more = f" (and {len(paths) - 1} more like it)" if len(paths) > 1 else ""
                say(f"  note       {shown(paths[0])}{more}: {note}")
            result.counts["ignored"] = listing.ignored
    except ExportError as err:
        text = shown(str(err))
        raise ClassError(text if str(err).startswith(str(export)) else f"{shown(str(export))}: {text}") from None
    except RosterError as err:
        raise ClassError(shown(str(err))) from None
    result.roster = roster.save()
    say(summary(result, len(parsed.submissions)))
    return result


def _import_one(sub: sites.Submission, site: str, lab: str, into: Path, roster: Roster, force: bool,
                result: ImportResult, say: Callable[[str], None]) -> None:
    """Import one student's submission: choose its kernel.cu, check, write, record in the roster."""
    student = sub.student
    folder, why = roster.folder_for(student)
    who = shown(folder or roster_mod.folder_name(student))
    target, why = (None, why) if why else _target(into, folder, lab)
    if why:
        result.counts["conflict"] += 1
        say(f"  conflict   {who}: {why}")
        return
    (into / folder).mkdir(exist_ok=True)
    roster.record(folder, student)
    late = "" if sub.late is None else ("yes" if sub.late else "no")
    tag = "  [late]" if sub.late else ""
    choice = sites.choose_kernel(sub, site)
    data, note = None, choice.note
    if choice.entry is None:
        kind = "ambiguous" if choice.ambiguous else "no kernel"
        result.counts[kind] += 1
        say(f"  {kind:<10} {who}: {shown(note)}{tag}")
    else:
        try:
            data = choice.entry.read(MAX_KERNEL_BYTES)
        except EntryError as err:
            result.counts["unreadable"] += 1
            note = f"{choice.path}: {err}"
            say(f"  refused    {shown(note)}")
    if data is None:
        if not roster.has_lab(folder, lab):           # the lab's cells describe what is on disk
            roster.record(folder, student, lab, late=late, file="", note=note)
        return
    rel = f"{who}/{lab}/{sites.SOURCE}"
    source = f"  <- {shown(choice.path)}{tag}" + (f"  ({shown(note)})" if note else "")
    if target.exists():
        if target.read_bytes() == data:
            result.counts["unchanged"] += 1
            say(f"  unchanged  {rel}{source}")
            roster.record(folder, student, lab, late=late, file=choice.path, note=note)
            return
        if not force:
            result.counts["kept"] += 1
            say(f"  kept       {rel}: already there and different (--force replaces it){source}")
            return
    outdir.write_atomic(target, data)
    result.counts["imported"] += 1
    result.counts["late"] += bool(sub.late)
    say(f"  imported   {rel}{source}")
    roster.record(folder, student, lab, late=late, file=choice.path, note=note)


def summary(result: ImportResult, students: int) -> str:
    """The closing line: students, what was imported, what was not and why, the roster."""
    c = result.counts
    done = f"{c['imported']} imported ({c['late']} late), {c['unchanged']} unchanged"
    missed = [f"{c[k]} {label}" for k, label in (
        ("no kernel", "without a kernel.cu"), ("ambiguous", "with two candidates (none taken)"),
        ("kept", "kept (a different kernel.cu already there; --force replaces it)"),
        ("conflict", "whose folder cannot be written (another student's, a link, a file)"),
        ("unreadable", "unreadable or over 1 MiB")) if c[k]]
    why = [f"{c[k]} {k.split(': ', 1)[1]}" for k in sorted(c) if k.startswith("refused: ")]
    refused = f"; {c['refused']} refused entr{'y' if c['refused'] == 1 else 'ies'} ({', '.join(why)})" \
        if c["refused"] else ""
    skipped = f"; {c['skipped']} skipped" if c["skipped"] else ""
    ignored = f"; {c['ignored']} archive artefact(s) ignored (__MACOSX, hidden files)" if c["ignored"] else ""
    return (f"summary: {students} students: {done}" + (f"; not imported: {', '.join(missed)}" if missed else "")
            + refused + skipped + ignored + f"; roster {shown(str(result.roster))}"
            + f" (exit {result.exit_status})")
