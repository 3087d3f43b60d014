"""A reader for the one thing the importer needs from Gradescope's submission_metadata.yml: who
submitted each submission folder.

The file is YAML written by Ruby (Psych), keys as Ruby symbols:

    submission_409194023:
      :submitters:
      - :name: First Last
        :sid: '123456789'
        :email: first@example.edu
      :created_at: 2026-04-26 17:34:00.861687000 Z
      :score: 2.0
      :results:
        output: |-
          ...autograder output, any text...
    submission_500000001:
      :submitters:
      - :name: Alice A            (a group submission: one item per member)
      ...
      :submitters: []             (nobody)

Why not PyYAML: students install little and the grader needs nothing beyond the standard
library; and PyYAML's safe loader refuses the Ruby tags (!ruby/...) Psych may write into the
parts we do not need, where this reader skips them.  It reads exactly this subset: top-level
keys at column 0, each record's `:submitters:` key (at the record's own indent) and its block
sequence of one-level mappings; every other key, and everything indented under one (nested
maps, block scalars, tags), is skipped by indentation alone, so autograder output that looks
like a submitter cannot be taken for one.  Scalars: plain (a trailing ` #` comment dropped),
'single-quoted' ('' for '), "double-quoted" (backslash escapes), a leading !tag dropped, and
plain or quoted values folded over continuation lines.  Anything else is a MetadataError
naming the line.
"""

from __future__ import annotations

import re

_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
            "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
            "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_HEX = {"x": 2, "u": 4, "U": 8}
_KEY = re.compile(r"""^(?P<key>'(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^\s'"#][^#]*?):(?:\s+(?P<value>.*))?$""")


class MetadataError(ValueError):
    """submission_metadata.yml is not what Gradescope writes (the message names the line)."""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _unquote_double(text: str, where: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        code = text[i + 1:i + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif code in _HEX:
            digits = text[i + 2:i + 2 + _HEX[code]]
            if len(digits) != _HEX[code] or not re.fullmatch(r"[0-9A-Fa-f]+", digits):
                raise MetadataError(f"{where}: bad escape \\{code}{digits}")
            out.append(chr(int(digits, 16)))
            i += 2 + _HEX[code]
        else:
            raise MetadataError(f"{where}: unknown escape \\{code}")
    return "".join(out)


def scalar(text: str, where: str = "value") -> str:
    """A YAML scalar as text: quotes removed and escapes resolved; ~, null and empty give ""."""
    text = text.strip()
    if text.startswith("!"):                       # a tag (!ruby/string, !!str): the value follows it
        text = text.split(None, 1)[1] if " " in text else ""
    if text[:1] == "'":
        if len(text) < 2 or not text.endswith("'"):
            raise MetadataError(f"{where}: unterminated 'quoted' value")
        return text[1:-1].replace("''", "'")
    if text[:1] == '"':
        m = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', text, re.S)
        if not m:
            raise MetadataError(f"{where}: unterminated \"quoted\" value")
        return _unquote_double(m.group(1), where)
    text = re.sub(r"\s+#.*$", "", text)
    return "" if text in ("~", "null", "Null", "NULL") else text


def _key(text: str, where: str) -> tuple[str, str] | None:
    """(key without its Ruby ':' and quotes, raw value) of a `key: value` line, or None."""
    m = _KEY.match(text)
    if not m:
        return None
    key = scalar(m.group("key"), where) if m.group("key")[0] in "'\"" else m.group("key")
    return key.lstrip(":"), (m.group("value") or "").strip()


def _folded(lines: list[str], i: int, first: str, min_indent: int) -> tuple[str, int]:
    """A value that may go on over the following lines (indented past min_indent): the joined
    raw text, and the index of the first line after it."""
    parts = [first]
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) > min_indent \
            and not lines[i].lstrip().startswith("- "):
        parts.append(lines[i].strip())
        i += 1
    return " ".join(parts), i


def _submitters(lines: list[str], i: int, key_indent: int) -> tuple[list[dict[str, str]], int]:
    """The block sequence that starts at lines[i] (items at key_indent or deeper)."""
    people: list[dict[str, str]] = []
    item_indent = None
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        ind = _indent(line)
        stripped = line.strip()
        if item_indent is None:
            if ind < key_indent or not (stripped == "-" or stripped.startswith("- ")):
                break
            item_indent = ind
        if ind < item_indent or (ind == item_indent and not (stripped == "-" or stripped.startswith("- "))):
            break
        if ind == item_indent:                          # "- :name: X": a new person
            people.append({})
            field_indent = ind + 2
            rest = stripped[1:].strip()
            i += 1
            if not rest:
                continue
        elif ind > field_indent:                        # nested under a key we do not read
            i += 1
            continue
        elif ind != field_indent:
            raise MetadataError(f"line {i + 1}: unexpected indentation in :submitters:")
        else:
            rest = stripped
            i += 1
        kv = _key(rest, f"line {i}")
        if kv is None:
            raise MetadataError(f"line {i}: expected 'key: value' in :submitters:, got {rest!r}")
        raw, i = _folded(lines, i, kv[1], field_indent)
        people[-1][kv[0]] = scalar(raw, f"line {i}")
    return people, i


def read_submitters(text: str) -> dict[str, list[dict[str, str]]]:
    """{submission folder: [{"name": ..., "sid": ..., "email": ...}, ...]} in file order, every
    value text ("" when absent).  Raises MetadataError on a line it cannot read."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    records: dict[str, list[dict[str, str]]] = {}
    current, record_indent, i = None, None, 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped in ("---", "...") or line.startswith("%"):
            i += 1
            continue
        ind = _indent(line)
        if ind == 0:
            kv = _key(stripped, f"line {i + 1}")
            if kv is None:
                raise MetadataError(f"line {i + 1}: expected 'submission_<id>:', got {stripped!r}")
            current, record_indent = kv[0], None
            records[current] = []
            i += 1
            continue
        if current is None:
            raise MetadataError(f"line {i + 1}: indented line before any submission")
        if record_indent is None:
            record_indent = ind
        kv = _key(stripped, f"line {i + 1}") if ind == record_indent else None
        i += 1
        if kv and kv[0] == "submitters":
            if kv[1] in ("[]", ""):
                people, i = ([], i) if kv[1] == "[]" else _submitters(lines, i, record_indent)
            else:
                raise MetadataError(f"line {i}: :submitters: holds {kv[1]!r}, not a list")
            records[current] = [{k: p.get(k, "") for k in ("name", "sid", "email")} for p in people]
    return records
