"""stencil_grader: the Python grader of the CUDA stencil lab kit.

The grader never links against CUDA.  It drives `make` and the two programs each
lab build produces (`check` and `bench`), reads what they report, scores the
result and prints a report.  grader/README.md is the contract between those
programs and this package.

Subpackages, imports going one way only (base <- grading <- student; classes and
instructor may use any of those three, nothing uses them; base uses nothing of the kit):

    base        what every part stands on: lab.json (labspec), the problem kinds
                (kinds), what the C programs and Python agree on (protocol),
                running a program (process), the sandbox (sandbox), GPU locks (locks)
    grading     one grading of one lab: build, static checks (static: symbols,
                source, ptx), correctness (checkrun), timing (bench), the launch
                audit (launches), the policy (score), the report, the pipeline
    student     what a student runs beside make check: profiling (make profile) and
                lab 7's Jacobi solver (make solve)
    classes     instructor: a whole class, the grading of every (student, lab), its
                back ends (the local GPU pool, Slurm) and the class files (CSV, Gradescope)
    instructor  instructor: the tour, calibration, tuning, the handouts' measured
                figures, pictures and diagrams
    cli         the command line (grade.py), built from each subpackage's commands

The student kit (`make dist`, grader/dist/pack.sh) ships base, grading, student and cli
only; cli offers the commands of the subpackages that are there.
"""

from pathlib import Path

#: The kit's version, part of every class report's stamp: a class graded by another version is graded
#: again (classes/outdir.py is_final).  2.1: student folders of any name grade right, so
#: the finals of 2.0, some of them wrong 0s, are not kept.
__version__ = "2.1"

#: Root of the lab kit (the directory holding grader/, labs/, starter/ ...).
KIT_ROOT = Path(__file__).resolve().parents[2]
