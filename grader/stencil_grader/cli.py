"""The command line: python3 grader/grade.py COMMAND ...  (`grade.py --help` lists the commands)

Each subpackage declares its own commands (grading/commands.py, student/commands.py,
classes/commands.py, instructor/commands.py: a register(subparsers) function each); this module
puts them together and runs the one asked for.  The student kit (`make dist`) ships neither
classes/ nor instructor/: there grade.py offers the commands of grading/ and student/ alone.

Exit status: 0 when every graded lab got full points (class: when every grading
produced a report and was measured), 1 otherwise, 2 for a usage or lab.json error.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .base import labspec
from .base.cliargs import EXIT_FULL, EXIT_NOT_FULL, EXIT_USAGE, UsageError
from .grading import commands as grading_commands
from .student import commands as student_commands

__all__ = ["EXIT_FULL", "EXIT_NOT_FULL", "EXIT_USAGE", "build_parser", "main"]

#: The subpackages only the instructor's kit has (grader/dist/pack.sh leaves them out).
INSTRUCTOR_PACKAGES = ("classes", "instructor")


def instructor_commands() -> list:
    """The commands modules of INSTRUCTOR_PACKAGES that this kit has; a package that is absent
    (the student kit) is skipped, a module missing inside one that is present still raises."""
    found = []
    for name in INSTRUCTOR_PACKAGES:
        package = f"{__package__}.{name}"
        try:
            found.append(importlib.import_module(f"{package}.commands"))
        except ModuleNotFoundError as err:
            if err.name != package:
                raise
    return found


def build_parser() -> argparse.ArgumentParser:
    """grade.py's parser, with the commands of every subpackage this kit has."""
    parser = argparse.ArgumentParser(
        prog="grade.py", description="Grader of the CUDA stencil lab kit.",
        epilog="Exit status: 0 full points, 1 points missing, 2 usage or lab.json error.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for commands in (grading_commands, student_commands, *instructor_commands()):
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
