"""The tables of the tour's parts that the handouts and README.md show: `<!-- figures SLUG/tour PART
[rows=ID,...] -->` markers (figures.py), rendered from a recorded tour with a caption naming the run;
and each handout's rules, `<!-- figures lab/NN rules -->`, rendered from labs/NN-*/lab.json's
constraints (rules_text), so that "How it is graded" says what the grader judges.

    tour_table(spec, recs) -> (text, why-missing notes, record)
    provenance(record) -> str       "NVIDIA H100 80GB HBM3 (compute capability 9.0, ...), 2026-11-25"
"""

from __future__ import annotations

import re
import textwrap

from .recordings import MISSING_TEXT, FiguresError, Record, Recordings


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
    caption = [f"`make tour` on an {provenance(record)}, recorded in `{record.shown}`" + copy_note(record) + "."]
    if speedups:
        caption.append("Step: speed-up per sweep over the row above; cumulative: over the first row.")
    if record.provisional:
        caption.append(f"Provisional: {record.data['source']}; the kit's own run will replace them.")
    text = _fill("*" + " ".join(caption) + "*") + "\n\n" + "\n".join(lines) + "\n"
    return text, missing, record


def copy_note(record: Record) -> str:
    """"; copy bandwidth 2961 GB/s, the median of its 14 bench runs": one figure per recorded run
    (the record's copy_gbps, instructor/records.py), whichever of its rows a table shows; "" when the
    record has none."""
    copy = record.data.get("copy_gbps")
    if not isinstance(copy, (int, float)):
        return ""
    runs = sum(isinstance(r.get("copy_gbps"), (int, float)) for r in record.data.get("rows") or [])
    return f"; copy bandwidth {copy:.0f} GB/s, the median of its {runs} bench runs"


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


# ---------------------------------------------------------------- the rules of a lab, from lab.json

#: What the grader judges for each rule without a sentence of its own in lab.json.
NO_DIV_REM_RULE = ("No kernel your launcher starts executes an integer division or remainder (a `div` or `rem` "
                   "instruction of any integer width in the machine code the driver loaded): wrap indices with "
                   "compares and adds. Floating-point division, division by a constant the compiler turns into "
                   "a multiply, and host code are not counted; the report lists each instruction found.")
SHARED_MEMORY_RULE = "At least one kernel your launcher starts reads shared memory."


def rules_text(number: str, kit_root) -> str:
    """The body of `<!-- figures lab/NN rules -->`: one bullet per rule of labs/NN-*/lab.json's
    constraints, in the words the grader judges it by (each rule's own sentence where lab.json
    has one), and what failing one costs.  Raises FiguresError."""
    from .recordings import lab_json
    _, raw = lab_json(number, kit_root)
    c = raw.get("constraints") or {}
    performance = (raw.get("points") or {}).get("performance")
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
        rules.append(("this lab's forbidden calls", "Your file calls none of " +
                      ", ".join(f"`{n}`" for n in c["forbidden_calls"]) + "."))
    lines = [textwrap.fill(f"- **Rule: {name}.** {rule}", 114, subsequent_indent="  ") for name, rule in rules]
    cost = (f"- **What a rule costs.** Each rule is judged on what ran (the machine code the driver loaded and the launches the bench "
            f"audited), never on what the file declares; failing one costs the {performance} performance points, "
            "and correctness still runs and counts (`constraints` in `lab.json`; the report's static checks and "
            "launches say what was seen).")
    return "\n".join(lines + [textwrap.fill(cost, 114, subsequent_indent="  ")]) + "\n"


def block(spec: str, recs: Recordings, kit_root) -> tuple[str, list[str], Record | None]:
    """A block marker's body: `lab/NN rules` (rules_text) or a tour table (tour_table)."""
    tokens = spec.split()
    if len(tokens) == 2 and tokens[0].startswith("lab/") and tokens[1] == "rules":
        return rules_text(tokens[0][4:], kit_root), [], None
    return tour_table(spec, recs)
