"""The kit's files as the grader names and reads them: a path shown relative to the kit, and its JSON
files read and validated with one error message for each way they can be wrong."""

from __future__ import annotations

import hashlib
import json
import math
import os
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


def write_atomic(path, data: str | bytes) -> Path:
    """Write data (bytes, or text as UTF-8, surrogates as their bytes) to path through a temporary file
    (".<name>.<pid>.tmp" beside it) and a rename, parent folders created: a reader never sees half of
    it.  Returns the path; OSError as open and rename raise it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape"))
    os.replace(tmp, path)
    return path


def write_json(path, obj) -> Path:
    """Write obj as indented JSON (a final newline) to path, by write_atomic; returns the path."""
    return write_atomic(path, json.dumps(obj, indent=2) + "\n")


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


def _show(value) -> str:
    """A found value as JSON would spell it."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Validator:
    """Reads one decoded JSON file (lab.json, kinds.json), raising error("<file>: <key> ...") on the first
    problem: the key, what was found and what is allowed."""

    def __init__(self, shown_path: str, error: type[Exception]):
        self.file, self.error = shown_path, error

    def fail(self, key: str, allowed: str, found) -> None:
        raise self.error(f"{self.file}: {key} must be {allowed}, got {_show(found)}")

    def obj(self, parent: dict, key: str, prefix: str, keys: tuple[str, ...],
            optional: tuple[str, ...] = ()) -> dict:
        """parent[key], which must be an object with exactly these keys (plus optional ones)."""
        name = prefix + key
        if key not in parent:
            raise self.error(f"{self.file}: {name} is missing (an object with keys {', '.join(keys)})")
        value = parent[key]
        if not isinstance(value, dict):
            self.fail(name, f"an object with keys {', '.join(keys)}", value)
        self.known_keys(value, name + ".", keys + optional)
        for k in keys:
            if k not in value:
                raise self.error(f"{self.file}: {name}.{k} is missing")
        return value

    def known_keys(self, value: dict, prefix: str, allowed: tuple[str, ...]) -> None:
        for k in value:
            if k not in allowed:
                raise self.error(f"{self.file}: {prefix}{k} is not a known key "
                                   f"(allowed: {', '.join(allowed)})")

    def number(self, parent: dict, key: str, prefix: str, allowed: str, test, kind=float):
        """parent[key], a finite number (kind int: an integer) that passes test."""
        value = parent[key]
        if not (_is_int if kind is int else _is_number)(value) or not test(value):
            self.fail(prefix + key, allowed, value)
        return kind(value)

    def integer(self, parent: dict, key: str, prefix: str, allowed: str, test) -> int:
        return self.number(parent, key, prefix, allowed, test, int)

    def boolean(self, parent: dict, key: str, prefix: str) -> bool:
        value = parent[key]
        if not isinstance(value, bool):
            self.fail(prefix + key, "true or false", value)
        return value

    def choice(self, parent: dict, key: str, prefix: str, allowed: tuple[str, ...]) -> str:
        value = parent[key]
        if value not in allowed:
            self.fail(prefix + key, "one of " + ", ".join(allowed), value)
        return value
