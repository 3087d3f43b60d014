"""What the parts of `make profile` share: its exit statuses, its error, its inputs' format (the
files it writes are report.write_json's, tied to their source by pipeline.source_digest)."""

from __future__ import annotations

#: Format of profile-inputs.json (and of the fixtures under tests/python/data/ncu/ and nocounters/).
INPUTS_FORMAT = 1
EXIT_PROFILED, EXIT_FAILED, EXIT_CANNOT = 0, 1, 2


class ProfileError(Exception):
    """Nothing to diagnose: the message says why and what to do; exit_code is EXIT_FAILED
    (the submission's fault) or EXIT_CANNOT (this machine's)."""

    def __init__(self, message: str, exit_code: int = EXIT_CANNOT):
        super().__init__(message)
        self.exit_code = exit_code


class CountersLocked(ProfileError):
    """Nsight Compute may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): the
    profile goes on without them (nocounters.py)."""
