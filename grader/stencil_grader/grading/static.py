"""The static stage: every check that reads the build's files, in the order the report shows them:
symbols.py ("forbidden"), source.py (lexical rules; copies only a "signal"), sass.py (lab rules on
the machine code, "constraint"), source.py's notes ("warn").  What each costs is score.py's."""

from __future__ import annotations

from pathlib import Path

from ..base.labspec import LabSpec
from . import sass, source, symbols
from .checks import StaticCheck, StaticResult

__all__ = ["StaticCheck", "StaticResult", "run_static"]


def run_static(spec: LabSpec, src: Path, build_dir: Path) -> StaticResult:
    """Every static check of one lab build: the object, the source, the machine code, the notes.
    Raises sass.SassError when the built program cannot be disassembled (the grader's fault)."""
    notes = source.check_notes(src)
    return StaticResult([symbols.check_object(build_dir, src, spec.constraints.forbidden_calls),
                         source.check_source(src)] + sass.check_machine_code(spec, build_dir)
                        + ([notes] if notes else []))
