"""Grading a class: every (student, lab) of a submissions directory, its back ends (the GPUs of one
host; Slurm on a cluster) and the class files (class.csv, Gradescope results)."""
