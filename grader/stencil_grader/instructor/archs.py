"""The architecture record: the references graded from builds for other GPUs' feature sets.

    grade.py record-archs OUT LABEL=CHECK_RECORD [LABEL=CHECK_RECORD ...]

On one GPU, `make check IMPL=reference CUDA_ARCH=compute_75` builds PTX of compute capability
7.5 alone, which the driver JIT-compiles for the GPU at hand when the programs load: the code
paths a Turing GPU takes (lab 8's cp.async fallback, for one) run and are graded, on a GPU that
is not one.  `grade.py record-check` records each such run (a check record); this command puts
several of them together as one record of kind "archs" (records.RECORD_FORMAT), for
handouts/data/SLUG/archs.json:

    builds   [{label, cuda_arch, cuda}]: each build (LABEL, e.g. compute_75), the CUDA_ARCH
             it was made with, and the CUDA release that built it; once for the runs of several
             impls built so (tests/cuda12-gpu.sh grades reference and starter per build)
    rows     every row of every run, its id "NN/impl@LABEL" (e.g. "08/reference@compute_75") and
             its "build" (LABEL); the rest as in a check record

The device, the date and the kit are the first run's; every run must name the same GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

from .records import median_or_none


class ArchsError(ValueError):
    """A run that cannot be recorded: unreadable, not a check record, another GPU."""


def record_archs(runs: list[tuple[str, dict]]) -> dict:
    """The archs record of (label, check record) pairs, in the order given."""
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
        for row in run.get("rows") or []:
            record["rows"].append(dict(row, id=f"{row['id']}@{label}", build=label))
    record["copy_gbps"] = median_or_none(row.get("copy_gbps") for row in record["rows"])
    return record


def read_runs(pairs: list[str]) -> list[tuple[str, dict]]:
    """LABEL=FILE arguments as (label, record); ArchsError naming a malformed one."""
    runs = []
    for pair in pairs:
        label, sep, file = pair.partition("=")
        if not sep or not label or not file:
            raise ArchsError(f"{pair!r}: give LABEL=FILE, e.g. compute_75=check-75.json")
        try:
            runs.append((label, json.loads(Path(file).read_text())))
        except (OSError, json.JSONDecodeError) as err:
            raise ArchsError(f"{file}: {err}") from None
    return runs
