"""`grade.py import`: a course site's export of one lab laid out as the class folder (grader/README.md,
section 9, and the site's module: canvas.py, moodle.py, gradescope.py):

    grade.py import --from canvas|moodle|gradescope EXPORT --lab NN-slug --into CLASS
                    [--groups FILE] [--accept WHO ...] [--force]

EXPORT is the site's .zip (read, never unpacked: export.py) or its folder.  Each student gets
CLASS/<folder>/<lab>/kernel.cu and a row of CLASS/roster.csv (roster.py); a group's submission
is imported once into a folder of its own, each member's row naming it ("<lab> group").  The
one kernel.cu of a submission is taken (common.choose_kernel: two candidates, none taken; a
near miss only with --accept); a different kernel.cu already in CLASS is replaced only with
--force.  Exit status: 0 every student's kernel.cu is in CLASS; 1 something was not taken (each
said on its line); 2 nothing done (usage, an unreadable export, group file or roster.csv).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ... import KIT_ROOT
from ...base import labspec
from .. import outdir
from ..submissions import ClassError, shown
from . import common, export as export_mod, roster as roster_mod, sites
from .common import GroupsError
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


def _target(into: Path, folder: str, lab: str) -> tuple[Path, str]:
    """(CLASS/folder/lab/kernel.cu, "") or (that path, why it may not be written): a symbolic link
    on the way could send the write outside --into; a file where a folder goes, or the reverse."""
    path = into / folder / lab / common.SOURCE
    for p, kind in ((into / folder, "folder"), (into / folder / lab, "folder"), (path, "file")):
        if p.is_symlink():
            return path, f"{shown(str(p))} is a symbolic link; not written through"
        if p.exists() and not (p.is_dir() if kind == "folder" else p.is_file()):
            return path, f"{shown(str(p))} is there and is not a {kind}"
    return path, ""


def import_export(site: str, export: Path, lab: str, into: Path, force: bool = False,
                  kit_root: Path = KIT_ROOT, say: Callable[[str], None] = print, groups: Path | None = None,
                  accept: list[str] | None = None) -> ImportResult:
    """Import one lab of a site's export into the class folder `into` (module docstring).
    groups: the site's group file; accept: the students (folder or site id, or "all") whose one
    near miss is taken.  Raises ClassError (exit 2) for a usage problem or an export, group
    file or roster.csv that cannot be read."""
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
        group_file = sites.module(site).read_groups(Path(groups)) if groups is not None else None
        with export_mod.open_export(export) as listing:
            parsed = sites.parse(site, listing, group_file)
            result = ImportResult()
            say(f"import: {site.capitalize()} export {shown(str(export))} -> {shown(str(into))}, lab {lab}")
            into.mkdir(parents=True, exist_ok=True)
            for sub in sorted(parsed.submissions.values(), key=lambda s: roster_mod.folder_name(s.student)):
                _import_one(sub, site, lab, into, roster, force, result, say, set(accept or ()))
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
            hint = getattr(sites.module(site), "GROUPS_HINT", "") if groups is None else ""
            if hint:
                say(f"  note       {hint}")
    except ExportError as err:
        text = shown(str(err))
        raise ClassError(text if str(err).startswith(str(export)) else f"{shown(str(export))}: {text}") from None
    except (RosterError, GroupsError) as err:
        raise ClassError(shown(str(err))) from None
    result.roster = roster.save()
    say(summary(result, len(parsed.submissions)))
    return result


def _import_one(sub: common.Submission, site: str, lab: str, into: Path, roster: Roster, force: bool,
                result: ImportResult, say: Callable[[str], None], accept: set[str] = frozenset()) -> None:
    """Import one submission: choose its kernel.cu, check, write, record in the roster (a
    group's: its row, and each member's naming the group's folder)."""
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
    if sub.members:
        names = ", ".join(shown(m.name or m.site_id) for m in sub.members)
        say(f"  group      {who}: {len(sub.members)} member(s), graded once for all: {names}")
    wanted = "all" in accept or folder in accept or student.site_id in accept
    choice = common.choose_kernel(sub, getattr(sites.module(site), "RENAMED", None), wanted, site.capitalize())

    def record(**fields: str) -> None:
        """The lab's cells of the submission's row, and of each member's row (group: this folder)."""
        roster.record(folder, student, lab, files=str(len(sub.files)), group="", **fields)
        for member in sub.members:
            home, why = roster.folder_for(member)
            if why:
                result.counts["conflict"] += 1
                say(f"  conflict   {shown(roster_mod.folder_name(member))}: {why}")
                continue
            roster.record(home, member, lab, files=str(len(sub.files)), group=folder, **fields)

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
            record(late=late, file="", note=note)
        return
    rel = f"{who}/{lab}/{common.SOURCE}"
    source = f"  <- {shown(choice.path)}{tag}" + (f"  ({shown(note)})" if note else "")
    if target.exists():
        if target.read_bytes() == data:
            result.counts["unchanged"] += 1
            say(f"  unchanged  {rel}{source}")
            record(late=late, file=choice.path, note=note)
            return
        if not force:
            result.counts["kept"] += 1
            say(f"  kept       {rel}: already there and different (--force replaces it){source}")
            return
    outdir.write_atomic(target, data)
    result.counts["imported"] += 1
    result.counts["late"] += bool(sub.late)
    say(f"  imported   {rel}{source}")
    record(late=late, file=choice.path, note=note)


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
