"""`grade.py record-profile OUT INPUTS.json...`: the profile-inputs.json files `make profile` wrote
(tests/python/data/ncu/), analysed again with the kit's own rules (student/profile/), as one record of
kind "profile" (handouts/data/SLUG/profile.json): a row per run, id "NN/impl", with its first profiled
kernel's label and derived figures, the bench's ratio, gbps and copy_gbps, and the ranked findings.
The runs must come from one GPU and one day.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from ..student.profile import analyse, load_rules
from .records import RecordError, median_or_none, record_header, row_id

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
    record = record_header("profile", "grade.py record-profile: make profile's analysis (grader/profile_rules.json) "
                           "of the inputs it recorded (profile-inputs.json)", {"name": devices.pop()}, stamps[0])
    record["ncu_version"] = runs[0].get("ncu_version")
    record["rows"] = []
    rules = load_rules()
    for inputs in runs:
        result = analyse(inputs, rules)
        kernel, bench = (result.get("kernels") or [{}])[0], inputs.get("bench") or {}
        record["rows"].append({
            "id": row_id(inputs["lab"], inputs["impl"]), "lab": inputs["lab"], "impl": Path(inputs["impl"]).name,
            "kernel": kernel.get("label"), "ratio": bench.get("ratio"), "gbps": bench.get("gbps"),
            "copy_gbps": bench.get("copy_gbps"), "figures": kernel.get("figures") or {},
            "findings": [f.get("message") for f in result.get("findings") or []]})
    record["copy_gbps"] = median_or_none(row["copy_gbps"] for row in record["rows"])
    return record
