"""The command line: python3 grader/grade.py COMMAND ...  (`grade.py --help` lists the commands)

Each subpackage that has a commands module (a register(subparsers) function) adds its commands; the student
kit, which ships neither classes/ nor instructor/ (grader/dist/pack.sh), offers those of grading/ and student/.
Exit status: 0 when every graded lab got full points (class: every grading reported and measured), 1
otherwise, 2 for a usage or lab.json error.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path

from .base import labspec
from .base.cliargs import EXIT_FULL, EXIT_NOT_FULL, EXIT_USAGE, UsageError

__all__ = ["EXIT_FULL", "EXIT_NOT_FULL", "EXIT_USAGE", "build_parser", "main"]

#: The subpackages whose commands come first in grade.py --help; the others' follow by name.
FIRST = ("grading", "student")


def subpackage_commands() -> list:
    """The commands module of every subpackage of this kit that has one, FIRST first."""
    found = [m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.ispkg]
    ordered = [n for n in FIRST if n in found] + sorted(set(found) - set(FIRST))
    return [importlib.import_module(f"{__package__}.{n}.commands") for n in ordered
            if importlib.util.find_spec(f"{__package__}.{n}.commands") is not None]


def build_parser() -> argparse.ArgumentParser:
    """grade.py's parser, with the commands of every subpackage this kit has."""
    parser = argparse.ArgumentParser(
        prog="grade.py", description="Grader of the CUDA stencil lab kit.",
        epilog="Exit status: 0 full points, 1 points missing, 2 usage or lab.json error.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for commands in subpackage_commands():
        commands.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status (see the module docstring)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (labspec.LabSpecError, UsageError) as err:
        print(f"grade.py: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("grade.py: interrupted", file=sys.stderr)
        return 130
