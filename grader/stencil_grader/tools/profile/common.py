"""What the parts of `make profile` share: its exit statuses, its error, its inputs' format."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

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


def source_digest(path: Path) -> str | None:
    """sha256 of a file's bytes (None when it cannot be read): ties a profile to one source."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def write_json(obj: dict, path: Path) -> Path:
    """Write obj as indented JSON to path (parent folders made, replaced atomically); returns path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)
    return path
