"""What the parts of `make profile` share: its exit statuses, its error, its inputs' format (the
files it writes are report.write_json's, tied to their source by pipeline.source_digest)."""

from __future__ import annotations

import datetime
from pathlib import Path

from ...grading.build import impl_source
from ...grading.pipeline import source_digest

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
    """A profile-inputs record (INPUTS_FORMAT) of mode "counters" or "ptx": the lab, whose source and
    its digest, when, the GPU's name, the kind's launchers, then `rest` (bench, static, ...)."""
    source = impl_source(spec.lab, impl)
    return {"format": INPUTS_FORMAT, "mode": mode, "lab": spec.lab,
            "impl": impl if impl in ("starter", "reference") else str(Path(impl).resolve()), "source": str(source),
            "source_sha256": source_digest(source),
            "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": device, "launchers": [{"name": x.name, "bytes_per_cell": x.bytes_per_cell,
                                             "flop_per_cell": x.flop_per_cell} for x in spec.kind.launchers]} | rest


class CountersLocked(ProfileError):
    """Nsight Compute may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): the
    profile goes on without them (nocounters.py)."""
