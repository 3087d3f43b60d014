"""`make profile` / `grade.py profile`: why a kernel is slow, from Nsight Compute's counters or, without
them, from what the build and the audited bench run show (grader/README.md, section 8: the ncu command
line, the figures, the files written, the mode without counters, the modules).  Exit status: common.EXIT_*.
"""

from .command import ProfileRun, analyse, profile_lab
from .rules import load_rules

__all__ = ["ProfileRun", "analyse", "load_rules", "profile_lab"]
