"""The measured figures of README.md, the handouts and the answer keys, rendered from recorded runs.

    python3 grader/grade.py figures            # rewrite every marked figure from the recordings
    python3 grader/grade.py figures --check    # exit 1, listing every place where the text differs

A figure that was measured is never typed into the text: the text holds a marker, and this module
writes the figure between the marker's two halves from a *recorded run*, a JSON file under
handouts/data/SLUG/ (SLUG names a GPU, e.g. h100, h200) written by the kit itself:

    handouts/data/SLUG/tour.json       grade.py tour --json FILE        (make tour)
    handouts/data/SLUG/check.json      grade.py record-check FILE       (after make check)
    handouts/data/SLUG/calibrate.json  grade.py calibrate --json FILE   (make calibrate)

tools/tour.py (RECORD_FORMAT) documents what a record holds.  `make record SLUG=h100` on a GPU
writes the first two (calibrate.json only comes from a calibration), then `grade.py figures`
rewrites the text.  handouts/data/README.md is the instructor's guide to all this.

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

SOURCE is SLUG/RECORD (handouts/data/SLUG/RECORD.json) or lab/NN.  ROW is a row's id ("NN/impl",
tour.row_id); without ROW the field is the record's own (device.name, date, copy_gbps, ...).
FIELD is a dotted path, optionally preceded by `N/` (N divided by the figure) and followed by
factors `*N` or `/N` applied in order.  FORMAT is a Python format specification (`.3f`, `,.0f`,
`d`); without one, DEFAULT_FORMATS decides by the field's last name, and strings are written as
they are.  An inline marker may not start a line: CommonMark reads a line that starts with `<!--`
as an HTML block, even inside a paragraph, and the rest of the line would not be Markdown.

Provisional recordings
----------------------
A record with "provisional": true (figures transcribed from elsewhere until the kit's own run
replaces them) renders like any other, and --check prints a warning naming it.  A figure such a
record lacks (a row it does not have, a null field) renders as MISSING_TEXT, with a warning; in a
final record the same is an error, because the text must not quote what the run did not measure.

Consistency with lab.json: every calibrate record's rows that were written into lab.json must
still match that lab.json's targets for the record's device (unless the lab now has a
targets_policy), or the "the reference measured X" figures next to those targets would describe
another calibration.
"""

from __future__ import annotations

import json
import re
import statistics
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from .tour import RECORD_FORMAT

#: Where the recorded runs live: one folder per GPU (its slug), one file per record kind.
DATA_DIR = KIT_ROOT / "handouts" / "data"
RECORD_KINDS = ("tour", "check", "calibrate", "archs")
#: What a figure the provisional recording lacks is rendered as.
MISSING_TEXT = "not measured"

#: Default format by a field's last name (format() specifications).
DEFAULT_FORMATS = {"ratio": ".2f", "median": ".3f", "ms_median": ".3f", "ms_per_sweep": ".3f",
                   "gbps": ".0f", "copy_gbps": ".0f", "step_speedup": ".2f", "cumulative_speedup": ".2f",
                   "floor": ".2f", "target": ".2f", "points": ".0f", "max_points": ".0f",
                   "sm_count": "d", "sm_clock_max_mhz": ".0f", "seconds": ".1f", "repetitions": "d"}

_BLOCK = re.compile(r"<!--[ \t]*figures[ \t]+(?P<spec>[^\n>]*?)[ \t]*-->[ \t]*\n(?P<body>.*?)"
                    r"<!--[ \t]*/figures[ \t]*-->", re.S)
_INLINE = re.compile(r"<!--\s*fig\s+(?P<spec>[^>]*?)\s*-->(?P<text>[^\n]*?)<!--\s*/fig\s*-->")
_ANY_MARKER = re.compile(r"<!--\s*/?fig(?:ures)?\b")
_FIELD = re.compile(r"^(?:(?P<over>[0-9]+(?:\.[0-9]+)?)/)?(?P<path>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
                    r"(?P<ops>(?:[*/][0-9]+(?:\.[0-9]+)?)*)$")
_OP = re.compile(r"([*/])([0-9]+(?:\.[0-9]+)?)")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class FiguresError(Exception):
    """The recordings cannot be read, or a marker is malformed; the message says where and why."""


# ------------------------------------------------------------------------------------ recordings

@dataclass
class Record:
    """One recorded run: handouts/data/SLUG/NAME.json, its rows by id."""

    path: Path
    slug: str
    name: str
    data: dict = field(repr=False)
    rows: dict[str, dict] = field(repr=False)

    @property
    def provisional(self) -> bool:
        return bool(self.data.get("provisional"))

    @property
    def shown(self) -> str:
        return _shown(self.path)


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(KIT_ROOT))
    except ValueError:
        return str(path)


def validate_record(data, path: Path) -> list[str]:
    """The problems of one record (RECORD_FORMAT), each naming the file and the key; [] when good."""
    where = _shown(path)
    if not isinstance(data, dict):
        return [f"{where}: the top level must be an object"]
    problems = []

    def need(key, test, allowed):
        if key not in data:
            problems.append(f"{where}: {key} is missing ({allowed})")
        elif not test(data[key]):
            problems.append(f"{where}: {key} must be {allowed}, got {json.dumps(data[key])}")

    need("record", lambda v: v == Path(path).stem, f'"{Path(path).stem}" (the file\'s name)')
    need("format", lambda v: v == RECORD_FORMAT, f"{RECORD_FORMAT} (the format this grader reads)")
    need("provisional", lambda v: isinstance(v, bool), "true or false")
    need("source", lambda v: isinstance(v, str) and v.strip(), "a non-empty string saying how it was made")
    need("date", lambda v: isinstance(v, str) and _DATE.match(v) or v is None and data.get("provisional") is True,
         "a day, YYYY-MM-DD (null only in a provisional placeholder)")
    need("device", lambda v: isinstance(v, dict) and isinstance(v.get("name"), str) and v["name"].strip(),
         "an object whose name is the GPU's name")
    need("rows", lambda v: isinstance(v, list), "a list of row objects")
    seen = set()
    for i, row in enumerate(data.get("rows") or []):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            problems.append(f"{where}: rows[{i}] must be an object with a string id")
        elif row["id"] in seen:
            problems.append(f"{where}: rows[{i}]: the id {row['id']} appears twice")
        else:
            seen.add(row["id"])
    if data.get("record") == "tour":
        parts = data.get("parts")
        if not isinstance(parts, list) or not all(isinstance(p, dict) and "id" in p for p in parts):
            problems.append(f"{where}: parts must be a list of objects with an id")
        else:
            known = {p["id"] for p in parts}
            for row in data.get("rows") or []:
                if isinstance(row, dict) and row.get("part") not in known:
                    problems.append(f"{where}: row {row.get('id')}: part {json.dumps(row.get('part'))} "
                                    f"is not one of the parts ({', '.join(sorted(known)) or 'none'})")
    return problems


@dataclass
class Recordings:
    """Every record under a data folder, by (slug, name)."""

    root: Path
    records: dict[tuple[str, str], Record] = field(default_factory=dict)

    def get(self, slug: str, name: str) -> Record:
        try:
            return self.records[(slug, name)]
        except KeyError:
            have = ", ".join(f"{s}/{n}" for s, n in sorted(self.records)) or "none"
            raise FiguresError(f"no recording {slug}/{name} ({_shown(self.root / slug / (name + '.json'))} "
                               f"does not exist; recordings: {have})") from None

    def device(self, slug: str) -> str:
        """The GPU name the records of folder `slug` share."""
        names = {r.data["device"]["name"] for (s, _), r in self.records.items() if s == slug}
        if not names:
            raise FiguresError(f"no recording under {_shown(self.root / slug)} names the GPU of {slug!r}")
        return names.pop()


def load_recordings(root: Path = DATA_DIR) -> Recordings:
    """Read and validate every root/SLUG/KIND.json.  Raises FiguresError listing every problem,
    including two records of one folder that name different GPUs."""
    root = Path(root)
    recs = Recordings(root)
    problems = []
    for path in sorted(root.glob("*/*.json")) if root.is_dir() else []:
        slug, name = path.parent.name, path.stem
        if not _SLUG.match(slug):
            problems.append(f"{_shown(path)}: the folder name {slug!r} is not a slug (lower-case, digits, -)")
            continue
        if name not in RECORD_KINDS:
            problems.append(f"{_shown(path)}: not a record kind ({', '.join(RECORD_KINDS)})")
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as err:
            problems.append(f"{_shown(path)}: cannot read: {err}")
            continue
        except json.JSONDecodeError as err:
            problems.append(f"{_shown(path)}: not JSON: {err.msg} at line {err.lineno} column {err.colno}")
            continue
        found = validate_record(data, path)
        if found:
            problems += found
            continue
        recs.records[(slug, name)] = Record(path, slug, name, data, {r["id"]: r for r in data["rows"]})
    for slug in sorted({s for s, _ in recs.records}):
        names = {r.data["device"]["name"] for (s, _), r in recs.records.items() if s == slug}
        if len(names) > 1:
            problems.append(f"{_shown(root / slug)}: its records name different GPUs ({', '.join(sorted(names))})")
    if problems:
        raise FiguresError("\n".join(problems))
    return recs


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
    point), then through the factors in ops ("*9/8"), then the format (or DEFAULT_FORMATS by the
    path's last name, else "g"); strings as they are."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if over is not None:
            if value == 0:
                raise ValueError(f"{over}/{path}: {path} is 0")
            value = float(over) / value
        for op, number in _OP.findall(ops):
            value = value * float(number) if op == "*" else value / float(number)
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
        raise FiguresError(f"{fld!r} is not a field (a dotted name, optionally N/ before it and *N or /N "
                           "factors after it)")
    return source, (row[0] if row else None), m.group("path"), m.group("ops"), fmt, m.group("over")


def _lab_json(number: str, kit_root: Path) -> tuple[Path, dict]:
    found = sorted((Path(kit_root) / "labs").glob(f"{number}-*/lab.json"))
    if not re.fullmatch(r"\d\d", number) or not found:
        raise FiguresError(f"lab/{number}: no labs/{number}-*/lab.json")
    path = found[0]
    try:
        return path, json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise FiguresError(f"{_shown(path)}: cannot read: {err}") from None


def figure(spec: str, recs: Recordings, kit_root: Path = KIT_ROOT) -> Figure:
    """Render one inline marker's specification.  Raises FiguresError on a malformed marker, an
    unknown recording, row or field, and a figure a final recording does not hold."""
    source, row, path, ops, fmt, over = parse_inline(spec)
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


# ------------------------------------------------------------------------------------ tables

def tour_table(spec: str, recs: Recordings) -> tuple[str, list[str], Record]:
    """The body of a table marker `SLUG/tour PART [rows=ID,...]`: a caption naming the run and
    the table.  Returns (text, why-missing notes, record).  Raises FiguresError."""
    tokens = spec.split()
    rows_arg = [t for t in tokens if t.startswith("rows=")]
    tokens = [t for t in tokens if not t.startswith("rows=")]
    if len(tokens) != 2 or len(rows_arg) > 1 or "/" not in tokens[0]:
        raise FiguresError(f"a table marker is <!-- figures SLUG/tour PART [rows=ID,ID] -->, got {spec!r}")
    slug, name = tokens[0].split("/", 1)
    if name != "tour":
        raise FiguresError(f"tables come from tour records, not {name!r}")
    record = recs.get(slug, name)
    parts = {p["id"]: p for p in record.data["parts"]}
    part_id = tokens[1]
    part = parts.get(part_id)
    if part is None and not record.provisional:
        raise FiguresError(f"{record.shown} has no part {part_id} (parts: {', '.join(parts) or 'none'})")
    in_part = [r for r in record.data["rows"] if r.get("part") == part_id]
    wanted = rows_arg[0][5:].split(",") if rows_arg else [r["id"] for r in in_part]
    missing = []
    shown = []
    for rid in wanted:
        row = next((r for r in in_part if r["id"] == rid), None)
        if row is None:
            if not record.provisional:
                raise FiguresError(f"{record.shown}: part {part_id} has no row {rid} "
                                   f"(rows: {', '.join(r['id'] for r in in_part) or 'none'})")
            missing.append(f"{record.shown} has no row {rid} in part {part_id} (yet)")
        shown.append((rid, row))
    if not shown:
        raise FiguresError(f"{record.shown}: part {part_id} has no rows to show")
    title = (part or {}).get("title", part_id)
    speedups = len(shown) > 1               # a table of one row has nothing to compare
    head = [f"kernel ({title})", "ms per sweep", "GB/s", "fraction of copy"] \
        + (["step speed-up", "cumulative speed-up"] if speedups else [])
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    first = above = None
    for rid, row in shown:
        if row is None:
            lines.append(f"| {rid} | " + " | ".join([MISSING_TEXT] * (len(head) - 1)) + " |")
            continue
        ms = row.get("ms_per_sweep")
        cells = [row.get("kernel") or rid]
        for key, spec_ in (("ms_per_sweep", ".3f"), ("gbps", ".0f"), ("ratio", ".2f")):
            value = row.get(key)
            if value is None:
                if not record.provisional:
                    raise FiguresError(f"{record.shown}, row {rid}: {key} is null")
                missing.append(f"{record.shown}, row {rid}: {key} is null (not transcribed)")
                cells.append(MISSING_TEXT)
            else:
                cells.append(format(value, spec_))
        step = "-" if above is None or not ms else f"{above / ms:.2f}x"
        cumulative = "-" if first is None or not ms else f"{first / ms:.2f}x"
        if first is None and ms:
            first, cumulative = ms, "1.00x"
        cells += [step, cumulative] if speedups else []
        above = ms or above
        lines.append("| " + " | ".join(cells) + " |")
    copies = [r["copy_gbps"] for _, r in shown if r and isinstance(r.get("copy_gbps"), (int, float))]
    copy = statistics.median(copies) if copies else record.data.get("copy_gbps")
    caption = [f"`make tour` on an {provenance(record)}, recorded in `{record.shown}`"
               + (f"; copy bandwidth {copy:.0f} GB/s (median of the runs)." if copy else ".")]
    if speedups:
        caption.append("Step: speed-up per sweep over the row above; cumulative: over the first row.")
    if record.provisional:
        caption.append(f"Provisional: {record.data['source']}; the kit's own run will replace them.")
    text = _fill("*" + " ".join(caption) + "*") + "\n\n" + "\n".join(lines) + "\n"
    return text, missing, record


def _fill(text: str, width: int = 116) -> str:
    """Wrap a caption to the handouts' line width, never inside a `code span`."""
    protected = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\x00"), text)
    return textwrap.fill(protected, width, break_long_words=False, break_on_hyphens=False).replace("\x00", " ")


def provenance(record: Record) -> str:
    """"NVIDIA H100 80GB HBM3 (compute capability 9.0, 132 SMs; CUDA 13.0, driver 580.159.04),
    2026-11-23": the device as the record describes it, and the day."""
    d = record.data["device"]
    facts = []
    if d.get("compute_capability"):
        facts.append(f"compute capability {d['compute_capability']}")
    if d.get("sm_count"):
        facts.append(f"{d['sm_count']} SMs")
    soft = [f"CUDA {d['cuda']}" if d.get("cuda") else None, f"driver {d['driver']}" if d.get("driver") else None]
    soft = [s for s in soft if s]
    inside = ", ".join(facts) + ("; " if facts and soft else "") + ", ".join(soft)
    day = record.data.get("date")
    return f"{d['name']}" + (f" ({inside})" if inside else "") + (f", {day}" if day else "")


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
                new, missing, record = tour_table(m.group("spec"), recs)
            except FiguresError as err:
                result.errors.append(f"{shown}:{line}: <!-- figures {m.group('spec')} -->: {err}")
                continue
            where = m.span("body")
            place = Place(shown, line, m.group("spec"), m.group("body"), new, missing, {record.shown})
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
    """README.md, handouts/*.md and reference/*/ANSWERS.md, those that exist."""
    root = Path(kit_root)
    files = [root / "README.md"] + sorted((root / "handouts").glob("*.md")) \
        + sorted((root / "reference").glob("*/ANSWERS.md"))
    return [f for f in files if f.is_file()]


def consistency(recs: Recordings, kit_root: Path = KIT_ROOT) -> list[str]:
    """Errors where a calibrate record's written targets no longer match lab.json."""
    errors = []
    for (slug, name), record in sorted(recs.records.items()):
        if name != "calibrate":
            continue
        device = record.data["device"]["name"]
        for row in record.data["rows"]:
            if not row.get("written") or row.get("policy"):
                continue
            try:
                path, raw = _lab_json(row["id"][:2], kit_root)
            except FiguresError as err:
                errors.append(f"{record.shown}: row {row['id']}: {err}")
                continue
            if "targets_policy" in raw:
                continue
            entry = raw.get("targets", {}).get(device)
            got = (entry or {}).get("floor"), (entry or {}).get("target")
            if got != (row.get("floor"), row.get("target")):
                errors.append(f"{_shown(path)}: the targets for {device} are floor {got[0]}, target {got[1]}, "
                              f"but {record.shown} recorded floor {row.get('floor')}, target {row.get('target')}: "
                              f"record the calibration you ran (grade.py calibrate --json {record.shown})")
    return errors


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
