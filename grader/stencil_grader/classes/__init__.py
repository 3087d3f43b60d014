"""Grading a class (grader/README.md, section 9): plan -> the gradings -> one class table -> the
class files, whoever runs the gradings (this host's GPUs, or a batch engine on a cluster).

    plan         what to grade and what to keep               submissions  the class folder
    backend      the back ends; grade_class on this host      worker       one grading, a process
    batch, tasks a batch system: the run, its jobs' tasks     engines/     one module per engine
    classtable   the reports, roster and facts, read once     classfiles   the class files
    outdir       the output folder's paths and files          grades       what a report means
    resume       the stamp, the final rule, a grade kept      importers/   one module per course site
    gpupool, resources, gsautograder, classdiff, commands; classhtml, similarity, leaderboard
"""
