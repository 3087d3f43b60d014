"""A course site's export, the .zip or the folder it was unpacked into, read without extracting
anything: its files under checked relative paths, and the entries refused, each with why
(grader/README.md, section 9).  Zip names are decoded as zipfile does, except that an unflagged
name valid as UTF-8 is read so (rubyzip, which Canvas uses, and Info-ZIP on Linux write UTF-8
unflagged) and an unflagged non-ASCII name that is not is refused.  Sizes are never taken from a
header: Entry.read(limit) reads at most limit + 1 bytes.
"""

from __future__ import annotations

import contextlib
import os
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator


class ExportError(ValueError):
    """The export as a whole cannot be read: no such file or folder, not a zip, a damaged zip."""


class EntryError(ValueError):
    """One file of the export cannot be taken: over the size limit, or unreadable (the reason)."""


@dataclass(frozen=True)
class Entry:
    """One regular file of the export: its path there ('/'-separated, relative, decoded) and its
    size in bytes as the zip header or the file system gives it (a claim, checked when read)."""

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
    """The export at `path` (a .zip file or a folder), open while the block runs.
    Raises ExportError when it does not exist, is neither, or zipfile cannot read its directory."""
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
        rel_folder = Path(folder).relative_to(root)
        for name in sorted(dirnames + filenames):
            rel = (rel_folder / name).as_posix()
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                export.refused.append((rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                                       "the name is not valid UTF-8"))
                if name in dirnames:
                    dirnames.remove(name)
                continue
            full = Path(folder) / name
            info = full.lstat()
            if stat.S_ISLNK(info.st_mode):
                export.refused.append((rel, "a symbolic link: could point outside --into"))
            elif _artefact((name,)):            # the folders above it are not: they were pruned
                export.ignored += 1
                if name in dirnames:
                    dirnames.remove(name)
            elif name in dirnames:
                continue
            elif not stat.S_ISREG(info.st_mode):
                export.refused.append((rel, "not a regular file"))
            else:
                export.entries.append(Entry(rel, info.st_size, lambda full=full: os.fdopen(
                    os.open(full, os.O_RDONLY | os.O_NOFOLLOW), "rb")))
    return export
