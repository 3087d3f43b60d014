"""`grade.py record-archs OUT LABEL=CHECK_RECORD ...`: the check records of the references built for
other GPUs' feature sets on one GPU (`make check IMPL=reference CUDA_ARCH=compute_75`, PTX that the
driver JIT-compiles, so a Turing GPU's code paths run on this one), put together as one record of
kind "archs" (records.RECORD_FORMAT; handouts/data/SLUG/archs.json, cuda12.json): `builds` [{label,
cuda_arch, cuda}] and every run's rows, each id "NN/impl@LABEL" with its "build".  The device, date
and kit are the first run's; every run must name the same GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

from .records import median_or_none


class ArchsError(ValueError):
    """A run that cannot be recorded: unreadable, not a check record, another GPU."""


def record_archs(pairs: list[str]) -> dict:
    """The archs record of LABEL=FILE arguments (each FILE a check record), in the order given.
    Raises ArchsError naming a malformed argument, an unreadable file or a run it cannot hold."""
    runs = []
    for pair in pairs:
        label, sep, file = pair.partition("=")
        if not sep or not label or not file:
            raise ArchsError(f"{pair!r}: give LABEL=FILE, e.g. compute_75=check-75.json")
        try:
            runs.append((label, json.loads(Path(file).read_text())))
        except (OSError, json.JSONDecodeError) as err:
            raise ArchsError(f"{file}: {err}") from None
    if not runs:
        raise ArchsError("no run to record: give LABEL=FILE for each check record")
    first = runs[0][1]
    record = {k: v for k, v in first.items() if k not in ("rows", "impl")}
    record.update(record="archs", source="make check IMPL=reference CUDA_ARCH=LABEL on one GPU, each run "
                  "recorded by grade.py record-check, collected by grade.py record-archs", builds=[], rows=[])
    for label, run in runs:
        if run.get("record") != "check":
            raise ArchsError(f"{label}: not a check record (record: {run.get('record')!r})")
        if (run.get("device") or {}).get("name") != first["device"]["name"]:
            raise ArchsError(f"{label}: graded on {run['device'].get('name')}, not {first['device']['name']}: "
                             "one record holds one GPU's runs")
        build = {"label": label, "cuda_arch": label, "cuda": (run.get("device") or {}).get("cuda")}
        if build not in record["builds"]:
            record["builds"].append(build)
        record["rows"] += [dict(row, id=f"{row['id']}@{label}", build=label) for row in run.get("rows") or []]
    record["copy_gbps"] = median_or_none(row.get("copy_gbps") for row in record["rows"])
    return record
