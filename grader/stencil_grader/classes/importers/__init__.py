"""`grade.py import`: one lab of a course site's export laid out as the class folder, with CLASS/roster.csv
(grader/README.md, section 9, "From a course site").  A site is one module here, named in SITES, defining NAME,
parse(export, groups) -> common.Parsed, gradebook(book) -> ({file: text}, [notes]), and optionally
read_groups(path) -> common.Groups, RENAMED (a re-upload's name) and GROUPS_HINT."""

import collections
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ...base.files import write_atomic
from ... import KIT_ROOT
from ...base import labspec
from ...grading.build import MAX_SOURCE_BYTES
from ..submissions import ClassError, shown
from . import common
from .common import EntryError, ExportError, open_export
from .roster import ROSTER, Roster, RosterError, folder_name

#: The course sites by NAME, in the order their gradebooks are written (a new site: its name here).
SITES = {name: importlib.import_module(f"{__name__}.{name}") for name in ("canvas", "moodle", "gradescope")}


@dataclass
class ImportResult:
    """What an import did: the count of each outcome, and its exit status (module docstring)."""
    counts: collections.Counter = field(default_factory=collections.Counter)
    roster: Path | None = None
    say: Callable[[str], None] = field(default=print, repr=False, compare=False)

    def tell(self, kind: str, text: str, label: str = "") -> None:
        """Count one `kind` of outcome and say it: `  <label or kind> <text>`."""
        self.counts[kind] += 1
        self.say(f"  {label or kind:<10} {text}")

    @property
    def exit_status(self) -> int:
        return int(any(self.counts[k] for k in ("kept", "no kernel", "ambiguous", "refused", "skipped", "conflict",
                                                 "unreadable")))


def import_export(site: str, export: Path, lab: str, into: Path, force: bool = False,
                  kit_root: Path = KIT_ROOT, say: Callable[[str], None] = print, groups: Path | None = None,
                  accept: list[str] | None = None) -> ImportResult:
    """Import one lab of a site's export into the class folder `into`; accept: the students (folder, site id or
    "all") whose one near miss is taken.  ClassError (exit 2): usage, or an unreadable export, group file or roster."""
    if site not in SITES:
        raise ClassError(f"--from {site!r}: the sites are {', '.join(SITES)}")
    module, labs = SITES[site], [d.name for d in labspec.discover_labs(kit_root)]
    if lab not in labs:
        raise ClassError(f"--lab {lab!r}: not a lab of the kit; labs: {', '.join(labs)}")
    if groups is not None and not hasattr(module, "read_groups"):
        raise ClassError(f"--groups {groups}: a {site.capitalize()} export names each group's members itself; "
                         f"give no --groups")
    export, into = Path(export), Path(into)
    if into.exists() and not into.is_dir():
        raise ClassError(f"--into {into}: a file, not the class folder")
    if export.is_dir() and into.resolve().is_relative_to(export.resolve()):
        raise ClassError(f"--into {into} lies inside the export {export}: choose a class folder outside it")
    try:
        roster, result = Roster.load(into / ROSTER), ImportResult(say=say)
        group_file = module.read_groups(Path(groups)) if groups is not None else None
        with open_export(export) as listing:
            parsed = module.parse(listing, group_file)
            if not parsed.submissions:
                example = f" (e.g. {parsed.skipped[0][0]!r})" if parsed.skipped else ""
                raise ExportError(f"nothing in it is laid out as a {site.capitalize()} export{example}; "
                                  f"is --from right?")
            say(f"import: {site.capitalize()} export {shown(str(export))} -> {shown(str(into))}, lab {lab}")
            into.mkdir(parents=True, exist_ok=True)
            for sub in sorted(parsed.submissions.values(), key=lambda s: folder_name(s.student)):
                wanted = bool({"all", sub.student.site_id, roster.folder_for(sub.student)[0]} & set(accept or ()))
                _import_one(sub, common.choose_kernel(sub, getattr(module, "RENAMED", None), wanted,
                                                      site.capitalize()), lab, into, roster, force, result)
            for path, why in listing.refused:
                result.counts[f"refused: {why.split(':')[0]}"] += 1
                result.tell("refused", f"{shown(path)}: {why}")
            for path, why in parsed.skipped:
                result.tell("skipped", f"{shown(path)}: {why}")
            for note in dict.fromkeys(note for _, note in parsed.notes):      # each note once, first seen first
                paths = [path for path, said in parsed.notes if said == note]
                more = f" (and {len(paths) - 1} more like it)" if len(paths) > 1 else ""
                say(f"  note       {shown(paths[0])}{more}: {note}")
            result.counts["ignored"] = listing.ignored
            if groups is None and getattr(module, "GROUPS_HINT", ""):
                say(f"  note       {module.GROUPS_HINT}")
    except ExportError as err:
        text = shown(str(err))
        raise ClassError(text if str(err).startswith(str(export)) else f"{shown(str(export))}: {text}") from None
    except (RosterError, common.GroupsError) as err:
        raise ClassError(shown(str(err))) from None
    result.roster = roster.save()
    say(summary(result, len(parsed.submissions)))
    return result


def _import_one(sub: common.Submission, choice: common.Choice, lab: str, into: Path, roster: Roster, force: bool,
                result: ImportResult) -> None:
    """Write the chosen kernel.cu unless a link or file is in its way; record it in the roster (and the members)."""
    folder, why = roster.folder_for(sub.student)
    who = shown(folder or folder_name(sub.student))
    target = into / folder / lab / common.SOURCE
    for path, kind in ((into / folder, "folder"), (into / folder / lab, "folder"), (target, "file")):
        if why:
            break
        if path.is_symlink():
            why = f"{shown(str(path))} is a symbolic link; not written through"
        elif path.exists() and not (path.is_dir() if kind == "folder" else path.is_file()):
            why = f"{shown(str(path))} is there and is not a {kind}"
    if why:
        return result.tell("conflict", f"{who}: {why}")
    (into / folder).mkdir(exist_ok=True)
    roster.record(folder, sub.student)
    late, tag = "" if sub.late is None else ("yes" if sub.late else "no"), "  [late]" if sub.late else ""
    if sub.members:
        result.say(f"  group      {who}: {len(sub.members)} member(s), graded once for all: "
            + ", ".join(shown(m.name or m.site_id) for m in sub.members))

    def record(file: str) -> None:
        """The lab's cells of the submission's row, and of each member's row (group: this folder)."""
        for student in [sub.student] + sub.members:
            home, why = (folder, "") if student is sub.student else roster.folder_for(student)
            if why:
                result.tell("conflict", f"{shown(folder_name(student))}: {why}")
            else:
                roster.record(home, student, lab, files=str(len(sub.files)), group="" if home == folder else folder,
                              late=late, file=file, note=note)

    data, note = None, choice.note
    if choice.entry is None:
        result.tell("ambiguous" if choice.ambiguous else "no kernel", f"{who}: {shown(note)}{tag}")
    else:
        try:
            data = choice.entry.read(MAX_SOURCE_BYTES)
        except EntryError as err:
            note = f"{choice.entry.path}: {err}"
            result.tell("unreadable", shown(note), "refused")
    if data is None:
        if not roster.has_lab(folder, lab):           # the lab's cells describe what is on disk
            record("")
        return
    rel = f"{who}/{lab}/{common.SOURCE}"
    source = f"  <- {shown(choice.entry.path)}{tag}" + (f"  ({shown(note)})" if note else "")
    there = target.read_bytes() if target.exists() else None
    if there not in (None, data) and not force:
        return result.tell("kept", f"{rel}: already there and different (--force replaces it){source}")
    if there == data:
        result.tell("unchanged", f"{rel}{source}")
    else:
        write_atomic(target, data)
        result.counts["late"] += bool(sub.late)
        result.tell("imported", f"{rel}{source}")
    record(choice.entry.path)


def summary(result: ImportResult, students: int) -> str:
    """The closing line: students, what was imported, what was not and why, the roster."""
    c = result.counts
    missed = ", ".join(f"{c[k]} {label}" for k, label in (
        ("no kernel", "without a kernel.cu"), ("ambiguous", "with two candidates (none taken)"),
        ("kept", "kept (a different kernel.cu already there; --force replaces it)"),
        ("conflict", "whose folder cannot be written (another student's, a link, a file)"),
        ("unreadable", "unreadable or over 1 MiB")) if c[k])
    refused = ", ".join(f"{c[k]} {k.split(': ', 1)[1]}" for k in sorted(c) if k.startswith("refused: "))
    return "".join([
        f"summary: {students} students: {c['imported']} imported ({c['late']} late), {c['unchanged']} unchanged",
        f"; not imported: {missed}" if missed else "",
        f"; {c['refused']} refused entr{'y' if c['refused'] == 1 else 'ies'} ({refused})" if c["refused"] else "",
        f"; {c['skipped']} skipped" if c["skipped"] else "",
        f"; {c['ignored']} archive artefact(s) ignored (__MACOSX, hidden files)" if c["ignored"] else "",
        f"; roster {shown(str(result.roster))} (exit {result.exit_status})"])
