"""`make profile` / `grade.py profile`: why a kernel is slow, from Nsight Compute's counters or, without
them, from what the build and the audited bench run show (grader/README.md, section 8: the ncu command
line, the figures, the files written, the mode without counters, the modules).

    grade.py profile LABDIR [--impl starter|reference|DIR] [--build-dir DIR] [--seed N] [--no-counters]
    grade.py profile LABDIR --from-inputs BUILD_DIR/profile-inputs.json     (no GPU: analyse again)

Exit status (common.EXIT_*): 0 profiled; 1 the build or the program failed; 2 nothing could be profiled
here (no GPU, a debug build, no kernel of the student ran), with what to do about it.  It never changes a
graded figure, and runs the student's code as the user who calls it, outside the grading sandbox.
"""

from .command import ProfileRun, analyse, profile_lab
from .rules import load_rules

__all__ = ["ProfileRun", "analyse", "load_rules", "profile_lab"]
