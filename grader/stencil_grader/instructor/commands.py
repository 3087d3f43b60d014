"""grade.py's instructor commands: `tour`, `calibrate`, `tune`, `smem-roof`, `ebisu`, and the recorded runs
behind the handouts' figures: `record-check`, `record-archs`, `record-profile`, `figures`, `pictures`."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import KIT_ROOT
from ..base import gpuprobe
from ..base.cliargs import EXIT_FULL, EXIT_NOT_FULL, UsageError, lab_list, seed
from ..base.files import display_path, read_json, write_json
from . import ebisu, pictures, records, roofs, tour, tune


def register(sub) -> None:
    """Add this subpackage's commands to grade.py's subparsers."""
    def command(func, name: str, about: str):
        p = sub.add_parser(name, help=about)
        p.set_defaults(func=func)
        return p

    p = command(cmd_tour, "tour", "time the references on this GPU: the optimisation table")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--plot", type=Path, metavar="PNG", help="bars of the path to PNG, the roofline to PNG's stem + "
                   "-roofline.png (needs matplotlib)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")

    p = command(cmd_calibrate, "calibrate", "write this GPU's targets into every lab.json")
    p.add_argument("--runs", type=int, default=3, help="timed runs of each reference (median)")
    p.add_argument("--labs", help="comma-separated lab names (default: every lab)")
    p.add_argument("--dry-run", action="store_true", help="print the new targets, write nothing")
    p.add_argument("--json", type=Path, metavar="FILE",
                   help="also write the calibration as a recorded run (handouts/data/SLUG/calibrate.json)")

    p = command(cmd_smem_roof, "smem-roof", "measure this GPU's shared-memory roof (bytes per clock per SM "
                "of 4- and 16-byte loads), which lab 8's roofline draws")
    p.add_argument("--json", type=Path, metavar="FILE", help="record it, e.g. handouts/data/h100/smem-roof.json")

    p = command(cmd_ebisu, "ebisu", "time EBISU (ICS 2023), built from a copy of its repository, beside lab 8's "
                "reference on this GPU")
    p.add_argument("--src", type=Path, required=True, metavar="PATH",
                   help="a copy of github.com/neozhang307/EBISU-ICS23 (the kit never ships it)")
    p.add_argument("--json", type=Path, metavar="FILE", help="record it, e.g. handouts/data/h200/ebisu.json")

    p = command(cmd_record_check, "record-check", "collect the reports of the last make check into a recorded run")
    p.add_argument("out", metavar="FILE", type=Path, help="where the record goes, e.g. handouts/data/h100/check.json")
    p.add_argument("--impl", default="reference", help="whose reports: the impl make check graded (default reference)")

    p = command(cmd_record_archs, "record-archs", "put the check records of builds for other architectures (make "
                "check CUDA_ARCH=compute_75 ...) together as one recorded run")
    p.add_argument("out", metavar="FILE", type=Path, help="where the record goes, e.g. handouts/data/h100/archs.json")
    p.add_argument("runs", nargs="+", metavar="LABEL=FILE", help="a build's label and its check record")

    p = command(cmd_record_profile, "record-profile", "analyse recorded profile inputs (make profile's "
                "profile-inputs.json) into one recorded run")
    p.add_argument("out", metavar="FILE", type=Path, help="where the record goes, e.g. handouts/data/h100/profile.json")
    p.add_argument("inputs", nargs="+", type=Path, metavar="INPUTS.json",
                   help="the recorded inputs, e.g. tests/python/data/ncu/*.json")

    p = command(cmd_figures, "figures", "rewrite the measured figures of README.md and the handouts from the "
                "recorded runs in handouts/data")
    p.add_argument("--check", action="store_true",
                   help="change nothing; exit 1 listing every figure that differs from its recording")
    p.add_argument("--data", type=Path, default=None, metavar="DIR", help="the recordings (default handouts/data)")
    p.add_argument("files", nargs="*", type=Path, metavar="FILE",
                   help="the Markdown files (default README.md, handouts/*.md, reference/*/ANSWERS.md)")

    p = command(cmd_pictures, "pictures", "redraw the handouts' PNG pictures from the recorded runs (matplotlib; "
                "the report page: Chromium)")
    p.add_argument("--slug", action="append", default=None, metavar="SLUG", help="the recorded tour to draw, "
                   "handouts/data/SLUG/tour.json (repeatable; default: every recorded tour)")
    p.add_argument("--report-page", action="store_true",
                   help="only handouts/img/report-page.png, from the recorded grading of tests/python/data/html")

    p = command(cmd_tune, "tune", "sweep the references' compile-time parameters on this GPU and write the best "
                "to labs/NN-slug/tuning/<gpu>.json")
    p.add_argument("--lab", help="comma-separated labs, names or numbers (default: every lab with a tune.json)")
    p.add_argument("--jobs", type=int, default=None, help="parallel builds (default: the CPU count)")
    p.add_argument("--seed", type=seed, default=None, help="inputs' seed for every variant (default: random)")
    p.add_argument("--min-gain", type=float, default=tune.DEFAULT_MIN_GAIN,
                   help="a variant replaces the defaults only when this fraction faster (default 0.02)")
    p.add_argument("--dry-run", action="store_true", help="measure and print, write no tuning file")
    p.add_argument("--plot-dir", type=Path, default=KIT_ROOT / "build" / "tune",
                   help="where the sweeps' pictures go (default build/tune; needs matplotlib)")
    p.add_argument("--space", type=Path, metavar="JSON", help="sweep these bounds instead of the lab's tune.json "
                   "(one --lab)")
    p.add_argument("--print-defines", metavar="LAB",
                   help="print the -D flags of LAB's tuning file for this GPU (what lab.mk uses), and exit")
    p.add_argument("--draw", metavar="LAB", help="draw LAB's committed sweeps of --devices side by side, and exit")
    p.add_argument("--devices", help="with --draw: GPU names separated by ';' (as in the tuning files)")
    p.add_argument("--out", type=Path, metavar="PNG", help="with --draw: the picture's path")


def _refusing(command: str, *errors):
    """The command, with each of `errors` its one-line refusal on standard error (exit 1)."""
    def wrap(cmd):
        def run(args) -> int:
            try:
                return cmd(args)
            except errors as err:
                print(f"grade.py {command}: {err}", file=sys.stderr)
                return EXIT_NOT_FULL
        return run
    return wrap


def cmd_record_archs(args) -> int:
    """LABEL=FILE check records of builds for other GPUs' feature sets (`make check CUDA_ARCH=compute_75`,
    PTX JIT-compiled here) as one record named as its file (archs, cuda12): `builds` [{label, cuda_arch,
    cuda}] and every run's rows, ids "NN/impl@LABEL"; device, date and kit the first run's."""
    runs = []
    for pair in args.runs:
        label, sep, file = pair.partition("=")
        if not sep or not label or not file:
            raise UsageError(f"{pair!r}: give LABEL=FILE, e.g. compute_75=check-75.json")
        runs.append((label, read_json(Path(file), UsageError)))
    first = runs[0][1]
    record = {k: v for k, v in first.items() if k not in ("rows", "impl")}
    record.update(record=Path(args.out).stem, source="make check IMPL=reference CUDA_ARCH=LABEL on one GPU, each "
                  "run recorded by grade.py record-check, collected by grade.py record-archs", builds=[], rows=[])
    for label, run in runs:
        if run.get("record") != "check":
            raise UsageError(f"{label}: not a check record (record: {run.get('record')!r})")
        if (run.get("device") or {}).get("name") != first["device"]["name"]:
            raise UsageError(f"{label}: graded on {run['device'].get('name')}, not {first['device']['name']}: "
                             "one record holds one GPU's runs")
        build = {"label": label, "cuda_arch": label, "cuda": (run.get("device") or {}).get("cuda")}
        record["builds"] += [] if build in record["builds"] else [build]
        record["rows"] += [dict(row, id=f"{row['id']}@{label}", build=label) for row in run.get("rows") or []]
    record["copy_gbps"] = records.median_or_none(row.get("copy_gbps") for row in record["rows"])
    path = write_json(args.out, record)
    print(f"recorded {len(record['rows'])} rows of {len(record['builds'])} builds: {path}")
    return EXIT_FULL


@_refusing("tour", tour.TourError)
def cmd_tour(args) -> int:
    table, rows, device = tour.run_tour(args.json, args.markdown)
    if args.plot:
        print("\n".join(pictures.draw(rows, device["name"] or "unknown GPU", device["sm_count"], args.plot,
                                       device["sm_clock_max_mhz"])))
    print(table)
    return EXIT_FULL


@_refusing("calibrate", tour.TourError)
def cmd_calibrate(args) -> int:
    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    for line in tour.calibrate(args.runs, lab_list(args.labs), write=not args.dry_run, out_json=args.json):
        print(line)
    return EXIT_FULL


def _write(record: dict, out: Path, rows_are: str) -> int:
    path = write_json(out, record)
    print(f"wrote {path}: {len(record['rows'])} {rows_are} on {record['device']['name']}, {record['date']}")
    return EXIT_FULL


def cmd_smem_roof(args) -> int:
    """grade.py smem-roof: build, run on this machine's first GPU, print; --json FILE records it."""
    found = gpuprobe.probe(quick=True)
    if not found.ok:
        raise UsageError(f"smem-roof needs a GPU: {found.message or found.status}")
    data = roofs.measure_smem_roof(roofs.build_smem_roof(found.cc))
    for a in data["accesses"]:
        print(f"{data['device']}: {a['bytes']:2d}-byte shared loads: {a['bytes_per_clock_per_sm']:.1f} bytes per "
              f"clock per SM (median of {data['sm_count']} SMs; lowest {a['lowest_sm']:.1f}) at {a['clock_mhz']:.0f} "
              f"MHz; the hardware's figure: 128")
    if args.json:
        record = roofs.smem_roof_record(data, "grade.py smem-roof --json (make smem-roof)")
        path = write_json(args.json, record)
        print(f"recorded: {path}")
    return EXIT_FULL


@_refusing("ebisu", tour.TourError)
def cmd_ebisu(args) -> int:
    """grade.py ebisu: build EBISU, time it and lab 8's reference, print; --json FILE records it."""
    found = gpuprobe.probe(quick=True)
    if not found.ok:
        raise UsageError(f"ebisu needs a GPU: {found.message or found.status}")
    record = ebisu.compare(args.src)
    print(ebisu.render(record))
    if args.json:
        print(f"recorded: {write_json(args.json, record)}")
    return EXIT_FULL


@_refusing("record-check", records.RecordError)
def cmd_record_check(args) -> int:
    return _write(records.record_check(records.collect_reports(args.impl)), args.out, "labs")


@_refusing("record-profile", records.RecordError)
def cmd_record_profile(args) -> int:
    return _write(records.record_profile(args.inputs), args.out, "profiled runs")


def cmd_figures(args) -> int:
    """The measured figures (figures.py) and, unless FILES were named, the handouts' diagrams
    (diagrams/): --check compares both with what the recordings and the labs' constants give."""
    from . import diagrams, figures

    result = figures.run(args.files or None, args.data or figures.DATA_DIR)
    status, text = figures.report(result, args.check)
    if not args.check and status == EXIT_FULL:
        figures.write(result)
    lines = [text]
    if not args.files:
        try:
            if args.check:
                drawn = diagrams.differences()
                lines += [f"error: {d}" for d in drawn]
                lines.append(f"{len(drawn)} difference(s) in the {len(diagrams.DIAGRAMS)} diagrams and their handouts"
                             if drawn else f"all {len(diagrams.DIAGRAMS)} diagrams match what the code draws")
                status = max(status, 1 if drawn else EXIT_FULL)
            elif status == EXIT_FULL:
                lines += [f"wrote {display_path(p)}" for p in diagrams.write()]
        except diagrams.DiagramError as err:
            lines.append(f"error: {err}")
            status = max(status, 1)
    print("\n".join(lines), file=sys.stdout if status == EXIT_FULL else sys.stderr)
    return status


@_refusing("pictures", pictures.PictureError, records.RecordError)
def cmd_pictures(args) -> int:
    if args.report_page:
        print(pictures.report_page())
        return EXIT_FULL
    for slug in args.slug or sorted({s for s, n in records.load_recordings().records if n == "tour"}):
        print("\n".join(pictures.draw_tour(slug)))
    return EXIT_FULL


@_refusing("tune", tune.TuneError)
def cmd_tune(args) -> int:
    if args.print_defines:
        print(tune.print_defines(args.print_defines))
        return EXIT_FULL
    if args.draw:
        if not args.devices or not args.out:
            raise UsageError("--draw needs --devices 'GPU A;GPU B' and --out PNG")
        devices = [d.strip() for d in args.devices.split(";") if d.strip()]
        print(f"wrote {pictures.draw_devices(args.draw, devices, args.out)}")
        return EXIT_FULL
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if not 0 <= args.min_gain < 1:
        raise UsageError(f"--min-gain is a fraction in [0, 1), got {args.min_gain:g}")
    labs = lab_list(args.lab)
    space = None
    if args.space:
        if len(labs or []) != 1:
            raise UsageError("--space needs exactly one --lab")
        space = tune.load_space_file(args.space, tune.find_lab(labs[0]))
    chosen = [tune.find_lab(n) for n in labs] if labs else tune.tunable_labs()
    if not chosen:
        raise UsageError("no lab has a tune.json")
    status = EXIT_FULL
    for done in tune.tune_labs(chosen, args.seed, args.jobs, args.min_gain, write=not args.dry_run, space=space):
        if done.device is not None:
            done.plot = pictures.draw_sweep(done, args.plot_dir / f"tune-{done.lab}.png")
        print(tune.render(done), flush=True)
        status = status if done.best is not None else EXIT_NOT_FULL
    return status
