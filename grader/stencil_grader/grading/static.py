"""The static stage: every check that reads the build's files, in the order the report shows them.

1. symbols.py: what the compiled object links against, defines and executes (severity "forbidden":
   the lab gets 0 and is not run);
2. source.py: the lexical rules on the source (severity "forbidden"; the copies' early message a
   "signal");
3. sass.py: the lab's rules on the machine code of the linked bench program (severity
   "constraint": performance gets 0);
4. source.py's notes, when there are any (status "warn", severity "note": they cost nothing).

The policy (what each severity costs) is score.py's.
"""

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
