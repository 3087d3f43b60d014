"""stencil_grader: the Python grader of the CUDA stencil lab kit.  It never links against CUDA: it drives
`make` and the programs each lab build produces (`check`, `bench`), reads what they report, scores and reports.

Subpackages, imports running one way only: base <- grading <- student <- classes, instructor (nothing imports
those two; base uses nothing of the kit); what each holds, and what the student kit ships: grader/README.md's
table of the kit's parts (`stencil_grader/`).  cli builds grade.py from each subpackage's commands.
"""

from pathlib import Path

#: The kit's version, part of every class report's stamp: a class graded by another version is graded
#: again (classes/outdir.py is_final).  2.1: student folders of any name grade right, so
#: the finals of 2.0, some of them wrong 0s, are not kept.
__version__ = "2.1"

#: Root of the lab kit (the directory holding grader/, labs/, starter/ ...).
KIT_ROOT = Path(__file__).resolve().parents[2]
