"""The recorded runs the handouts' figures come from: handouts/data/SLUG/KIND.json, read and
validated (instructor/records.py RECORD_FORMAT says what a record holds; handouts/data/README.md is the
instructor's guide).

    load_recordings(root) -> Recordings     every record, by (slug, kind); FiguresError on any problem
    validate_record(data, path) -> [str]    the problems of one record
    lab_json(number) -> (path, dict)        labs/NN-*/lab.json, read
    consistency(recs) -> [str]              calibrations whose written targets lab.json no longer holds
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import KIT_ROOT
from ..base.files import display_path as shown
from .records import RECORD_FORMAT

#: Where the recorded runs live: one folder per GPU (its slug), one file per record kind.
DATA_DIR = KIT_ROOT / "handouts" / "data"
RECORD_KINDS = ("tour", "check", "calibrate", "archs", "cuda12", "profile", "notes", "class", "class-scaling")
#: What a figure a provisional recording lacks is rendered as.
MISSING_TEXT = "not measured"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class FiguresError(Exception):
    """The recordings cannot be read, or a marker is malformed; the message says where and why."""


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
        return shown(self.path)


def validate_record(data, path: Path) -> list[str]:
    """The problems of one record (RECORD_FORMAT), each naming the file and the key; [] when good."""
    where = shown(path)
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
    need("provisional", lambda v: isinstance(v, bool) and (v or data.get("record") != "notes"),
         "true or false (true for development notes, which no kit command wrote)")
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
            raise FiguresError(f"no recording {slug}/{name} ({shown(self.root / slug / (name + '.json'))} "
                               f"does not exist; recordings: {have})") from None

    def device(self, slug: str) -> str:
        """The GPU name the records of folder `slug` share."""
        names = {r.data["device"]["name"] for (s, _), r in self.records.items() if s == slug}
        if not names:
            raise FiguresError(f"no recording under {shown(self.root / slug)} names the GPU of {slug!r}")
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
            problems.append(f"{shown(path)}: the folder name {slug!r} is not a slug (lower-case, digits, -)")
            continue
        if name not in RECORD_KINDS:
            problems.append(f"{shown(path)}: not a record kind ({', '.join(RECORD_KINDS)})")
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as err:
            problems.append(f"{shown(path)}: cannot read: {err}")
            continue
        except json.JSONDecodeError as err:
            problems.append(f"{shown(path)}: not JSON: {err.msg} at line {err.lineno} column {err.colno}")
            continue
        found = validate_record(data, path)
        if found:
            problems += found
            continue
        recs.records[(slug, name)] = Record(path, slug, name, data, {r["id"]: r for r in data["rows"]})
    for slug in sorted({s for s, _ in recs.records}):
        names = {r.data["device"]["name"] for (s, _), r in recs.records.items() if s == slug}
        if len(names) > 1:
            problems.append(f"{shown(root / slug)}: its records name different GPUs ({', '.join(sorted(names))})")
    if problems:
        raise FiguresError("\n".join(problems))
    return recs


def lab_json(number: str, kit_root: Path) -> tuple[Path, dict]:
    found = sorted((Path(kit_root) / "labs").glob(f"{number}-*/lab.json"))
    if not re.fullmatch(r"\d\d", number) or not found:
        raise FiguresError(f"lab/{number}: no labs/{number}-*/lab.json")
    path = found[0]
    try:
        return path, json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise FiguresError(f"{shown(path)}: cannot read: {err}") from None


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
                path, raw = lab_json(row["id"][:2], kit_root)
            except FiguresError as err:
                errors.append(f"{record.shown}: row {row['id']}: {err}")
                continue
            if "targets_policy" in raw:
                continue
            entry = raw.get("targets", {}).get(device)
            got = (entry or {}).get("floor"), (entry or {}).get("target")
            if got != (row.get("floor"), row.get("target")):
                errors.append(f"{shown(path)}: the targets for {device} are floor {got[0]}, target {got[1]}, "
                              f"but {record.shown} recorded floor {row.get('floor')}, target {row.get('target')}: "
                              f"record the calibration you ran (grade.py calibrate --json {record.shown})")
    return errors
