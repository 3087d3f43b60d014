"""The command line: python3 grader/grade.py COMMAND ...  (`grade.py --help` lists the commands)

Each subpackage declares its own commands (grading/commands.py, classes/commands.py,
tools/commands.py: a register(subparsers) function each); this module puts them together
and runs the one asked for.

Exit status: 0 when every graded lab got full points (class: when every grading
produced a report and was measured), 1 otherwise, 2 for a usage or lab.json error.
"""

from __future__ import annotations

import argparse
import sys

from .base import labspec
from .base.cliargs import EXIT_FULL, EXIT_NOT_FULL, EXIT_USAGE, UsageError
from .classes import commands as class_commands
from .grading import commands as grading_commands
from .tools import commands as tool_commands

__all__ = ["EXIT_FULL", "EXIT_NOT_FULL", "EXIT_USAGE", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """grade.py's parser, with every subpackage's commands."""
    parser = argparse.ArgumentParser(
        prog="grade.py", description="Grader of the CUDA stencil lab kit.",
        epilog="Exit status: 0 full points, 1 points missing, 2 usage or lab.json error.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for commands in (grading_commands, class_commands, tool_commands):
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
