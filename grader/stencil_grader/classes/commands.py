"""grade.py's commands for a class: `class` (this host's GPUs)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..base.cliargs import EXIT_FULL, EXIT_NOT_FULL, UsageError, lab_list
from . import classgrade


def register(sub) -> None:
    """Add this subpackage's commands to grade.py's subparsers."""
    p = sub.add_parser("class", help="instructor mode: grade a directory of submissions")
    p.add_argument("submissions", metavar="SUBMISSIONS_DIR", type=Path,
                   help="one folder per student, mirroring starter/")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="where reports go")
    p.add_argument("--labs", help="comma-separated lab names (default: every lab)")
    p.add_argument("--student", help="regrade this student only")
    p.add_argument("--jobs", type=int, default=None, help="gradings at once (default: CPU count)")
    p.set_defaults(func=cmd_class)


def _progress(line: str) -> None:
    print(line, flush=True)


def cmd_class(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    try:
        gradings = classgrade.grade_class(args.submissions, args.out, lab_list(args.labs), args.student,
                                          args.jobs, progress=_progress)
    except classgrade.ClassError as err:
        raise UsageError(str(err)) from None
    errors = [g for g in gradings if g.verdict == "grader_error"]
    ungraded = [g for g in gradings if not g.graded]
    print(f"\n{len(gradings)} grading(s); class table: {Path(args.out) / 'class.csv'}")
    if errors:
        print(f"{len(errors)} grading(s) failed to produce a report (verdict grader_error); see the .log files")
    if ungraded:
        verdicts = ", ".join(sorted({g.verdict for g in ungraded}))
        print(f"\nNOTHING WAS MEASURED for {len(ungraded)} of {len(gradings)} grading(s) ({verdicts}): "
              "no GPU, or a broken machine.\n"
              "Their 0 points are NOT grades: class.csv shows the verdict instead of points, and no "
              "Gradescope file was written for those students.\nGrade again on a machine with a GPU "
              "(the reports say what was missing).", file=sys.stderr)
    return EXIT_NOT_FULL if errors or ungraded else EXIT_FULL
