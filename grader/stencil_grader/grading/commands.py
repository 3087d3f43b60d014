"""grade.py's commands for one lab: `lab`, `all` (the kit's make check), `preflight`, `config`, `protocol`."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from .. import KIT_ROOT
from ..base import files, gpus, labspec, locks, preflight, protocol
from ..base.cliargs import EXIT_FULL, EXIT_NOT_FULL, EXIT_USAGE, UsageError, arch, default_seed, impl, seed
from . import build, gradescope as gradescope_file, html, pipeline, plot, progress, report


_progress = functools.partial(print, flush=True)


def add_run_options(p: argparse.ArgumentParser, default_impl: str) -> None:
    """--impl, --seed, --arch, --skip-bench: the options of every command that grades."""
    p.add_argument("--impl", type=impl, default=default_impl,
                   help=f"whose kernel.cu: starter, reference or a directory DIR "
                        f"(DIR/<lab>/kernel.cu, else DIR/kernel.cu); default {default_impl}")
    p.add_argument("--seed", type=seed, default=None,
                   help="replay this input seed (default: $SEED, else a fresh one)")
    p.add_argument("--arch", type=arch, help="CUDA architecture to build for, e.g. 90 (default: detected)")
    p.add_argument("--skip-bench", action="store_true",
                   help="do not time the kernel (performance: not measured)")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the checks of the GPU and its driver before the build (grade.py preflight)")


def register(sub) -> None:
    """Add this subpackage's commands to grade.py's subparsers."""
    p = sub.add_parser("lab", help="grade one lab")
    p.add_argument("lab_dir", metavar="LABDIR", help="e.g. labs/01-naive-5pt (or just 01-naive-5pt)")
    add_run_options(p, "starter")
    p.add_argument("--build-dir", type=Path, help="default: build/<lab>/<impl-tag> in the kit")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the JSON report here")
    p.add_argument("--gradescope", type=Path, metavar="FILE", help="write Gradescope results.json here")
    p.add_argument("--stage", choices=pipeline.STAGES, default="all",
                   help="all (default); build: build and static checks only, leaving the state for "
                        "the gpu stage in the build directory; gpu: the GPU stages of such a build")
    p.add_argument("--gpus", default=None, metavar="all|0,2,...",
                   help="the GPUs this grading may use (with --gpu-locks; default all)")
    p.add_argument("--gpu-locks", type=Path, metavar="DIR",
                   help="lock folder shared by gradings running at once: each takes a free GPU of "
                        "--gpus for its GPU stages")
    p.set_defaults(func=cmd_lab)

    p = sub.add_parser("all", help="grade every lab and print a summary (the kit's make check)")
    add_run_options(p, "reference" if (KIT_ROOT / "reference").is_dir() else "starter")
    p.set_defaults(func=cmd_all)

    p = sub.add_parser("preflight", help="check the GPU, its driver and its free memory before any build: "
                                         "exit 2 with the reason when the labs cannot be graded here")
    p.add_argument("labs", nargs="*", metavar="LABDIR", help="the labs about to be graded (default: every lab)")
    p.set_defaults(func=cmd_preflight)

    p = sub.add_parser("config", help="print lab_config.h (or, with --make, lab_config.mk) of a lab.json")
    p.add_argument("lab_json", metavar="LAB_JSON", type=Path)
    p.add_argument("--make", action="store_true", help="the make fragment lab.mk includes")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("protocol", help="print protocol.h: exit statuses and keys shared with the C side")
    p.set_defaults(func=cmd_protocol)


def print_lab(run: pipeline.LabRun, json_path: Path | None, gradescope: Path | None) -> dict:
    """Print one lab's report, write report.json (and roofline.png) in its build directory, add
    the grading to the build directory's history (progress.py), and write the optional JSON and
    Gradescope copies; returns the report."""
    data, build_dir = report.to_dict(run), Path(run.build_dir)
    print()
    print(report.render_text(data, report.use_colour()), end="")
    print(f"  report: {files.write_json(build_dir / 'report.json', data)}")
    history = build_dir / progress.BUILD_HISTORY
    progress.append(history, data)
    print(f"  page: {html.write_lab_html(data, build_dir / 'report.html', history=progress.read(history))}")
    if drawn := plot.lab_roofline(run.spec.kind, data["performance"].get("bench"), build_dir / "roofline.png"):
        print(f"  roofline: {drawn}")
    if json_path:
        files.write_json(json_path, data)
    if gradescope:
        files.write_json(gradescope, gradescope_file.results(data))
        print(f"  Gradescope results: {gradescope}")
    return data


def gpu_pool(lock_dir: Path | None, spec: str | None) -> locks.GpuPool | None:
    """The pool of --gpu-locks DIR and --gpus LIST (None without --gpu-locks); UsageError on a bad list."""
    if lock_dir is None:
        if spec is not None:
            raise UsageError("--gpus needs --gpu-locks DIR (the lock folder the gradings share)")
        return None
    found, why = gpus.list_gpus()
    if spec is None or spec == "all":
        return locks.GpuPool(lock_dir, found)
    if why:
        raise UsageError(f"--gpus {spec}: {why}")
    try:
        return locks.GpuPool(lock_dir, gpus.select(found, spec))
    except ValueError as err:
        raise UsageError(str(err)) from None


def run_preflight(specs: list[labspec.LabSpec]) -> None:
    """base/preflight.py's checks: each warning printed; UsageError (exit 2) with a refusal."""
    for finding in preflight.check(specs):
        if finding.level == "refuse":
            raise UsageError(f"this GPU cannot grade the labs: {finding.message}")
        print(f"warning: {finding.message}", file=sys.stderr, flush=True)


def cmd_preflight(args) -> int:
    lab_dirs = [pipeline.resolve_lab_dir(d) for d in args.labs] or labspec.discover_labs()
    run_preflight([labspec.load(Path(d) / "lab.json") for d in lab_dirs])
    return EXIT_FULL


def cmd_lab(args) -> int:
    chosen = args.seed if args.seed is not None else default_seed()
    lab_dir = pipeline.resolve_lab_dir(args.lab_dir)
    spec = labspec.load(lab_dir / "lab.json")
    source = build.impl_source(spec.lab, args.impl)
    if not source.is_file():
        raise UsageError(f"no kernel.cu for {spec.lab}: {source} does not exist")
    if why := build.size_problem(source):
        raise UsageError(f"{source}: {why}")
    if args.stage == "all" and args.gpu_locks is None and not args.no_preflight:
        run_preflight([spec])          # a student's make check; class gradings probe their GPUs themselves
    try:
        run = pipeline.grade_lab(lab_dir, args.impl, args.build_dir, chosen, args.arch, args.skip_bench,
                                 gpu_pool=gpu_pool(args.gpu_locks, args.gpus), stage=args.stage,
                                 progress=_progress)
    except pipeline.StageError as err:
        raise UsageError(str(err)) from None
    print_lab(run, args.json, args.gradescope)
    return run.score.exit_code


def cmd_config(args) -> int:
    spec = labspec.load(args.lab_json)
    sys.stdout.write(labspec.make_fragment(spec) if args.make else labspec.c_header(spec))
    return EXIT_FULL


def cmd_protocol(args) -> int:
    sys.stdout.write(protocol.c_header())
    return EXIT_FULL


def cmd_all(args) -> int:
    chosen = args.seed if args.seed is not None else default_seed()
    if not args.no_preflight:
        run_preflight([labspec.load(d / "lab.json") for d in labspec.discover_labs()])
    rows, worst, stage_totals = [], EXIT_FULL, {}
    for lab_dir in labspec.discover_labs():
        try:
            run = pipeline.grade_lab(lab_dir, args.impl, None, chosen, args.arch, args.skip_bench,
                                     progress=_progress)
        except labspec.LabSpecError as err:
            print(f"grade.py: {err}", file=sys.stderr)
            rows.append((lab_dir.name, "config_error", "-", "-"))
            worst = EXIT_USAGE
            continue
        data = print_lab(run, None, None)
        stage_totals.update((stage, stage_totals.get(stage, 0.0) + s) for stage, s in run.seconds.items())
        ratio = data["performance"]["ratio"]
        rows.append((data["lab"], data["verdict"], f"{data['points']:.2f}/{data['max_points']:g}",
                     f"{ratio:.3f}" if ratio is not None else "-"))
        worst = EXIT_NOT_FULL if not data["full_points"] and worst == EXIT_FULL else worst
    colour = report.use_colour()
    print(f"\nSummary ({args.impl}):")
    if stage_totals:
        print("  wall seconds by stage, all labs: " + ", ".join(
            f"{stage} {seconds:.1f}" for stage, seconds in stage_totals.items()))
    print(f"  {'lab':<26} {'verdict':<14} {'points':<12} ratio")
    for lab, verdict, points, ratio in rows:
        print(f"  {lab:<26} {report.paint(verdict, colour)}{' ' * max(0, 14 - len(verdict))} {points:<12} {ratio}")
    if not rows:
        print("  no lab found under labs/")
        return EXIT_USAGE
    return worst
