"""Grading a class: every (student, lab) of a submissions directory, its back ends (the GPUs of one
host; Slurm on a cluster) and the class files (class.csv, gradings.csv, Gradescope results).

One class grading is plan -> run the gradings -> merge, a module each, entered in that order:

    submissions   the roster: student folders, each lab's kernel.cu or why it is missing
    plan          the plan: what this run grades, what it keeps (final already: the resume rule)
    worker        one grading in a process of its own (`grade.py lab`, optionally one half of it)
    backend       the back-end interface; LocalBackend (this host's CPUs and GPUs) and grade_class()
    merge         the class files, rebuilt from every report in the output folder
    outdir        the output folder: its layout, files written by rename, the resume stamp, and
                  the rule that keeps a grade
    gpupool       the GPUs of a class, each probed by a tiny CUDA program
    batch         a batch system's run folder, its build and GPU tasks, the merge
    slurm         `grade.py slurm`: Slurm job arrays
    classhtml     the class as web pages (optional: used when present)
    commands      grade.py's `class`, `slurm` and `class-task`
"""
