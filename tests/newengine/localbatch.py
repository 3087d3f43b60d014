"""`grade.py localbatch`: a batch engine that runs its jobs at once on this host, one after another.

The worked example of a new batch engine (grader/README.md, section 9; tests/newengine/README.md):
this file, copied into grader/stencil_grader/classes/engines/, is the whole engine, and nothing
else of the kit changes.  It writes a shell script per stage, calling the batch layer's tasks
with the task index as the script's first argument, and "submits" them by running them with
subprocess (argument lists, no shell parsing a name): every build task, then every GPU task,
then the merge, each task's output in the run folder's logs/.  A real engine hands the same
scripts to its queue (HTCondor's condor_submit, PBS's qsub) with the same order between them.
"""

from __future__ import annotations

import shlex
import subprocess

from ..batch import TASK_STAGES, BatchEngine, Shape, task_command

JOB = "local"


class LocalBatchEngine(BatchEngine):
    """Runs a run's jobs on this host at once (module docstring)."""

    name = "localbatch"
    summary = "run a class's batch jobs at once on this host (the worked example of a new batch engine)"

    def scripts(self, shape: Shape) -> dict[str, str]:
        """build.sh, gpu.sh (the task index as $1) and merge.sh."""
        return {f"{stage}.sh": "#!/bin/bash\n# " + stage + " of a localbatch run\n"
                + "\n".join(task_command(shape, stage, "$1" if stage != "merge" else None, JOB)) + "\n"
                for stage in TASK_STAGES}

    def commands(self, shape: Shape) -> list[str]:
        tasks = f"for i in $(seq 0 {shape.tasks - 1}); do bash {{}} $i; done"
        return [tasks.format(shlex.quote(str(shape.path / f"{stage}.sh"))) for stage in ("build", "gpu")] \
            + [f"bash {shlex.quote(str(shape.path / 'merge.sh'))}"]

    def submit_jobs(self, shape: Shape) -> dict[str, str]:
        for stage in TASK_STAGES:
            for task in range(shape.tasks if stage != "merge" else 1):
                log = shape.path / self.log_pattern.format(stage=stage, job=JOB, task=task)
                argv = ["bash", str(shape.path / f"{stage}.sh")] + ([str(task)] if stage != "merge" else [])
                with open(log, "w") as output:
                    done = subprocess.run(argv, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                self.say(f"{stage} task {task}: exit status {done.returncode} (log {log})")
        return {stage: JOB for stage in TASK_STAGES}
