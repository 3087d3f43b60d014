"""A recorded profile: what `make profile` derived from a set of profiled runs, as one record
(handouts/data/SLUG/profile.json) whose figures the handouts quote through markers (figures.py).

    python3 grader/grade.py record-profile OUT INPUTS.json...

Each INPUTS.json is a `profile-inputs.json` that `make profile` wrote (everything it read: Nsight
Compute's raw figures, the build's static facts, the bench run), such as the recorded ones in
tests/python/data/ncu/.  Each is analysed again with the kit's own rules (student/profile/, the
same analysis as `grade.py profile --from-inputs`), so the record holds exactly what a student's
`make profile` would print for that run.  The runs must come from one GPU and one day.

A row per run, id "NN/impl" (records.row_id): lab, impl, kernel (the first profiled kernel's label),
ratio, gbps and copy_gbps of the bench run that was profiled, figures (that kernel's derived
figures: gld_sectors_per_request, load_amplification, shared_conflict_share (a fraction),
achieved_occupancy and theoretical_occupancy (percent), divisions_per_cell, xu_share, ...), and
findings (the ranked messages).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from ..student.profile import analyse, load_rules
from .records import RecordError, median_or_none, record_header, row_id

SOURCE = ("grade.py record-profile: make profile's analysis (grader/profile_rules.json) of the inputs it "
          "recorded (profile-inputs.json)")


def profile_row(inputs: dict, result: dict) -> dict:
    """One recorded run as a row of the profile record."""
    kernel = (result.get("kernels") or [{}])[0]
    bench = inputs.get("bench") or {}
    return {"id": row_id(inputs["lab"], inputs["impl"]), "lab": inputs["lab"], "impl": Path(inputs["impl"]).name,
            "kernel": kernel.get("label"), "ratio": bench.get("ratio"), "gbps": bench.get("gbps"),
            "copy_gbps": bench.get("copy_gbps"), "figures": kernel.get("figures") or {},
            "findings": [f.get("message") for f in result.get("findings") or []]}


def record_profile(paths: list[Path]) -> dict:
    """The profile record of the recorded runs at `paths` (module docstring).  Raises RecordError
    when a file cannot be read, or the runs come from different GPUs or days."""
    runs = []
    for path in paths:
        try:
            runs.append(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as err:
            raise RecordError(f"{path}: cannot read a recorded profile: {err}") from None
    if not runs:
        raise RecordError("no recorded profile named")
    devices = {r.get("device") for r in runs}
    stamps = sorted(datetime.datetime.fromisoformat(r["recorded_at"]) for r in runs)
    if len(devices) != 1 or None in devices:
        raise RecordError(f"the profiles come from different GPUs ({', '.join(sorted(map(str, devices)))})")
    if stamps[0].date() != stamps[-1].date():
        raise RecordError(f"the profiles were recorded on different days ({stamps[0]:%Y-%m-%d} to {stamps[-1]:%Y-%m-%d})")
    rules = load_rules()
    record = record_header("profile", SOURCE, {"name": devices.pop()}, stamps[0])
    record["ncu_version"] = runs[0].get("ncu_version")
    record["rows"] = [profile_row(r, analyse(r, rules)) for r in runs]
    record["copy_gbps"] = median_or_none(row["copy_gbps"] for row in record["rows"])
    return record
