"""grade.py's commands for a student, beside make check: `profile` (make profile: why the kernel is
slow) and `solve` (lab 7's make solve).  Neither is part of a grade."""

from __future__ import annotations

import sys
from pathlib import Path

from ..base.cliargs import UsageError, arch, default_seed, impl, seed


def register(sub) -> None:
    """Add this subpackage's commands to grade.py's subparsers."""
    p = sub.add_parser("profile", help="why the kernel is slow: Nsight Compute's counters and a ranked "
                                       "diagnosis (not part of the grade)")
    p.add_argument("lab_dir", metavar="LABDIR", help="e.g. labs/01-naive-5pt (or just 01-naive-5pt)")
    p.add_argument("--impl", type=impl, default="starter",
                   help="whose kernel.cu: starter, reference or a directory DIR (default starter)")
    p.add_argument("--build-dir", type=Path, help="default: build/<lab>/<impl-tag> in the kit")
    p.add_argument("--seed", type=seed, default=None, help="the bench's input seed (default: $SEED, else fresh)")
    p.add_argument("--arch", type=arch, help="CUDA architecture to build for, e.g. 90 (default: detected)")
    p.add_argument("--from-inputs", type=Path, metavar="FILE",
                   help="analyse a recorded BUILD_DIR/profile-inputs.json again (no GPU, no build)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the diagnosis (profile.json) here")
    p.add_argument("--no-counters", action="store_true",
                   help="diagnose without Nsight Compute's counters, from the PTX and the launch audit (what "
                        "happens anyway where the counters are locked; also STENCIL_PROFILE_COUNTERS=off)")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("solve", help="lab 7: run a build's Jacobi solver on the model Poisson problem")
    p.add_argument("build_dir", metavar="BUILD_DIR", type=Path, help="a lab 7 build (holding bench)")
    p.add_argument("--n", type=int, default=33, help="grid of N x N cells, h = 1/(N-1) (default 33)")
    p.add_argument("--reduction", type=float, default=None,
                   help="stop when the residual 2-norm has fallen by this factor (default 1e-5)")
    p.add_argument("--every", type=int, default=None, help="print every K-th sweep's residual")
    p.add_argument("--plot", type=Path, metavar="PNG",
                   help="where the convergence plot goes (default BUILD_DIR/solve.png; needs matplotlib)")
    p.set_defaults(func=cmd_solve)


def cmd_profile(args) -> int:
    from ..base.files import write_json
    from . import profile

    chosen = args.seed if args.seed is not None else default_seed()
    result = profile.profile_lab(args.lab_dir, args.impl, args.build_dir, chosen, args.arch,
                                 from_inputs=args.from_inputs, counters_wanted=not args.no_counters)
    print(result.text, end="", file=sys.stdout if result.exit_code == 0 else sys.stderr)
    if args.json and result.result is not None:
        write_json(args.json, result.result)
    return result.exit_code


def cmd_solve(args) -> int:
    from . import solve  # lab 7 only

    if args.reduction is not None and not 0 < args.reduction < 1:
        raise UsageError(f"--reduction must lie between 0 and 1, got {args.reduction:g}")
    if args.every is not None and args.every < 1:
        raise UsageError("--every must be at least 1")
    result = solve.solve(args.build_dir, args.n, args.reduction, args.every, args.plot)
    print(result.text, end="", file=sys.stdout if result.exit_code == 0 else sys.stderr)
    return result.exit_code
