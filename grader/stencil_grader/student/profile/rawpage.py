"""Nsight Compute's raw page (`ncu --import ... --page raw --csv --print-units base`) as rows."""

from __future__ import annotations

import csv
import io
import math

def number(text: str) -> float | None:
    """A raw-page value as a float ('1,073,741,824' -> 1073741824.0); None for 'n/a' and text."""
    cleaned = text.strip().replace(",", "")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_raw_csv(text: str) -> list[dict]:
    """The rows of `ncu --page raw --csv`: one dict per profiled launch with 'name' (Kernel Name),
    'block', 'grid', 'id' and 'metrics' {metric: float} (values that are not numbers left out).

    The page is a header row of column names, then (with --print-units) a row of units whose ID
    cell is empty, then one row per launch.  Lines before the header (ncu's ==PROF== lines, if
    any) are skipped.  Raises ValueError when there is no header with 'Kernel Name'.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if '"Kernel Name"' in line or line.startswith("ID,")), None)
    if start is None:
        raise ValueError("ncu's raw CSV has no header row naming 'Kernel Name'")
    reader = csv.reader(io.StringIO("\n".join(lines[start:])))
    header = next(reader)
    rows = []
    for cells in reader:
        if len(cells) != len(header):
            continue
        row = dict(zip(header, cells))
        if not row.get("ID", "").strip():           # the units row
            continue
        metrics = {}
        for key, cell in row.items():
            value = number(cell)
            if value is not None and "__" in key:
                metrics[key] = value
        rows.append({"id": row.get("ID", "").strip(), "name": row.get("Kernel Name", "").strip(),
                     "block": row.get("Block Size", "").strip(), "grid": row.get("Grid Size", "").strip(),
                     "metrics": metrics})
    return rows

