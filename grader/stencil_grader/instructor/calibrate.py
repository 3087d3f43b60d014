"""Target calibration (`make calibrate`, `grade.py calibrate`): time every lab's reference several
times on the local GPU (the tour's build and bench, instructor/tour.py's measure) and write a targets
entry for this GPU into each lab.json: score.calibrated_target is the rule, and the median ratio
goes in as reference_ratio; other GPUs' entries are kept.  A lab whose lab.json has a
`targets_policy` (a bonus lab: the same floor and target on every GPU) is timed for the record but
never rewritten.  `--json FILE` also writes the calibration as a recorded run (instructor/records.py).
"""

from __future__ import annotations

import datetime
import json
import statistics
from pathlib import Path

from ..base import labspec
from ..grading import score
from .records import device_facts, now, record_header, row_id, write_record
from .tour import measure


def calibrate(runs: int = 3, labs: list[str] | None = None, write: bool = True,
              out_json: Path | None = None) -> list[str]:
    """Time each lab's reference `runs` times and write this GPU's targets into lab.json.

    A lab with a targets_policy (a bonus lab) keeps its targets: its reference is timed for
    the record and the line says whether it reaches the policy's target.  Returns one line per
    lab saying what changed; with out_json, also writes the calibration as a recorded run.
    Raises tour.TourError (nothing is written for a lab that could not be measured).
    """
    started = now()
    lines, rows, last = [], [], {}
    for lab_dir in labspec.discover_labs():
        if labs and lab_dir.name not in labs:
            continue
        ratios, device = [], None
        for _ in range(runs):
            data, _params = measure(lab_dir.name, "reference")
            ratios.append(data["ratio"])
            device = data["device"]
            last = data
        ratio = statistics.median(ratios)
        path = lab_dir / "lab.json"
        spec = labspec.load(path)
        policy = getattr(spec, "targets_policy", None)
        row = {"id": row_id(lab_dir.name, "reference"), "lab": lab_dir.name, "ratios": ratios, "median": ratio}
        if policy is not None:
            reach = "reaches" if ratio >= policy.target else "falls SHORT of"
            lines.append(f"{lab_dir.name}: {device}: reference {ratio:.3f} of copy, {reach} the targets_policy's "
                         f"target; targets kept (floor {policy.floor:g}, target {policy.target:g} on every GPU)")
            rows.append(dict(row, floor=policy.floor, target=policy.target, written=False, policy=True))
            continue
        floor, target = score.calibrated_target(ratio)
        raw = json.loads(path.read_text())
        old = raw["targets"].get(device)
        date = datetime.date.today().isoformat()
        raw["targets"][device] = {"floor": floor, "target": target,
                                  "calibrated": f"{date}: reference at {ratio:.3f} of copy bandwidth "
                                                f"(median of {runs} runs)",
                                  "reference_ratio": round(ratio, 3)}
        bound = score.generic_bound(labspec.parse(raw, path))
        generic = raw["targets"]["generic"]
        if bound and (generic["floor"] > bound[0] or generic["target"] > bound[1]):
            generic["floor"], generic["target"] = min(generic["floor"], bound[0]), min(generic["target"], bound[1])
            lines.append(f"{lab_dir.name}: generic lowered to floor {generic['floor']}, target {generic['target']}: "
                         "at most the calibrated GPUs' lowest (score.generic_bound)")
        labspec.parse(raw, path)                      # never write a file the grader would reject
        if write:
            path.write_text(json.dumps(raw, indent=2) + "\n")
        was = f"was floor {old['floor']}, target {old['target']}" if old else "new entry"
        lines.append(f"{lab_dir.name}: {device}: reference {ratio:.3f} of copy -> floor {floor}, "
                     f"target {target} ({was}){'' if write else ' [not written]'}")
        rows.append(dict(row, floor=floor, target=target, written=write, policy=False))
    if out_json and rows:
        record = record_header("calibrate", f"grade.py calibrate --runs {runs}{'' if write else ' --dry-run'}",
                               device_facts(last), started)
        record["runs"] = runs
        record["rows"] = rows
        write_record(record, out_json)
        lines.append(f"recorded: {out_json}")
    return lines
