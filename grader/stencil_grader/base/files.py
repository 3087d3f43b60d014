"""The kit's files as the grader names and reads them: a path shown relative to the kit, and its JSON
files read with one error message for each way they can be wrong."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .. import KIT_ROOT


def display_path(path: Path) -> str:
    """path relative to the kit root when it lies inside the kit, else as given."""
    try:
        return str(Path(path).resolve().relative_to(KIT_ROOT))
    except ValueError:
        return str(path)


def sha256_of(path) -> str:
    """sha256 (hex) of a file's bytes, or "" when it cannot be read (no such file, no path)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except (OSError, TypeError, ValueError):
        return ""


def read_json(path: Path, error: type[Exception]):
    """The value a JSON file holds (UTF-8).  Raises error("<path>: cannot read: <why>") when the
    file cannot be read and error("<path>: not valid JSON: <what> at line L column C") when it
    does not parse; the path is shown as display_path shows it.  What the value must be is the
    caller's to check."""
    shown = display_path(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise error(f"{shown}: cannot read: {getattr(err, 'strerror', None) or err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise error(f"{shown}: not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
