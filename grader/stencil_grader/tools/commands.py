"""grade.py's tool commands: `tour`, `calibrate`, `solve`."""

from __future__ import annotations

import sys
from pathlib import Path

from ..base.cliargs import EXIT_FULL, EXIT_NOT_FULL, UsageError, lab_list
from . import tour


def register(sub) -> None:
    """Add this subpackage's commands to grade.py's subparsers."""
    p = sub.add_parser("tour", help="time the references on this GPU: the optimisation table")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--plot", type=Path, metavar="PNG",
                   help="bars of the path to PNG, the roofline to PNG's stem + -roofline.png "
                        "(needs matplotlib)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.set_defaults(func=cmd_tour)

    p = sub.add_parser("calibrate", help="write this GPU's targets into every lab.json")
    p.add_argument("--runs", type=int, default=3, help="timed runs of each reference (median)")
    p.add_argument("--labs", help="comma-separated lab names (default: every lab)")
    p.add_argument("--dry-run", action="store_true", help="print the new targets, write nothing")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("solve", help="lab 7: run a build's Jacobi solver on the model Poisson problem")
    p.add_argument("build_dir", metavar="BUILD_DIR", type=Path, help="a lab 7 build (holding bench)")
    p.add_argument("--n", type=int, default=33, help="grid of N x N cells, h = 1/(N-1) (default 33)")
    p.add_argument("--reduction", type=float, default=None,
                   help="stop when the residual 2-norm has fallen by this factor (default 1e-5)")
    p.add_argument("--every", type=int, default=None, help="print every K-th sweep's residual")
    p.add_argument("--plot", type=Path, metavar="PNG",
                   help="where the convergence plot goes (default BUILD_DIR/solve.png; needs matplotlib)")
    p.set_defaults(func=cmd_solve)


def cmd_tour(args) -> int:
    try:
        print(tour.run_tour(args.json, args.plot, args.markdown))
    except tour.TourError as err:
        print(f"grade.py tour: {err}", file=sys.stderr)
        return EXIT_NOT_FULL
    return EXIT_FULL


def cmd_calibrate(args) -> int:
    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    try:
        for line in tour.calibrate(args.runs, lab_list(args.labs), write=not args.dry_run):
            print(line)
    except tour.TourError as err:
        print(f"grade.py calibrate: {err}", file=sys.stderr)
        return EXIT_NOT_FULL
    return EXIT_FULL


def cmd_solve(args) -> int:
    from . import solve  # lab 7 only

    if args.reduction is not None and not 0 < args.reduction < 1:
        raise UsageError(f"--reduction must lie between 0 and 1, got {args.reduction:g}")
    if args.every is not None and args.every < 1:
        raise UsageError("--every must be at least 1")
    result = solve.solve(args.build_dir, args.n, args.reduction, args.every, args.plot)
    print(result.text, end="", file=sys.stdout if result.exit_code == 0 else sys.stderr)
    return result.exit_code
