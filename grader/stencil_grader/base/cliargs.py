"""What every command of grade.py shares: exit statuses, the usage error, argument types.  Each subpackage registers its
commands in its own commands.py.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

#: Exit statuses of grade.py: full points (class: every grading measured and reported),
#: points missing, a usage or lab.json error.
EXIT_FULL, EXIT_NOT_FULL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A wrong argument; printed as `grade.py: error: ...`, exit status 2."""


def seed(text: str) -> int:
    """argparse type of --seed: a non-negative integer."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, got {text!r}")
    return value


def default_seed() -> int | None:
    """SEED from the environment (`make check SEED=N` exports it), else None."""
    text = os.environ.get("SEED", "").strip()
    if not text:
        return None
    try:
        return seed(text)
    except argparse.ArgumentTypeError as err:
        raise UsageError(f"environment variable SEED: {err}") from None


_ARCH = re.compile(r"(?:compute_)?[0-9]+[af]?( (?:compute_)?[0-9]+[af]?)*")


def arch(text: str) -> str:
    """argparse type of --arch: compute capabilities as digits, "90" or "80 90" (90a, 100f for
    arch-specific features; compute_75 for PTX alone), as lab.mk's CUDA_ARCH takes them; sm_90 or
    9.0 is refused, naming the digits to write."""
    if _ARCH.fullmatch(text.strip()):
        return text.strip()
    hint = re.sub(r"sm_|\.", "", text.strip())
    hint = hint if _ARCH.fullmatch(hint) else "90"
    raise argparse.ArgumentTypeError(f"--arch {text!r}: write the compute capability as digits, --arch {hint} "
                                     "(not sm_90 or 9.0; compute_90 is PTX alone)")


def impl(text: str) -> str:
    """argparse type of --impl: starter, reference or an existing directory."""
    if text in ("starter", "reference"):
        return text
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"--impl is starter, reference or a directory; {text!r} is none")
    return text


def lab_list(text: str | None) -> list[str] | None:
    """'01-naive-5pt,02-shared-tiling' -> the names; None or empty -> None (every lab)."""
    if not text:
        return None
    return [x.strip() for x in text.split(",") if x.strip()] or None
