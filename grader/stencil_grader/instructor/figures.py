"""The measured figures of README.md, the handouts and the answer keys, written between markers from
recorded runs (records.py; handouts/data/README.md says which command writes each):
`grade.py figures` rewrites them, `grade.py figures --check` exits 1 listing each place that differs.

    <!-- figures h100/tour 3d rows=05/naive_3d,05/reference -->       a tour part's table (the rows
    (generated: the caption and the table)                            named, in order; speed-ups over
    <!-- /figures -->                                                 the rows shown); `figures lab/05
                                                                      rules`: the lab's rules (lab.json)
    <!-- fig h100/tour 05/reference ratio -->0.95<!-- /fig -->          a row's field
    <!-- fig h100/tour device.driver -->580.159.04<!-- /fig -->         a field of the record itself
    <!-- fig h100/check 07/reference launchers.residual_norm2.ratio :.3f -->0.969<!-- /fig -->
    <!-- fig h100/tour 08/reference gbps*9/8 :,.0f -->8,376<!-- /fig -->  arithmetic on a figure
    <!-- fig h100/tour 66908/copy_gbps :.1f -->22.5<!-- /fig -->          a constant (or a field) over it
    <!-- fig lab/05 h100 target -->0.88<!-- /fig -->        lab.json's targets: generic, a SLUG's GPU or policy;
    <!-- fig lab/05 check case_timeout_s :g -->6<!-- /fig -->  `check`: its correctness limits
    <!-- fig tune/05 h100:ROWS_PER_THREAD=1,PLANES_PER_BLOCK=32 ratio -->0.86<!-- /fig -->
                a variant of labs/05-*/tuning/<the GPU of h100>.json; `tune/05 h100 best_ratio` the
                file's own field; `tune/all h100 variants` the count over every lab

An inline marker is `<!-- fig SOURCE [ROW] FIELD [:FORMAT] -->`: SOURCE is SLUG/RECORD (handouts/data/
SLUG/RECORD.json), lab/NN or tune/NN; ROW a row's id (records.row_id); FIELD a dotted path, optionally
after `N/` or `FIELD/` (divided into) and before `*N`, `/N`, `+N`, `-N` (applied in order); FORMAT a
format() specification (default: DEFAULT_FORMATS by the field's last name; a list of numbers reads
"a, b and c").  It may not start a line (CommonMark would read the line as an HTML block).  A figure
a provisional record lacks renders as MISSING_TEXT with a warning; in a final record it is an error.
Every calibrate record's written targets must still be lab.json's (unless the lab has a targets_policy).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .. import KIT_ROOT
from ..base.files import display_path as shown, read_json
from .records import DATA_DIR, Record, RecordError, Recordings, load_recordings
from .tune import tuning_path

#: Default format by a field's last name (format() specifications).
DEFAULT_FORMATS = {"ratio": ".2f", "median": ".3f", "ms_median": ".3f", "ms_per_sweep": ".3f",
                   "gbps": ".0f", "copy_gbps": ".0f", "step_speedup": ".2f", "cumulative_speedup": ".2f",
                   "floor": ".2f", "target": ".2f", "points": ".0f", "max_points": ".0f",
                   "sm_count": "d", "sm_clock_max_mhz": ".0f", "seconds": ".1f", "repetitions": "d",
                   "best_ratio": ".2f", "default_ratio": ".2f", "ms": ".3f", "registers": "d", "variants": "d"}
#: What a figure a provisional recording lacks is rendered as.
MISSING_TEXT = "not measured"

_BLOCK = re.compile(r"<!--[ \t]*figures[ \t]+(?P<spec>[^\n>]*?)[ \t]*-->[ \t]*\n(?P<body>.*?)"
                    r"<!--[ \t]*/figures[ \t]*-->", re.S)
_INLINE = re.compile(r"<!--\s*fig\s+(?P<spec>[^>]*?)\s*-->(?P<text>[^\n]*?)<!--\s*/fig\s*-->")
_ANY_MARKER = re.compile(r"<!--\s*/?fig(?:ures)?\b")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*"
_FIELD = re.compile(rf"^(?:(?P<over>[0-9]+(?:\.[0-9]+)?|{_NAME})/)?(?P<path>{_NAME})"
                    r"(?P<ops>(?:[-+*/][0-9]+(?:\.[0-9]+)?)*)$")
_OP = re.compile(r"([-+*/])([0-9]+(?:\.[0-9]+)?)")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


class Figure(NamedTuple):
    """What a marker renders to: its text, why figures are missing, the record it quotes (or None)."""

    text: str
    missing: list[str]
    record: Record | None


# ------------------------------------------------------------------------------------ one figure

def _walk(obj, path: str, what: str):
    """obj's value at a dotted path (None when a step on the way is null); KeyError when a step is missing."""
    for key in path.split("."):
        if obj is None:
            return None
        if not isinstance(obj, dict) or key not in obj:
            raise KeyError(f"{what} has no field {path!r}")
        obj = obj[key]
    return obj


def format_value(value, path: str, ops: str = "", fmt: str | None = None, over: str | None = None) -> str:
    """A figure as text: a number as `over / value` when over (a number as text) is given, then through
    ops ("*9/8", "-1*100") in order, then fmt (default: DEFAULT_FORMATS by the path's last name, else
    "g"); a list of numbers as "a, b and c"; a string as it is.  ValueError when text is given
    arithmetic or a format, or over divides by 0."""
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
        parts = [format_value(v, path, ops, fmt, over) for v in value]
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
        return format(int(round(value)) if spec.endswith("d") else value, spec)
    if ops or fmt or over:
        raise ValueError(f"{path} is text ({value!r}): it takes no arithmetic or format")
    return str(value)


def lab_json(number: str, kit_root: Path) -> tuple[Path, dict]:
    """labs/NN-*/lab.json's path and contents; RecordError when there is none or it cannot be read."""
    found = sorted((Path(kit_root) / "labs").glob(f"{number}-*/lab.json"))
    if not re.fullmatch(r"\d\d", number) or not found:
        raise RecordError(f"lab/{number}: no labs/{number}-*/lab.json")
    return found[0], read_json(found[0], RecordError)


def _targets(source: str, row: str | None, recs: Recordings, kit_root: Path) -> tuple[dict, str]:
    """(the table, what it is) a `lab/NN TABLE` marker names: a targets table (generic, a GPU's slug, or policy),
    or `check`, the lab's correctness limits (case_timeout_s, suite_timeout_s)."""
    path, raw = lab_json(source[4:], kit_root)
    if row is None:
        raise RecordError(f"{source}: name the table: generic, a GPU's slug, policy or check")
    if row == "policy":
        table, what = raw.get("targets_policy"), f"{shown(path)}'s targets_policy"
    elif row == "check":
        table, what = raw.get("check"), f"{shown(path)}'s check limits"
    elif row == "generic":
        table, what = raw.get("targets", {}).get("generic"), f"{shown(path)}'s generic targets"
    else:
        device = recs.device(row)
        table, what = raw.get("targets", {}).get(device), f"{shown(path)}'s targets for {device}"
    if table is None:
        raise RecordError(f"{what} do not exist")
    return table, what


def _tuning(source: str, row: str | None, path: str, recs: Recordings, kit_root: Path) -> tuple[dict, str]:
    """(the object, what it is) a `tune/NN SLUG[:NAME=V,...]` marker names: a tuning file that `make
    tune` wrote (labs/NN-*/tuning/<gpu>.json) or one variant of it; tune/all: every lab's variants."""
    number = source[5:]
    if row is None:
        raise RecordError(f"{source}: name the GPU, tune/NN SLUG FIELD or tune/NN SLUG:NAME=V,... FIELD")
    slug, _, wanted = row.partition(":")
    device = recs.device(slug)
    labs = sorted((Path(kit_root) / "labs").glob("*-*/" if number == "all" else f"{number}-*/"))
    if not labs or not (number == "all" or re.fullmatch(r"\d\d", number)):
        raise RecordError(f"{source}: no labs/{number}-*/")
    files = [tuning_path(lab, device) for lab in labs]
    if number == "all":
        if path != "variants" or wanted:
            raise RecordError("tune/all SLUG takes one field: variants (their count over every lab)")
        variants = [v for f in files if f.is_file() for v in read_json(f, RecordError).get("variants") or []]
        return {"variants": variants}, f"the tuning files for {device}"
    if not files[0].is_file():
        raise RecordError(f"{shown(files[0])}: no tuning file for {device} (make tune writes it)")
    data = read_json(files[0], RecordError)
    if not wanted:
        return data, shown(files[0])
    try:
        params = {k: int(v) for k, v in (item.split("=", 1) for item in wanted.split(","))}
    except ValueError:
        raise RecordError(f"{row!r}: parameters are NAME=INTEGER, comma separated") from None
    found = [v for v in data.get("variants") or [] if all(v.get("params", {}).get(k) == x for k, x in params.items())]
    if len(found) != 1:
        raise RecordError(f"{shown(files[0])}: {len(found)} variants have {wanted} (name one)")
    return found[0], f"{shown(files[0])}, variant {wanted},"


def figure(spec: str, recs: Recordings, kit_root: Path = KIT_ROOT) -> Figure:
    """Render one inline marker's specification, SOURCE [ROW] FIELD [:FORMAT].  Raises RecordError on a
    malformed marker, an unknown recording, row or field, and a figure a final recording does not hold."""
    tokens, fmt = spec.split(), None
    if tokens and tokens[-1].startswith(":"):
        fmt = tokens.pop()[1:]
        try:
            format(1 if fmt.endswith("d") else 1.0, fmt)
        except ValueError:
            raise RecordError(f"{fmt!r} is not a format specification (e.g. .3f, ,.0f, d)") from None
    if len(tokens) not in (2, 3):
        raise RecordError(f"an inline marker is <!-- fig SOURCE [ROW] FIELD [:FORMAT] -->, got {spec!r}")
    source, row, fld = tokens[0], (tokens[1] if len(tokens) == 3 else None), tokens[-1]
    m = _FIELD.match(fld)
    if not m:
        raise RecordError(f"{fld!r} is not a field (a dotted name, optionally N/ or FIELD/ before it and "
                          "*N, /N, +N or -N after it)")
    path, ops, over = m.group("path", "ops", "over")
    record, null = None, ": the run did not measure it, so the text must not quote it"
    if source.startswith("tune/"):
        (obj, what), null = _tuning(source, row, path, recs, kit_root), ": the sweep did not measure it"
    elif source.startswith("lab/"):
        (obj, what), null = _targets(source, row, recs, kit_root), " or missing"
    elif "/" not in source:
        raise RecordError(f"{source!r} is not a source (SLUG/RECORD, e.g. h100/tour, or lab/NN)")
    else:
        record = recs.get(*source.split("/", 1))
        if row is None:
            obj, what = record.data, record.shown
        elif row in record.rows:
            obj, what = record.rows[row], f"{record.shown}, row {row},"
        elif record.provisional:
            return Figure(MISSING_TEXT, [f"{record.shown} has no row {row} (yet)"], record)
        else:
            raise RecordError(f"{record.shown} has no row {row} (rows: {', '.join(record.rows) or 'none'})")
    try:
        value = _walk(obj, path, what)
        if over is not None and not _NUMBER.fullmatch(over):     # a field of the same object divides
            dividend = _walk(obj, over, what)
            if isinstance(dividend, bool) or not isinstance(dividend, (int, float)):
                raise KeyError(f"{what} {over} is not a number, so it cannot divide")
            over = repr(float(dividend))
        if value is None and record is not None and record.provisional:
            return Figure(MISSING_TEXT, [f"{what} {path} is null (not transcribed)"], record)
        if value is None:
            raise ValueError(f"{what} {path} is null{null}")
        if source.startswith("tune/") and isinstance(value, list):
            value = len(value)
        return Figure(format_value(value, path, ops, fmt, over), [], record)
    except (KeyError, ValueError) as err:
        raise RecordError(str(err).strip('"')) from None


# ------------------------------------------------------------------------------------ tables

def provenance(record: Record) -> str:
    """"NVIDIA H100 80GB HBM3 (compute capability 9.0, 132 SMs; CUDA 13.0, driver 580.159.04),
    2026-11-23": the device as the record describes it, and the day."""
    d = record.data["device"]
    facts = [f"compute capability {d['compute_capability']}" if d.get("compute_capability") else None,
             f"{d['sm_count']} SMs" if d.get("sm_count") else None]
    soft = [f"CUDA {d['cuda']}" if d.get("cuda") else None, f"driver {d['driver']}" if d.get("driver") else None]
    inside = "; ".join(filter(None, (", ".join(filter(None, facts)), ", ".join(filter(None, soft)))))
    day = record.data.get("date")
    return f"{d['name']}" + (f" ({inside})" if inside else "") + (f", {day}" if day else "")


def _fill(text: str, width: int = 116) -> str:
    """Wrap a caption to the handouts' line width, never inside a `code span`."""
    protected = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\x00"), text)
    return textwrap.fill(protected, width, break_long_words=False, break_on_hyphens=False).replace("\x00", " ")


def tour_table(spec: str, recs: Recordings) -> Figure:
    """The body of a table marker `SLUG/tour PART [rows=ID,...]`: a caption naming the run (its GPU,
    day and one copy bandwidth, whichever rows are shown) and the table."""
    tokens = spec.split()
    rows_arg = [t for t in tokens if t.startswith("rows=")]
    tokens = [t for t in tokens if not t.startswith("rows=")]
    if len(tokens) != 2 or len(rows_arg) > 1 or "/" not in tokens[0]:
        raise RecordError(f"a table marker is <!-- figures SLUG/tour PART [rows=ID,ID] -->, got {spec!r}")
    slug, name = tokens[0].split("/", 1)
    if name != "tour":
        raise RecordError(f"tables come from tour records, not {name!r}")
    record, part_id = recs.get(slug, name), tokens[1]
    part = next((p for p in record.data["parts"] if p["id"] == part_id), None)
    if part is None and not record.provisional:
        raise RecordError(f"{record.shown} has no part {part_id} "
                          f"(parts: {', '.join(p['id'] for p in record.data['parts']) or 'none'})")
    in_part = {r["id"]: r for r in record.data["rows"] if r.get("part") == part_id}
    wanted = rows_arg[0][5:].split(",") if rows_arg else list(in_part)
    if not wanted:
        raise RecordError(f"{record.shown}: part {part_id} has no rows to show")
    speedups = len(wanted) > 1               # a table of one row has nothing to compare
    head = [f"kernel ({(part or {}).get('title', part_id)})", "ms per sweep", "GB/s", "fraction of copy"] \
        + (["step speed-up", "cumulative speed-up"] if speedups else [])
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    missing, first, above = [], None, None
    for rid in wanted:
        row = in_part.get(rid)
        if row is None and not record.provisional:
            raise RecordError(f"{record.shown}: part {part_id} has no row {rid} (rows: {', '.join(in_part) or 'none'})")
        if row is None:
            missing.append(f"{record.shown} has no row {rid} in part {part_id} (yet)")
            lines.append(f"| {rid} | " + " | ".join([MISSING_TEXT] * (len(head) - 1)) + " |")
            continue
        cells = [row.get("kernel") or rid]
        for key, fmt in (("ms_per_sweep", ".3f"), ("gbps", ".0f"), ("ratio", ".2f")):
            if row.get(key) is None and not record.provisional:
                raise RecordError(f"{record.shown}, row {rid}: {key} is null")
            if row.get(key) is None:
                missing.append(f"{record.shown}, row {rid}: {key} is null (not transcribed)")
            cells.append(MISSING_TEXT if row.get(key) is None else format(row[key], fmt))
        ms = row.get("ms_per_sweep")
        step = "-" if above is None or not ms else f"{above / ms:.2f}x"
        cumulative = "-" if first is None or not ms else f"{first / ms:.2f}x"
        if first is None and ms:
            first, cumulative = ms, "1.00x"
        cells += [step, cumulative] if speedups else []
        above = ms or above
        lines.append("| " + " | ".join(cells) + " |")
    copy = record.data.get("copy_gbps")
    runs = sum(isinstance(r.get("copy_gbps"), (int, float)) for r in record.data["rows"])
    caption = [f"`make tour` on an {provenance(record)}, recorded in `{record.shown}`"
               + (f"; copy bandwidth {copy:.0f} GB/s, the median of its {runs} bench runs"
                  if isinstance(copy, (int, float)) else "") + "."]
    if speedups:
        caption.append("Step: speed-up per sweep over the row above; cumulative: over the first row.")
    if record.provisional:
        caption.append(f"Provisional: {record.data['source']}; the kit's own run will replace them.")
    return Figure(_fill("*" + " ".join(caption) + "*") + "\n\n" + "\n".join(lines) + "\n", missing, record)


#: What the grader judges for each rule without a sentence of its own in lab.json.
NO_DIV_REM_RULE = ("No kernel your launcher starts executes an integer division or remainder (a `div` or `rem` "
                   "instruction of any integer width in the machine code the driver loaded): wrap indices with "
                   "compares and adds. Floating-point division, division by a constant the compiler turns into "
                   "a multiply, and host code are not counted; the report lists each instruction found.")
SHARED_MEMORY_RULE = "At least one kernel your launcher starts reads shared memory."


def rules_text(number: str, kit_root) -> str:
    """The body of `<!-- figures lab/NN rules -->`: a bullet per rule of labs/NN-*/lab.json's constraints,
    in the words the grader judges it by (the rule's own sentence where lab.json has one), and its cost."""
    _, raw = lab_json(number, kit_root)
    c = raw.get("constraints") or {}
    rules = []
    if c.get("shared_tile"):
        rules.append(("the shared-memory tile", c["shared_tile"]["rule"]))
    elif c.get("shared_memory"):
        rules.append(("shared memory", SHARED_MEMORY_RULE))
    if c.get("no_div_rem"):
        rules.append(("no integer division", NO_DIV_REM_RULE))
    if c.get("grid_storage"):
        rules.append((f"{c['grid_storage']['type']} storage", c["grid_storage"]["rule"]))
    if c.get("forbidden_calls"):
        rules.append(("this lab's forbidden calls",
                      "Your file calls none of " + ", ".join(f"`{n}`" for n in c["forbidden_calls"]) + "."))
    cost = ("- **What a rule costs.** Each rule is judged on what ran (the machine code the driver loaded and the "
            "launches the bench audited), never on what the file declares; failing one costs the "
            f"{(raw.get('points') or {}).get('performance')} performance points, and correctness still runs and "
            "counts (`constraints` in `lab.json`; the report's static checks and launches say what was seen).")
    lines = [f"- **Rule: {name}.** {rule}" for name, rule in rules] + [cost]
    return "\n".join(textwrap.fill(line, 114, subsequent_indent="  ") for line in lines) + "\n"


def block(spec: str, recs: Recordings, kit_root) -> Figure:
    """A block marker's body: `lab/NN rules` (rules_text) or a tour table (tour_table)."""
    tokens = spec.split()
    if len(tokens) == 2 and tokens[0].startswith("lab/") and tokens[1] == "rules":
        return Figure(rules_text(tokens[0][4:], kit_root), [], None)
    return tour_table(spec, recs)


def consistency(recs: Recordings, kit_root: Path = KIT_ROOT) -> list[str]:
    """Errors where a calibrate record's written targets are no longer its GPU's in lab.json."""
    errors = []
    for (slug, name), record in sorted(recs.records.items()):
        device = record.data["device"]["name"]
        for row in record.data["rows"] if name == "calibrate" else []:
            if not row.get("written") or row.get("policy"):
                continue
            try:
                path, raw = lab_json(row["id"][:2], kit_root)
            except RecordError as err:
                errors.append(f"{record.shown}: row {row['id']}: {err}")
                continue
            entry = raw.get("targets", {}).get(device) or {}
            got = entry.get("floor"), entry.get("target")
            if "targets_policy" not in raw and got != (row.get("floor"), row.get("target")):
                errors.append(f"{shown(path)}: the targets for {device} are floor {got[0]}, target {got[1]}, "
                              f"but {record.shown} recorded floor {row.get('floor')}, target {row.get('target')}: "
                              f"record the calibration you ran (grade.py calibrate --json {record.shown})")
    return errors


# ------------------------------------------------------------------------------------ files

class Place(NamedTuple):
    """One marker of one file: where it is, what the text says, what the recording says, why figures
    are missing, and the record it rests on (or None)."""

    file: str
    line: int
    spec: str
    old: str
    new: str
    missing: list[str]
    record: Record | None


@dataclass
class Result:
    """What a run over some files found: every marker, and errors."""

    places: list[Place] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rewritten: dict[Path, str] = field(default_factory=dict)    # path -> new text, where it changed

    @property
    def differences(self) -> list[Place]:
        return [p for p in self.places if p.old != p.new]

    def warnings(self) -> list[str]:
        """One line per provisional record used, and one per figure rendered as MISSING_TEXT."""
        said, used = [], {p.record.shown: p.record for p in self.places if p.record}
        for record in (r for r in used.values() if r.provisional):
            count = sum(p.record is record for p in self.places)
            how = (f"grade.py calibrate --json {record.shown}" if record.name == "calibrate"
                   else f"make record SLUG={record.slug}")
            said.append(f"{record.shown}: {count} marker(s) quote development notes, typed from runs that no "
                        "recording holds; a recorded run (make record, make tune) should replace each"
                        if record.name == "notes" else
                        f"{record.shown} is provisional ({record.data['source']}): {count} marker(s) "
                        f"rest on it; replace it with a recorded run ({how})")
        return said + [f"{p.file}:{p.line}: {MISSING_TEXT}: {why}" for p in self.places for why in p.missing]


def rewrite_text(text: str, where: str, recs: Recordings, result: Result, kit_root: Path = KIT_ROOT) -> str:
    """The text with every marker's contents rendered; adds a Place per marker, and the errors
    (malformed or unmatched markers, unknown figures) to `result`.  Markers inside a table's
    generated body are not looked for."""
    pieces, done = [], 0                # the new text, in order; the end of the text copied so far
    spans = []                          # (start, end) of every well-formed marker
    blocks = list(_BLOCK.finditer(text))
    inlines = [m for m in _INLINE.finditer(text) if not any(b.start() <= m.start() < b.end() for b in blocks)]
    for m in sorted(blocks + inlines, key=lambda m: m.start()):
        spans.append(m.span())
        line, inline = text.count("\n", 0, m.start()) + 1, m.re is _INLINE
        marker = f"<!-- {'fig' if inline else 'figures'} {m.group('spec')} -->"
        if inline and not text[text.rfind("\n", 0, m.start()) + 1:m.start()].strip():
            result.errors.append(f"{where}:{line}: {marker} starts its line, which Markdown reads as an HTML "
                                 "block: put a word before it on the same line")
        try:
            fig = (figure if inline else block)(m.group("spec"), recs, kit_root)
        except RecordError as err:
            result.errors.append(f"{where}:{line}: {marker}: {err}")
            continue
        body = "text" if inline else "body"
        result.places.append(Place(where, line, m.group("spec"), m.group(body), *fig))
        pieces += [text[done:m.start(body)], fig.text]
        done = m.end(body)
    pieces.append(text[done:])
    for m in _ANY_MARKER.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            result.errors.append(f"{where}:{text.count(chr(10), 0, m.start()) + 1}: a marker without its other half, "
                                 f"or malformed: {text[m.start():].split(chr(10), 1)[0][:70]!r}")
    return "".join(pieces)


def default_files(kit_root: Path = KIT_ROOT) -> list[Path]:
    """README.md, grader/README.md, handouts/data/README.md, handouts/*.md and reference/*/ANSWERS.md, those
    that exist."""
    root = Path(kit_root)
    files = [root / "README.md", root / "grader" / "README.md", root / "handouts" / "data" / "README.md"] \
        + sorted((root / "handouts").glob("*.md")) \
        + sorted((root / "reference").glob("*/ANSWERS.md"))
    return [f for f in files if f.is_file()]


def run(files: list[Path] | None = None, data_dir: Path = DATA_DIR, kit_root: Path = KIT_ROOT) -> Result:
    """Render every marker of `files` (default_files) from the recordings under data_dir; the new
    texts are in result.rewritten (nothing is written here)."""
    result = Result()
    try:
        recs = load_recordings(data_dir)
    except RecordError as err:
        result.errors += str(err).splitlines()
        return result
    result.errors += consistency(recs, kit_root)
    for path in map(Path, files if files is not None else default_files(kit_root)):
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            result.errors.append(f"{shown(path)}: cannot read: {err.strerror or err}")
            continue
        new = rewrite_text(text, shown(path), recs, result, kit_root)
        if new != text:
            result.rewritten[path] = new
    return result


def report(result: Result, check: bool) -> tuple[int, str]:
    """(exit status, text) of a run: --check lists every difference and exits 1 on any difference
    or error; the rewrite exits 1 on errors only.  Warnings never change the status."""
    out = [f"error: {err}" for err in result.errors]
    for p in result.differences if check else []:
        old, new = p.old.strip(), p.new.strip()
        if "\n" in old or "\n" in new:           # a table: its first line that differs
            o, n = old.splitlines() + ["(nothing)"], new.splitlines() + ["(nothing)"]
            i = next((i for i in range(min(len(o), len(n))) if o[i] != n[i]), 0)
            out.append(f"{p.file}:{p.line}: table <!-- figures {p.spec} -->, line {i + 1} of it:\n"
                       f"    text:      {o[i]}\n    recording: {n[i]}")
        else:
            out.append(f"{p.file}:{p.line}: <!-- fig {p.spec} -->: the text says {old!r}, the recording says {new!r}")
    out += [f"warning: {line}" for line in result.warnings()]
    count, bad = len(result.places), len(result.differences)
    if check and (bad or result.errors):
        return 1, "\n".join(out + [f"{bad} of {count} marked figures differ from their recordings, "
                                   f"{len(result.errors)} error(s): run `python3 grader/grade.py figures` "
                                   "to rewrite them"])
    if check:
        return 0, "\n".join(out + [f"all {count} marked figures match their recordings"])
    if result.errors:
        return 1, "\n".join(out + ["nothing written: fix the errors above first"])
    out += [f"rewrote {shown(path)}" for path in result.rewritten]
    return 0, "\n".join(out + [f"{count} marked figures, {bad} changed"])


def write(result: Result) -> None:
    """Write the rewritten texts (only files whose figures changed)."""
    for path, text in result.rewritten.items():
        Path(path).write_text(text, encoding="utf-8")
