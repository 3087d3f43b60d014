"""grade.py's commands for a class: `import`, `class` (this host's GPUs), one per batch engine (engines/), `class-task`
(a batch job's task or merge), and around the grades `similarity`, `gradescope-autograder` and `class-diff`."""

import argparse
import functools
import sys
from pathlib import Path

from ..base.files import write_atomic
from ..base.cliargs import UsageError, lab_list
from ..grading import html
from . import (backend, batch, classdiff, classfiles, classhtml, classtable, gsautograder, importers, plan,
               similarity, submissions, tasks)
from .engines import engines
from .submissions import ClassError

_progress = functools.partial(print, flush=True)


def _class_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("submissions", metavar="SUBMISSIONS_DIR", type=Path,
                   help="one folder per student, mirroring starter/: SUBMISSIONS_DIR/<student>/<lab>/kernel.cu")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="where reports go (outside SUBMISSIONS_DIR); run again into the same DIR to grade only "
                        "what has no final grade there")
    p.add_argument("--labs", help="comma-separated lab names (default: the labs CLASS/roster.csv has imported, "
                                  "else every lab)")
    p.add_argument("--student", help="(re)grade this student only (the folder's name, as written), whatever "
                                     "grades it has")
    p.add_argument("--regrade", action="store_true",
                   help="grade every selected lab again, final grades too (a grade is still never replaced "
                        "by one that measured nothing)")
    p.add_argument("--missing-as-zero", action="store_true",
                   help="count a required lab never submitted as 0 in the gradebook files (default: leave it "
                        "out; class.csv says 'missing' either way; a bonus lab is never 0)")


def register(sub) -> None:
    """Add this subpackage's commands to grade.py's subparsers."""
    p = sub.add_parser("import", help="lay a course site's export of one lab out as a class folder: "
                                      "CLASS/<student folder>/<lab>/kernel.cu and CLASS/roster.csv",
                       epilog="Exit status: 0 every student's kernel.cu is in CLASS, 1 something was not "
                              "taken (each said on its own line), 2 nothing done (usage, or an unreadable "
                              "export or roster.csv).")
    p.add_argument("--from", dest="site", required=True, choices=importers.SITES,
                   help="the site that made the export")
    p.add_argument("export", metavar="EXPORT", type=Path,
                   help="the site's export: the .zip itself (read, never unpacked) or its unpacked folder")
    p.add_argument("--lab", required=True, metavar="NN-slug", help="the lab the export holds, e.g. 01-naive-5pt")
    p.add_argument("--into", required=True, type=Path, metavar="CLASS",
                   help="the class folder (created if missing; the input of `grade.py class`)")
    p.add_argument("--force", action="store_true",
                   help="replace a kernel.cu already in CLASS that differs from the export's")
    p.add_argument("--groups", type=Path, metavar="FILE",
                   help="a group assignment's export: the site's group file (Canvas: the group set's groups CSV; "
                        "Moodle: the assignment's grading worksheet; Gradescope: none, its export says)")
    p.add_argument("--accept", action="append", default=[], metavar="WHO",
                   help="take this student's one near miss (Kernel.cu, kernel (1).cu, a .zip holding one "
                        "kernel.cu) as their kernel.cu: their folder as printed, or site id, or 'all' (repeatable)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("class", help="instructor mode: grade a directory of submissions on this host's GPUs")
    _class_options(p)
    p.add_argument("--jobs", type=int, default=None,
                   help="builds at once (default: CPU count); the GPU stages run on the GPUs as builds finish")
    p.add_argument("--gpus", default=None, metavar="all|0,2,...",
                   help="the GPUs to grade on, by nvidia-smi index (default: all; each is probed first)")
    p.add_argument("--similarity", action="store_true",
                   help=f"also compare the graded labs' kernel.cu files ({similarity.TOOL}, an optional "
                        "instructor tool; as grade.py similarity does) before the class files are written")
    p.add_argument("--against", type=Path, metavar="DIR",
                   help="with --similarity: earlier terms' submissions and known solutions, DIR/.../<lab>/*.cu")
    p.set_defaults(func=cmd_class)

    p = sub.add_parser("similarity", help="pairs of students' kernel.cu files that look alike, per lab, "
                                          f"with {similarity.TOOL} (never a grade)",
                       epilog=f"Writes OUT/similarity/<lab>/: pairs.csv, pairs.txt, similarity.json and a side-by-side "
                              f"page of each flagged pair; class.html shows them. Needs {similarity.TOOL} "
                              f"({similarity.INSTALL}). Exit status: 0 compared (flagged or not), 2 refused.")
    p.add_argument("submissions", metavar="CLASS", type=Path, help="the class folder: CLASS/<student>/<lab>/kernel.cu")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="the output folder (the class grading's --out, or a new one)")
    p.add_argument("--lab", action="append", metavar="NN-slug",
                   help="a lab to compare (repeat, or comma-separated; default: every lab)")
    p.add_argument("--against", type=Path, metavar="DIR",
                   help="earlier terms' submissions and known public solutions: every DIR/.../<lab>/*.cu")
    p.add_argument("--threshold", type=float, default=similarity.FLAG,
                   help=f"the score at which a pair is flagged (default {similarity.FLAG})")
    p.set_defaults(func=cmd_similarity)

    p = sub.add_parser("gradescope-autograder", help="the zip of a Gradescope autograder that serves one lab's "
                                                     "grades of a class grading (it grades nothing itself)",
                       epilog="Upload it in the lab's programming assignment (Configure Autograder), then "
                              "Regrade All Submissions. Exit status: 0 written, 2 refused.")
    p.add_argument("out", metavar="OUT", type=Path, help="the class grading's output folder (grade.py class --out)")
    p.add_argument("--lab", required=True, metavar="NN-slug", help="the lab of the Gradescope assignment")
    p.add_argument("--zip", type=Path, metavar="FILE",
                   help="where to write it (default: OUT/gradebook/gradescope-<lab>-autograder.zip)")
    p.add_argument("--force", action="store_true", help="replace an existing --zip FILE")
    p.set_defaults(func=cmd_gradescope_autograder)

    p = sub.add_parser("class-diff", help="how a class moved between two gradings: who improved, who "
                                          "regressed, whose verdict changed",
                       epilog="Exit status: 0 compared, 2 refused (a folder that no class grading wrote).")
    p.add_argument("before", metavar="OUT_A", type=Path, help="the earlier grading's output folder")
    p.add_argument("after", metavar="OUT_B", type=Path, help="the later grading's output folder")
    p.add_argument("--html", type=Path, metavar="FILE", help="also write the comparison as a web page")
    p.set_defaults(func=cmd_class_diff)

    for engine in engines():
        p = sub.add_parser(engine.name, help=engine.summary)
        _class_options(p)
        batch.add_options(p)
        engine.add_options(p)
        p.set_defaults(func=cmd_batch, engine=engine)

    p = sub.add_parser("class-task", help="(run by a batch engine's jobs) one task of a run folder, or its merge")
    p.add_argument("stage", choices=batch.TASK_STAGES, help="build, gpu (one array task) or merge")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="OUT/batch/run-N")
    p.add_argument("--task", type=int, default=None, help="the task's index in its array (build and gpu)")
    p.add_argument("--job", default=None, help="the engine's job id (for the status files and the merge's messages)")
    p.set_defaults(func=cmd_class_task)


def print_result(result: classfiles.ClassResult) -> int:
    """Print a class summary (the alarm on stderr) and return its exit status."""
    print()
    for line in result.summary:
        print(line)
    if result.alarm:
        print("\n" + "\n".join(result.alarm), file=sys.stderr)
    return result.exit_status


def cmd_import(args) -> int:
    return importers.import_export(args.site, args.export, args.lab, args.into, force=args.force, say=_progress,
                                   groups=args.groups, accept=args.accept).exit_status


def cmd_class(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.against is not None and not args.similarity:
        raise UsageError("--against goes with --similarity (the files the class is compared with)")
    return print_result(backend.grade_class(
        args.submissions, args.out, lab_list(args.labs), args.student, args.jobs, progress=_progress, gpus=args.gpus,
        missing_as_zero=args.missing_as_zero, regrade=args.regrade, similarity=args.similarity, against=args.against))


def own_options(engine: type[batch.BatchEngine]) -> list[str]:
    """The names (argparse's dest) of an engine's own options: the keywords its __init__ takes."""
    parser = argparse.ArgumentParser(add_help=False)
    engine.add_options(parser)
    return list(vars(parser.parse_args([])))


def cmd_batch(args) -> int:
    engine = args.engine(batch.BatchOptions.checked(args), _progress,
                         **{name: getattr(args, name) for name in own_options(args.engine)})
    return batch.submit(engine, args.submissions, args.out, lab_list(args.labs), args.student, args.missing_as_zero,
                        args.regrade)


def cmd_class_task(args) -> int:
    """One task; the merge exits 0 once it has merged (what was not measured is in its files)."""
    if args.stage == "merge":
        print_result(tasks.merge(args.run_dir, args.job, say=_progress))
        return 0
    if args.task is None:
        raise UsageError(f"a {args.stage} task needs --task I (its index in the array: the engine's job "
                         "script hands it in)")
    return tasks.run_task(args.run_dir, args.stage, args.task, args.job, say=_progress)


def cmd_similarity(args) -> int:
    labs = [lab for item in args.lab or [] for lab in lab_list(item) or []] or None
    if not similarity.run(args.submissions, args.out, labs, args.against, args.threshold, say=_progress):
        raise ClassError(f"no selected lab of {args.submissions} holds a {submissions.SOURCE} to compare")
    table = classtable.load(args.out.resolve(), [s.lab for s in plan.select_labs(None)])
    if table.reports:                       # a class grading's folder: its page shows the column
        print(f"class page: {classhtml.write_class_html(table)}")
    return 0


def cmd_gradescope_autograder(args) -> int:
    if args.lab not in [s.lab for s in plan.select_labs(None)]:
        raise UsageError(f"--lab {args.lab!r} is no lab of this kit: give one of labs/ (e.g. 01-naive-5pt)")
    built = gsautograder.build(args.out, args.lab, args.zip, args.force)
    print(f"{built.path}: serves {built.served} student(s)' grade of {args.lab}")
    if built.without_grade:
        print(f"{len(built.without_grade)} Gradescope student(s) have no grade of {args.lab} to serve (their "
              "submission will show 'autograder failed', never a 0): "
              + ", ".join(map(submissions.shown, built.without_grade)))
    return 0


def cmd_class_diff(args) -> int:
    changes = classdiff.diff_outs(args.before, args.after, [s.lab for s in plan.select_labs(None)])
    print(f"from {args.before} to {args.after}: " + "\n".join(classdiff.lines(changes)))
    if args.html:
        body = classdiff.section(changes, "class-diff", "How the class moved",
                                 f"From {args.before} to {args.after}: each (student, lab) of either grading.")
        print(f"page: {write_atomic(args.html, html.page('How the class moved', body))}")
    return 0
