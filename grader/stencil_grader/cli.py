"""The command line: python3 grader/grade.py COMMAND ...

    lab LABDIR [--impl starter|reference|DIR] [--build-dir DIR] [--seed N] [--arch ARCH]
               [--json FILE] [--gradescope FILE] [--skip-bench]
        grade one lab: build, static checks, correctness, bench, score, report
    config LAB_JSON
        print lab_config.h for that lab on stdout (lab.mk writes it to BUILD_DIR)
    all [--impl reference] [--seed N] [--arch ARCH] [--skip-bench]
        grade every lab in turn and print one summary table (the kit's `make check`);
        the default impl is reference, or starter in a student kit (no reference/)
    class SUBMISSIONS_DIR --out DIR [--labs 01-naive-5pt,...] [--student NAME] [--jobs N]
        instructor mode: grade every student's labs (see classgrade.py)
    tour [--json FILE] [--plot PNG] [--markdown]
        time the references (2D, lab 8, then the 3D kernels) on this GPU and print the
        optimisation table; --plot draws the path and the roofline (tour.py, plot.py)
    calibrate [--runs N] [--labs a,b] [--dry-run]
        write this GPU's floor and target into every lab.json (tour.py, score.py)
    solve BUILD_DIR [--n N] [--reduction R] [--every K] [--plot PNG]
        lab 7: run the Jacobi solver of that build on the model Poisson problem and
        explain its convergence (solve.py; `make solve` in labs/07-reduction-residual)

Exit status: 0 when every graded lab got full points (class: when every
grading produced a report and was measured), 1 otherwise, 2 for a usage or
lab.json error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import KIT_ROOT, build, classgrade, labspec, pipeline, plot, report, tour

EXIT_FULL, EXIT_NOT_FULL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A wrong argument; printed as `grade.py: error: ...`, exit status 2."""


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, got {text!r}")
    return value


def _default_seed() -> int | None:
    """SEED from the environment (`make check SEED=N` exports it), else None."""
    text = os.environ.get("SEED", "").strip()
    if not text:
        return None
    try:
        return _seed(text)
    except argparse.ArgumentTypeError as err:
        raise UsageError(f"environment variable SEED: {err}") from None


def _impl(text: str) -> str:
    if text in ("starter", "reference"):
        return text
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"--impl is starter, reference or a directory; {text!r} is none")
    return text


def _add_run_options(p: argparse.ArgumentParser, default_impl: str) -> None:
    p.add_argument("--impl", type=_impl, default=default_impl,
                   help=f"whose kernel.cu: starter, reference or a directory DIR "
                        f"(DIR/<lab>/kernel.cu, else DIR/kernel.cu); default {default_impl}")
    p.add_argument("--seed", type=_seed, default=None,
                   help="replay this input seed (default: $SEED, else a fresh one)")
    p.add_argument("--arch", help="CUDA architecture to build for, e.g. 90 (default: detected)")
    p.add_argument("--skip-bench", action="store_true",
                   help="do not time the kernel (performance: not measured)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade.py", description="Grader of the CUDA stencil lab kit.",
        epilog="Exit status: 0 full points, 1 points missing, 2 usage or lab.json error.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("lab", help="grade one lab")
    p.add_argument("lab_dir", metavar="LABDIR", help="e.g. labs/01-naive-5pt (or just 01-naive-5pt)")
    _add_run_options(p, "starter")
    p.add_argument("--build-dir", type=Path, help="default: build/<lab>/<impl-tag> in the kit")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the JSON report here")
    p.add_argument("--gradescope", type=Path, metavar="FILE", help="write Gradescope results.json here")
    p.add_argument("--gpu-lock", type=Path, metavar="FILE", help=argparse.SUPPRESS)

    p = sub.add_parser("config", help="print lab_config.h generated from a lab.json")
    p.add_argument("lab_json", metavar="LAB_JSON", type=Path)

    p = sub.add_parser("all", help="grade every lab and print a summary (the kit's make check)")
    _add_run_options(p, "reference" if (KIT_ROOT / "reference").is_dir() else "starter")

    p = sub.add_parser("class", help="instructor mode: grade a directory of submissions")
    p.add_argument("submissions", metavar="SUBMISSIONS_DIR", type=Path,
                   help="one folder per student, mirroring starter/")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="where reports go")
    p.add_argument("--labs", help="comma-separated lab names (default: every lab)")
    p.add_argument("--student", help="regrade this student only")
    p.add_argument("--jobs", type=int, default=None, help="gradings at once (default: CPU count)")

    p = sub.add_parser("tour", help="time the references on this GPU: the optimisation table")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--plot", type=Path, metavar="PNG",
                   help="bars of the path to PNG, the roofline to PNG's stem + -roofline.png "
                        "(needs matplotlib)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")

    p = sub.add_parser("calibrate", help="write this GPU's targets into every lab.json")
    p.add_argument("--runs", type=int, default=3, help="timed runs of each reference (median)")
    p.add_argument("--labs", help="comma-separated lab names (default: every lab)")
    p.add_argument("--dry-run", action="store_true", help="print the new targets, write nothing")

    p = sub.add_parser("solve", help="lab 7: run a build's Jacobi solver on the model Poisson problem")
    p.add_argument("build_dir", metavar="BUILD_DIR", type=Path, help="a lab 7 build (holding bench)")
    p.add_argument("--n", type=int, default=33, help="grid of N x N cells, h = 1/(N-1) (default 33)")
    p.add_argument("--reduction", type=float, default=None,
                   help="stop when the residual 2-norm has fallen by this factor (default 1e-5)")
    p.add_argument("--every", type=int, default=None, help="print every K-th sweep's residual")
    p.add_argument("--plot", type=Path, metavar="PNG",
                   help="where the convergence plot goes (default BUILD_DIR/solve.png; needs matplotlib)")
    return parser


def _print_lab(run: pipeline.LabRun, json_path: Path | None, gradescope: Path | None) -> dict:
    data = report.to_dict(run)
    print()
    print(report.render_text(data, report.use_colour()), end="")
    written = report.write_json(data, Path(run.build_dir) / "report.json")
    print(f"  report: {written}")
    drawn = plot.lab_roofline(run.spec.api, data["performance"].get("bench"), Path(run.build_dir) / "roofline.png")
    if drawn:
        print(f"  roofline: {drawn}")
    if json_path:
        report.write_json(data, json_path)
    if gradescope:
        report.write_json(report.gradescope_results([data]), gradescope)
        print(f"  Gradescope results: {gradescope}")
    return data


def _progress(line: str) -> None:
    print(line, flush=True)


def cmd_lab(args) -> int:
    seed = args.seed if args.seed is not None else _default_seed()
    lab_dir = pipeline.resolve_lab_dir(args.lab_dir)
    spec = labspec.load(lab_dir / "lab.json")
    source = build.impl_source(spec.lab, args.impl)
    if not source.is_file():
        raise UsageError(f"no kernel.cu for {spec.lab}: {source} does not exist")
    run = pipeline.grade_lab(lab_dir, args.impl, args.build_dir, seed, args.arch, args.skip_bench,
                             gpu_lock=args.gpu_lock, progress=_progress)
    _print_lab(run, args.json, args.gradescope)
    return run.score.exit_code


def cmd_config(args) -> int:
    sys.stdout.write(labspec.c_header(labspec.load(args.lab_json)))
    return EXIT_FULL


def cmd_all(args) -> int:
    seed = args.seed if args.seed is not None else _default_seed()
    rows, worst = [], EXIT_FULL
    for lab_dir in labspec.discover_labs():
        try:
            run = pipeline.grade_lab(lab_dir, args.impl, None, seed, args.arch, args.skip_bench,
                                     progress=_progress)
        except labspec.LabSpecError as err:
            print(f"grade.py: {err}", file=sys.stderr)
            rows.append((lab_dir.name, "config_error", "-", "-"))
            worst = EXIT_USAGE
            continue
        data = _print_lab(run, None, None)
        ratio = data["performance"]["ratio"]
        rows.append((data["lab"], data["verdict"], f"{data['points']:.2f}/{data['max_points']:g}",
                     f"{ratio:.3f}" if ratio is not None else "-"))
        if not data["full_points"] and worst == EXIT_FULL:
            worst = EXIT_NOT_FULL
    colour = report.use_colour()
    print(f"\nSummary ({args.impl}):")
    print(f"  {'lab':<26} {'verdict':<14} {'points':<12} ratio")
    for lab, verdict, points, ratio in rows:
        pad = " " * max(0, 14 - len(verdict))
        print(f"  {lab:<26} {report.paint(verdict, colour)}{pad} {points:<12} {ratio}")
    if not rows:
        print("  no lab found under labs/")
        return EXIT_USAGE
    return worst


def cmd_class(args) -> int:
    labs = [x.strip() for x in args.labs.split(",") if x.strip()] if args.labs else None
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    try:
        gradings = classgrade.grade_class(args.submissions, args.out, labs, args.student, args.jobs,
                                          progress=_progress)
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
    labs = [x.strip() for x in args.labs.split(",") if x.strip()] if args.labs else None
    try:
        for line in tour.calibrate(args.runs, labs, write=not args.dry_run):
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


COMMANDS = {"lab": cmd_lab, "config": cmd_config, "all": cmd_all, "class": cmd_class,
            "tour": cmd_tour, "calibrate": cmd_calibrate, "solve": cmd_solve}


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (labspec.LabSpecError, UsageError) as err:
        print(f"grade.py: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("grade.py: interrupted", file=sys.stderr)
        return 130
