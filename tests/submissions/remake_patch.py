#!/usr/bin/env python3
"""Remake a mutant's kernel.patch, or turn a mutant kept whole into one.

    python3 tests/submissions/remake_patch.py LAB/NAME ...             a folder holding kernel.patch
    python3 tests/submissions/remake_patch.py --base BASE LAB/NAME     a folder holding kernel.cu

LAB/NAME is a folder under tests/submissions/.  With kernel.patch, the file the patch makes now
(check_verdicts.source_bytes: every context line must match, a hunk may move) is diffed against
its base again, so that every hunk sits at its line again: after an edit of the base above a
hunk (a header comment grown or shortened), which tests/python/test_submissions.py reports as an
offset.  With --base (a whole kernel.cu of the kit, relative to its root: reference/<lab>/kernel.cu,
starter/<lab>/kernel.cu or a known submission's), the folder's kernel.cu becomes kernel.patch,
`diff -u BASE kernel.cu`, and kernel.cu is removed only once the patch, applied to BASE, gives it
back byte for byte (the sha256 of both is printed).

A patch whose context no longer matches is remade by hand, from the kernel.cu the mutant should
now be: `patch -o kernel.cu BASE kernel.patch` places what it can (rejects in kernel.cu.rej), put
the bug in again, remove kernel.patch, then run this with --base.  Either way the patch must hold
the bug alone: test_submissions.py checks it leaves the base's leading comment block alone and
changes no more lines than its mutant's bound.  Exit status 1 on any failure, one line each.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_verdicts import KIT_ROOT, PATCH, SOURCE, PatchError, patch_base, source_bytes  # noqa: E402


def _shown(path: Path, kit_root: Path) -> str:
    """PATH relative to the kit's root (as a patch's --- and +++ lines name files)."""
    return str(Path(path).resolve().relative_to(Path(kit_root).resolve()))


def diff_text(base: Path, mutant: bytes, folder: Path, kit_root: Path = KIT_ROOT) -> str:
    """`diff -u` of BASE against MUTANT's bytes, labelled with the kit-relative paths of BASE and
    FOLDER/kernel.cu (the `---` line is what check_verdicts.patch_base reads).  Raises PatchError
    when they are the same or diff fails."""
    with tempfile.TemporaryDirectory(prefix="remake-patch-") as tmp:
        made = Path(tmp) / SOURCE
        made.write_bytes(mutant)
        done = subprocess.run(["diff", "-u", "--label", _shown(base, kit_root),
                               "--label", _shown(Path(folder) / SOURCE, kit_root), str(base), str(made)],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode == 0:
        raise PatchError(f"{_shown(folder, kit_root)}: its kernel.cu is {_shown(base, kit_root)} unchanged")
    if done.returncode != 1:
        raise PatchError(f"{_shown(folder, kit_root)}: diff failed: {done.stderr.strip()}")
    return done.stdout


def remake(folder: Path, base: Path | None = None, kit_root: Path = KIT_ROOT) -> str:
    """Write FOLDER's kernel.patch (module docstring) and return what was done, in one line.
    Raises PatchError (nothing changed then) or OSError."""
    folder = Path(folder)
    whole = folder / SOURCE
    if base is None:
        base = patch_base(folder / PATCH, kit_root)
        mutant = source_bytes(folder, kit_root)
    else:
        if (folder / PATCH).exists() or not whole.is_file():
            raise PatchError(f"{_shown(folder, kit_root)}: --base needs a folder holding {SOURCE} alone")
        mutant = whole.read_bytes()
    text = diff_text(Path(base), mutant, folder, kit_root)
    with tempfile.TemporaryDirectory(prefix="remake-patch-") as tmp:    # apply it before keeping it
        (Path(tmp) / PATCH).write_text(text)
        again = source_bytes(Path(tmp), kit_root)
    if again != mutant:
        raise PatchError(f"{_shown(folder, kit_root)}: the patch made does not give its kernel.cu back")
    (folder / PATCH).write_text(text)
    if whole.is_file():
        whole.unlink()
    digest = hashlib.sha256(mutant).hexdigest()
    return f"{_shown(folder / PATCH, kit_root)}: against {_shown(base, kit_root)}, makes sha256 {digest}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, help="the whole kernel.cu the mutant changes, relative to the kit")
    parser.add_argument("names", nargs="+", metavar="LAB/NAME", help="folders under tests/submissions/")
    args = parser.parse_args(argv)
    if args.base is not None and not (KIT_ROOT / args.base).is_file():
        print(f"remake_patch.py: --base {args.base}: no such file in the kit", file=sys.stderr)
        return 2
    failed = 0
    for name in args.names:
        try:
            print(remake(KIT_ROOT / "tests" / "submissions" / name,
                         None if args.base is None else KIT_ROOT / args.base))
        except (PatchError, OSError) as err:
            print(f"remake_patch.py: {err}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
