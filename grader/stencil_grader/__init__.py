"""stencil_grader: the Python grader of the CUDA stencil lab kit.

The grader never links against CUDA.  It drives `make` and the two programs each
lab build produces (`check` and `bench`), reads the files they write, scores the
result and prints a report.  grader/README.md is the contract between those
programs and this package.

Modules, one concern each:

    labspec     load and validate lab.json; generate lab_config.h
    proc        run a subprocess under a timeout, killing everything it started
    build       run `make build`; parse the ptxas -v report
    static      forbidden calls in the student file; PTX constraints
    checkrun    run the Check suite and read its XML log
    bench       run the bench program (GPU probe and timing)
    score       the grading policy: verdicts and points (the only place for it)
    report      terminal table, JSON report, Gradescope results.json
    pipeline    one lab, start to end: build -> static -> correctness -> bench
    classgrade  instructor mode: a whole class of submissions
    cli         the command line (grade.py)
"""

from pathlib import Path

__version__ = "1.0"

#: Root of the lab kit (the directory holding grader/, labs/, starter/ ...).
KIT_ROOT = Path(__file__).resolve().parents[2]
