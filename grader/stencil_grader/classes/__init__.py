"""Grading a class: every (student, lab) of a submissions directory, its back ends (the GPUs of one
host; a batch system such as Slurm on a cluster) and the class files (class.csv, gradings.csv, the
course sites' gradebooks).

One class grading is plan -> run the gradings -> merge, a module each, entered in that order:

    plan          the plan: what this run grades, what it keeps (final already: the resume rule)
    backend       the back-end interface; LocalBackend (this host's CPUs and GPUs) and grade_class(),
                  which runs each grading through worker
    merge         the class files, rebuilt from every report in the output folder

and beside them:

    importers     `grade.py import`: a course site's export (Canvas, Moodle, Gradescope) laid out as
                  a class folder, with CLASS/roster.csv (who each folder is); before any grading
    submissions   the roster: student folders, each lab's kernel.cu or why it is missing
    worker        one grading in a process of its own (`grade.py lab`, optionally one half of it)
    outdir        the output folder: its layout, files written by rename, the resume stamp, and
                  the rule that keeps a grade
    gpupool       the GPUs of a class, each probed by a tiny CUDA program
    batch         a batch system: the run folder, what an engine must do, the submission
    tasks         what a batch run's jobs run: the build and GPU tasks, the merge
    resources     what a batch task asks for (time, memory, CPUs), from a recording
    engines/      one module per batch engine (slurm: `grade.py slurm`, Slurm job arrays)
    gradebook     the course sites' files: Gradescope per lab, Canvas, Moodle
    classhtml     the class as web pages (optional: used when present)
    similarity    around the grades, none changing one: pairs of similar kernel.cu files
                  (copydetect, an optional instructor tool; simpages: their side-by-side pages),
    leaderboard   the leaderboard of who opted in under a pseudonym, and Gradescope's entries,
    classdiff     how a class moved between two gradings
    commands      grade.py's `import`, `class`, one command per engine, `class-task`, `similarity`
                  and `class-diff`
"""
