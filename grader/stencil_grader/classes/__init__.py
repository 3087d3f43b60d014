"""Grading a class: every (student, lab) of a submissions directory, its back ends (the GPUs of one
host; Slurm on a cluster) and the class files (class.csv, gradings.csv, Gradescope results).

    importers     `grade.py import`: a course site's export (Canvas, Moodle, Gradescope) laid out as
                  a class folder, with CLASS/roster.csv (who each folder is)
    submissions   the roster: student folders, each lab's kernel.cu or why it is missing
    worker        one grading in a process of its own (`grade.py lab`, optionally one stage of it)
    outdir        the output folder: which class it holds, files written by rename, the resume stamp
    classgrade    the plan and the class files; grade_class() on this host
    backend       the back-end interface, and LocalBackend (this host's CPUs and GPUs)
    gpupool       the GPUs of a class, each probed by a tiny CUDA program
    batch         a batch system's run folder, its build and GPU tasks, the merge
    slurm         `grade.py slurm`: Slurm job arrays
    classhtml     the class as web pages (optional: used when present)
    commands      grade.py's `import`, `class`, `slurm` and `class-task`
"""
