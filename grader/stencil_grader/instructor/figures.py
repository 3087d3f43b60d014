"""The measured figures of README.md, the handouts and the answer keys, rendered from recorded runs.

    python3 grader/grade.py figures            # rewrite every marked figure from the recordings
    python3 grader/grade.py figures --check    # exit 1, listing every place where the text differs

A figure that was measured is never typed into the text: the text holds a marker, and this module
writes the figure between the marker's two halves from a *recorded run*, handouts/data/SLUG/RECORD.json
(SLUG names a GPU: h100, h200).  Which command writes each record, and how to regenerate them:
handouts/data/README.md; what a record holds: instructor/records.py (RECORD_FORMAT).

Markers
-------
A table of a tour part (the tour's six columns, speed-ups computed over the rows shown: step over
the row above, cumulative over the first row; a table of one row has no speed-ups), with a caption
naming the run:

    <!-- figures h100/tour 2d -->
    (generated: the caption and the table)
    <!-- /figures -->

    <!-- figures h100/tour 3d rows=05/naive_3d,05/reference -->     only these rows, in this order

A single figure in prose or in a hand-made table:

    <!-- fig SOURCE [ROW] FIELD [:FORMAT] -->TEXT<!-- /fig -->

    <!-- fig h100/tour 05/reference ratio -->0.95<!-- /fig -->          a row's field
    <!-- fig h100/tour device.driver -->580.159.04<!-- /fig -->         a field of the record itself
    <!-- fig h100/check 07/reference launchers.residual_norm2.ratio :.3f -->0.969<!-- /fig -->
    <!-- fig h100/tour 08/reference gbps*9/8 :,.0f -->8,376<!-- /fig -->  arithmetic on a figure
    <!-- fig h100/tour 66908/copy_gbps :.1f -->22.5<!-- /fig -->          a constant over a figure
    <!-- fig lab/05 h100 target -->0.88<!-- /fig -->                    labs/05-*/lab.json's targets:
                                                                        ROW "generic", a SLUG (the
                                                                        device its records name) or
                                                                        "policy" (targets_policy)

    <!-- fig tune/05 h100:ROWS_PER_THREAD=1,PLANES_PER_BLOCK=32 ratio -->0.86<!-- /fig -->
                                                                        a variant of labs/05-*/tuning/<the
                                                                        GPU of h100>.json (make tune);
                                                                        tune/05 h100 best_ratio: the file's
                                                                        own; tune/all h100 variants: the
                                                                        variants of every lab

SOURCE is SLUG/RECORD (handouts/data/SLUG/RECORD.json), lab/NN or tune/NN.  ROW is a row's id ("NN/impl",
records.row_id); without ROW the field is the record's own (device.name, date, copy_gbps, ...).
FIELD is a dotted path, optionally preceded by `N/` (N divided by the figure) and followed by
factors `*N` or `/N` applied in order.  FORMAT is a Python format specification (`.3f`, `,.0f`,
`d`); without one, DEFAULT_FORMATS decides by the field's last name, and strings are written as
they are.  An inline marker may not start a line: CommonMark reads a line that starts with `<!--`
as an HTML block, even inside a paragraph, and the rest of the line would not be Markdown.

Provisional recordings ("provisional": true; SLUG/notes.json always) render like any other, with a
warning from --check (handouts/data/README.md, "Provisional files"); a figure such a record lacks
renders as MISSING_TEXT, with a warning, and in a final record is an error: the text must not
quote what the run did not measure.

Consistency with lab.json: every calibrate record's rows that were written into lab.json must
still match that lab.json's targets for the record's device (unless the lab now has a
targets_policy), or the "the reference measured X" figures next to those targets would describe
another calibration.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from .figtables import block
from .recordings import (DATA_DIR, MISSING_TEXT, FiguresError, Record, Recordings, consistency, lab_json as _lab_json,
                         load_recordings, shown as _shown)
from .tuning import tuning_path

#: Default format by a field's last name (format() specifications).
DEFAULT_FORMATS = {"ratio": ".2f", "median": ".3f", "ms_median": ".3f", "ms_per_sweep": ".3f",
                   "gbps": ".0f", "copy_gbps": ".0f", "step_speedup": ".2f", "cumulative_speedup": ".2f",
                   "floor": ".2f", "target": ".2f", "points": ".0f", "max_points": ".0f",
                   "sm_count": "d", "sm_clock_max_mhz": ".0f", "seconds": ".1f", "repetitions": "d",
                   "best_ratio": ".2f", "default_ratio": ".2f", "ms": ".3f", "registers": "d", "variants": "d"}

_BLOCK = re.compile(r"<!--[ \t]*figures[ \t]+(?P<spec>[^\n>]*?)[ \t]*-->[ \t]*\n(?P<body>.*?)"
                    r"<!--[ \t]*/figures[ \t]*-->", re.S)
_INLINE = re.compile(r"<!--\s*fig\s+(?P<spec>[^>]*?)\s*-->(?P<text>[^\n]*?)<!--\s*/fig\s*-->")
_ANY_MARKER = re.compile(r"<!--\s*/?fig(?:ures)?\b")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*"
_FIELD = re.compile(rf"^(?:(?P<over>[0-9]+(?:\.[0-9]+)?|{_NAME})/)?(?P<path>{_NAME})"
                    r"(?P<ops>(?:[-+*/][0-9]+(?:\.[0-9]+)?)*)$")
_OP = re.compile(r"([-+*/])([0-9]+(?:\.[0-9]+)?)")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


# ------------------------------------------------------------------------------------ one figure

@dataclass
class Figure:
    """What a marker renders to: text, and why a figure is missing (None when it is not)."""

    text: str
    missing: str | None = None
    record: Record | None = None


def _walk(obj, path: str, what: str):
    """obj's value at a dotted path (None when a step on the way is null: not measured); KeyError
    naming the path when a step is missing."""
    for key in path.split("."):
        if obj is None:
            return None
        if not isinstance(obj, dict) or key not in obj:
            raise KeyError(f"{what} has no field {path!r}")
        obj = obj[key]
    return obj


def format_value(value, path: str, ops: str = "", fmt: str | None = None, over: str | None = None) -> str:
    """A figure as text: numbers as `over / value` when over is given ("66908/copy_gbps": a ridge
    point; over is a number, or the value of another field as text), then through the operations in
    ops, applied in order ("*9/8", "-1*100"), then the format (or DEFAULT_FORMATS by the path's last
    name, else "g"); a list of numbers as "a, b and c", each so; strings as they are."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
        parts = [format_value(v, path, ops, fmt, over) for v in value]      # "0.942, 0.947 and 0.937"
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    if isinstance(value, (int, float)):
        if over is not None:
            if value == 0:
                raise ValueError(f"{over}/{path}: {path} is 0")
            value = float(over) / value
        for op, number in _OP.findall(ops):
            value = {"*": value * float(number), "/": value / float(number), "+": value + float(number),
                     "-": value - float(number)}[op]
        spec = fmt if fmt is not None else DEFAULT_FORMATS.get(path.rsplit(".", 1)[-1], "g")
        if spec.endswith("d"):
            value = int(round(value))
        return format(value, spec)
    if ops or fmt or over:
        raise ValueError(f"{path} is text ({value!r}): it takes no arithmetic or format")
    return str(value)


def parse_inline(spec: str) -> tuple[str, str | None, str, str, str | None, str | None]:
    """(source, row, field path, factors, format, dividend) of an inline marker's specification."""
    tokens = spec.split()
    fmt = None
    if tokens and tokens[-1].startswith(":"):
        fmt = tokens.pop()[1:]
        try:
            format(1 if fmt.endswith("d") else 1.0, fmt)
        except ValueError:
            raise FiguresError(f"{fmt!r} is not a format specification (e.g. .3f, ,.0f, d)") from None
    if len(tokens) not in (2, 3):
        raise FiguresError("an inline marker is <!-- fig SOURCE [ROW] FIELD [:FORMAT] -->, "
                           f"got {spec!r}")
    source, *row, fld = tokens
    m = _FIELD.match(fld)
    if not m:
        raise FiguresError(f"{fld!r} is not a field (a dotted name, optionally N/ or FIELD/ before it and "
                           "*N, /N, +N or -N after it)")
    return source, (row[0] if row else None), m.group("path"), m.group("ops"), fmt, m.group("over")


def _dividend(obj, over: str | None, what: str) -> str | None:
    """over as format_value takes it: a number as written, or the value of the field `over` of the
    same object (row, variant) as text; KeyError when that field is missing."""
    if over is None or _NUMBER.fullmatch(over):
        return over
    value = _walk(obj, over, what)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KeyError(f"{what} {over} is not a number, so it cannot divide")
    return repr(float(value))


def _tuning_value(source: str, row: str | None, path: str, over: str | None, recs: Recordings, kit_root: Path):
    """A figure of the tuning files `make tune` wrote (labs/NN-slug/tuning/<gpu>.json): ROW is a
    GPU's slug (the file's own fields; `variants` is their count) or SLUG:NAME=V,NAME=V (the one
    variant with those parameters: ratio, gbps, ms, registers, ...).  tune/all SLUG variants: the
    variants of every lab.  Returns (value, the dividend (_dividend), what)."""

    number = source[5:]
    if row is None:
        raise FiguresError(f"{source}: name the GPU, tune/NN SLUG FIELD or tune/NN SLUG:NAME=V,... FIELD")
    slug, _, wanted = row.partition(":")
    device = recs.device(slug)
    labs = sorted((Path(kit_root) / "labs").glob("*-*/" if number == "all" else f"{number}-*/"))
    if not labs or not (number == "all" or re.fullmatch(r"\d\d", number)):
        raise FiguresError(f"{source}: no labs/{number}-*/")
    files = [tuning_path(lab, device) for lab in labs]
    tuned = {}
    for f in files:
        try:
            tuned[f] = json.loads(f.read_text())
        except OSError:
            if number != "all":
                raise FiguresError(f"{_shown(f)}: no tuning file for {device} (make tune writes it)") from None
        except json.JSONDecodeError as err:
            raise FiguresError(f"{_shown(f)}: not JSON: {err.msg}") from None
    if number == "all":
        if path != "variants" or wanted:
            raise FiguresError("tune/all SLUG takes one field: variants (their count over every lab)")
        return sum(len(d.get("variants") or []) for d in tuned.values()), over, f"the tuning files for {device}"
    (f, data), = tuned.items()
    if wanted:
        try:
            params = {k: int(v) for k, v in (item.split("=", 1) for item in wanted.split(","))}
        except ValueError:
            raise FiguresError(f"{row!r}: parameters are NAME=INTEGER, comma separated") from None
        found = [v for v in data.get("variants") or []
                 if all(v.get("params", {}).get(k) == x for k, x in params.items())]
        if len(found) != 1:
            raise FiguresError(f"{_shown(f)}: {len(found)} variants have {wanted} (name one)")
        data, what = found[0], f"{_shown(f)}, variant {wanted},"
    else:
        what = _shown(f)
    value = _walk(data, path, what)
    return (len(value) if isinstance(value, list) else value), _dividend(data, over, what), what


def figure(spec: str, recs: Recordings, kit_root: Path = KIT_ROOT) -> Figure:
    """Render one inline marker's specification.  Raises FiguresError on a malformed marker, an
    unknown recording, row or field, and a figure a final recording does not hold."""
    source, row, path, ops, fmt, over = parse_inline(spec)
    if source.startswith("tune/"):
        try:
            value, over, what = _tuning_value(source, row, path, over, recs, kit_root)
            if value is None:
                raise ValueError(f"{what} {path} is null: the sweep did not measure it")
            return Figure(format_value(value, path, ops, fmt, over))
        except (KeyError, ValueError) as err:
            raise FiguresError(str(err).strip('"')) from None
    if source.startswith("lab/"):
        lab_path, raw = _lab_json(source[4:], kit_root)
        if row is None:
            raise FiguresError(f"{source}: name the table: generic, a GPU's slug, or policy")
        if row == "policy":
            table, what = raw.get("targets_policy"), f"{_shown(lab_path)}'s targets_policy"
        elif row == "generic":
            table, what = raw.get("targets", {}).get("generic"), f"{_shown(lab_path)}'s generic targets"
        else:
            device = recs.device(row)
            table, what = raw.get("targets", {}).get(device), f"{_shown(lab_path)}'s targets for {device}"
        if table is None:
            raise FiguresError(f"{what} do not exist")
        try:
            value = _walk(table, path, what)
            if value is None:
                raise ValueError(f"{what}: {path} is null or missing")
            return Figure(format_value(value, path, ops, fmt, over))
        except (KeyError, ValueError) as err:
            raise FiguresError(str(err).strip('"')) from None
    if "/" not in source:
        raise FiguresError(f"{source!r} is not a source (SLUG/RECORD, e.g. h100/tour, or lab/NN)")
    slug, name = source.split("/", 1)
    record = recs.get(slug, name)
    if row is None:
        obj, what = record.data, record.shown
    elif row in record.rows:
        obj, what = record.rows[row], f"{record.shown}, row {row},"
    elif record.provisional:
        return Figure(MISSING_TEXT, f"{record.shown} has no row {row} (yet)", record)
    else:
        raise FiguresError(f"{record.shown} has no row {row} (rows: {', '.join(record.rows) or 'none'})")
    try:
        value = _walk(obj, path, what)
        over = _dividend(obj, over, what)
    except KeyError as err:
        raise FiguresError(str(err).strip('"')) from None
    if value is None:
        if record.provisional:
            return Figure(MISSING_TEXT, f"{what} {path} is null (not transcribed)", record)
        raise FiguresError(f"{what} {path} is null: the run did not measure it, so the text must not quote it")
    try:
        return Figure(format_value(value, path, ops, fmt, over), None, record)
    except ValueError as err:
        raise FiguresError(str(err)) from None


# ------------------------------------------------------------------------------------ files

@dataclass
class Place:
    """One marker of one file: where it is, what the text says and what the recording says."""

    file: str
    line: int
    spec: str
    old: str
    new: str
    missing: list[str] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)    # the records it rests on (their paths)

    @property
    def differs(self) -> bool:
        return self.old != self.new


@dataclass
class Result:
    """What a run over some files found: every marker, errors, and the records used."""

    places: list[Place] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    used: dict[str, Record] = field(default_factory=dict)
    rewritten: dict[Path, str] = field(default_factory=dict)    # path -> new text, where it changed

    @property
    def differences(self) -> list[Place]:
        return [p for p in self.places if p.differs]

    def warnings(self) -> list[str]:
        """One line per provisional record used, and one per figure rendered as MISSING_TEXT."""
        said = []
        for record in self.used.values():
            if record.provisional:
                count = sum(1 for p in self.places if record.shown in p.sources)
                how = (f"grade.py calibrate --json {record.shown}" if record.name == "calibrate"
                       else f"make record SLUG={record.slug}")
                if record.name == "notes":
                    said.append(f"{record.shown}: {count} marker(s) quote development notes, typed from runs that no "
                                "recording holds; a recorded run (make record, make tune) should replace each")
                    continue
                said.append(f"{record.shown} is provisional ({record.data['source']}): {count} marker(s) "
                            f"rest on it; replace it with a recorded run ({how})")
        for p in self.places:
            for why in p.missing:
                said.append(f"{p.file}:{p.line}: {MISSING_TEXT}: {why}")
        return said


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def rewrite_text(text: str, shown: str, recs: Recordings, result: Result, kit_root: Path = KIT_ROOT) -> str:
    """The text with every marker's contents rendered; adds a Place per marker, and the errors
    (malformed or unmatched markers, unknown figures) to `result`.  Markers inside a table's
    generated body are not looked for."""
    pieces, done = [], 0                # the new text, in order; the end of the text copied so far
    spans = []                          # (start, end) of every well-formed marker
    blocks = list(_BLOCK.finditer(text))
    inlines = [m for m in _INLINE.finditer(text) if not any(b.start() <= m.start() < b.end() for b in blocks)]
    for m in sorted(blocks + inlines, key=lambda m: m.start()):
        spans.append(m.span())
        line = _line_of(text, m.start())
        if m.re is _INLINE and not text[text.rfind("\n", 0, m.start()) + 1:m.start()].strip():
            # CommonMark: a line that starts with "<!--" starts an HTML block, even inside a paragraph,
            # and the rest of that line is no longer Markdown.
            result.errors.append(f"{shown}:{line}: <!-- fig {m.group('spec')} --> starts its line, which "
                                 f"Markdown reads as an HTML block: put a word before it on the same line")
        if m.re is _BLOCK:
            try:
                new, missing, record = block(m.group("spec"), recs, kit_root)
            except FiguresError as err:
                result.errors.append(f"{shown}:{line}: <!-- figures {m.group('spec')} -->: {err}")
                continue
            where = m.span("body")
            place = Place(shown, line, m.group("spec"), m.group("body"), new, missing,
                          {record.shown} if record else set())
        else:
            try:
                fig = figure(m.group("spec"), recs, kit_root)
            except FiguresError as err:
                result.errors.append(f"{shown}:{line}: <!-- fig {m.group('spec')} -->: {err}")
                continue
            record, new, where = fig.record, fig.text, m.span("text")
            place = Place(shown, line, m.group("spec"), m.group("text"), new,
                          [fig.missing] if fig.missing else [], {record.shown} if record else set())
        if record is not None:
            result.used[record.shown] = record
        result.places.append(place)
        pieces += [text[done:where[0]], new]
        done = where[1]
    pieces.append(text[done:])
    for m in _ANY_MARKER.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            shown_marker = text[m.start():].split("\n", 1)[0][:70]
            result.errors.append(f"{shown}:{_line_of(text, m.start())}: a marker without its other half, "
                                 f"or malformed: {shown_marker!r}")
    return "".join(pieces)


def default_files(kit_root: Path = KIT_ROOT) -> list[Path]:
    """README.md, grader/README.md, handouts/*.md and reference/*/ANSWERS.md, those that exist."""
    root = Path(kit_root)
    files = [root / "README.md", root / "grader" / "README.md"] + sorted((root / "handouts").glob("*.md")) \
        + sorted((root / "reference").glob("*/ANSWERS.md"))
    return [f for f in files if f.is_file()]


def run(files: list[Path] | None = None, data_dir: Path = DATA_DIR, kit_root: Path = KIT_ROOT) -> Result:
    """Render every marker of `files` (default_files) from the recordings under data_dir; the new
    texts are in result.rewritten (nothing is written here)."""
    result = Result()
    try:
        recs = load_recordings(data_dir)
    except FiguresError as err:
        result.errors += str(err).splitlines()
        return result
    result.errors += consistency(recs, kit_root)
    for path in files if files is not None else default_files(kit_root):
        path = Path(path)
        shown = _shown(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            result.errors.append(f"{shown}: cannot read: {err.strerror or err}")
            continue
        new = rewrite_text(text, shown, recs, result, kit_root)
        if new != text:
            result.rewritten[path] = new
    return result


def report(result: Result, check: bool) -> tuple[int, str]:
    """(exit status, text) of a run: --check lists every difference and exits 1 on any difference
    or error; the rewrite exits 1 on errors only.  Warnings never change the status."""
    out = []
    for err in result.errors:
        out.append(f"error: {err}")
    if check:
        for p in result.differences:
            old, new = p.old.strip(), p.new.strip()
            if "\n" in old or "\n" in new:
                o, n = old.splitlines(), new.splitlines()
                first = next((i for i in range(max(len(o), len(n)))
                              if (o[i] if i < len(o) else None) != (n[i] if i < len(n) else None)), 0)
                old = o[first] if first < len(o) else "(nothing)"
                new = n[first] if first < len(n) else "(nothing)"
                out.append(f"{p.file}:{p.line}: table <!-- figures {p.spec} -->, line {first + 1} of it:\n"
                           f"    text:      {old}\n    recording: {new}")
            else:
                out.append(f"{p.file}:{p.line}: <!-- fig {p.spec} -->: the text says {old!r}, "
                           f"the recording says {new!r}")
    for line in result.warnings():
        out.append(f"warning: {line}")
    figures_count = len(result.places)
    if check:
        bad = len(result.differences)
        if bad or result.errors:
            out.append(f"{bad} of {figures_count} marked figures differ from their recordings, "
                       f"{len(result.errors)} error(s): run `python3 grader/grade.py figures` to rewrite them")
            return 1, "\n".join(out)
        out.append(f"all {figures_count} marked figures match their recordings")
        return 0, "\n".join(out)
    if result.errors:
        out.append("nothing written: fix the errors above first")
        return 1, "\n".join(out)
    for path in result.rewritten:
        out.append(f"rewrote {_shown(path)}")
    out.append(f"{figures_count} marked figures, {len(result.differences)} changed")
    return 0, "\n".join(out)


def write(result: Result) -> None:
    """Write the rewritten texts (only files whose figures changed)."""
    for path, text in result.rewritten.items():
        Path(path).write_text(text, encoding="utf-8")
