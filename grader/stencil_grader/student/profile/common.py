"""What the parts of `make profile` share: its exit statuses, its error, its inputs' format (the
files it writes are files.write_json's, tied to their source by its sha256, files.sha256_of)."""

from __future__ import annotations

import datetime
import string
from pathlib import Path

from ...base.files import sha256_of
from ...grading.build import impl_source

#: Format of profile-inputs.json (and of the fixtures under tests/python/data/ncu/ and nocounters/).
INPUTS_FORMAT = 1
EXIT_PROFILED, EXIT_FAILED, EXIT_CANNOT = 0, 1, 2


class ProfileError(Exception):
    """Nothing to diagnose: the message says why and what to do; exit_code is EXIT_FAILED
    (the submission's fault) or EXIT_CANNOT (this machine's)."""

    def __init__(self, message: str, exit_code: int = EXIT_CANNOT):
        super().__init__(message)
        self.exit_code = exit_code


def inputs_record(spec, impl: str, mode: str, device: str | None, **rest) -> dict:
    """A profile-inputs record (INPUTS_FORMAT) of mode "counters" or "code": the lab, whose source and
    its digest, when, the GPU's name and the lab's target ratio on it, the kind's launchers, then
    `rest` (bench, static, ...)."""
    source = impl_source(spec.lab, impl)
    try:
        target = spec.target_for(device).target.target
    except (AttributeError, KeyError):
        target = None
    return {"format": INPUTS_FORMAT, "mode": mode, "lab": spec.lab,
            "impl": impl if impl in ("starter", "reference") else str(Path(impl).resolve()), "source": str(source),
            "source_sha256": sha256_of(source),
            "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": device, "target_ratio": target, "launchers": [{"name": x.name, "bytes_per_cell": x.bytes_per_cell,
                                             "flop_per_cell": x.flop_per_cell} for x in spec.kind.launchers]} | rest


def bench_cells(bench: dict) -> float:
    """Cells of the bench grid, nx x ny x nz."""
    return float(bench.get("nx", 1)) * float(bench.get("ny", 1)) * float(bench.get("nz", 1))


def build_figures(fact: dict, limiters: list[str], threads_per_cell: float | None) -> dict:
    """The figures both modes take from the build and the launch (None where `fact`, the kernel's
    static_facts entry, is empty): occupancy_limiter, limited_by_* (1.0 or 0.0; None without a
    limiter), spill_bytes (per thread), div_rem_ptx, threads_per_cell and div_rem_per_cell, estimated
    from the machine code: one per cell for each div/rem inside a loop (a grid-stride or row loop
    visits each cell once), one per thread for the others."""
    def limited(*what: str) -> float | None:
        return float(any(x in limiters for x in what)) if limiters else None

    looped, divisions = float(fact.get("div_rem_in_loop", 0)), float(fact.get("div_rem", 0))
    return {"occupancy_limiter": " and ".join(limiters) or None, "limited_by_registers": limited("registers"),
            "limited_by_shared": limited("shared memory"),
            "limited_by_block_size": limited("block size (warps per SM)", "blocks per SM"),
            "spill_bytes": float(fact.get("spill_stores", 0) + fact.get("spill_loads", 0)) if fact else None,
            "div_rem_ptx": divisions if fact else None, "threads_per_cell": threads_per_cell,
            "div_rem_per_cell": looped + (divisions - looped) * threads_per_cell
            if fact and threads_per_cell is not None else None}


class _Figures(string.Formatter):
    def get_value(self, key, args, kwargs):
        return kwargs.get(key)

    def format_field(self, value, spec):
        return "?" if value is None else f"{value / 1e6:.0f} MB" if spec == "MB" else format(value, spec)


def show_figures(template: str, figures: dict) -> str:
    """template.format over a kernel's figures: '?' for a figure that is None or absent, whatever its spec
    ('{ratio:.2f}' too); the spec "MB" shows bytes in megabytes.  A template that cannot be filled is
    returned as it is."""
    try:
        return _Figures().vformat(template, (), figures)
    except (ValueError, TypeError, IndexError, AttributeError):
        return template


class CountersLocked(ProfileError):
    """Nsight Compute may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): the
    profile goes on without them (nocounters.py)."""
