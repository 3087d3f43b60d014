"""One lab, start to end: build -> static checks -> correctness -> bench -> score.

Which stage runs after which is decided by score.may_run / score.may_bench;
this module only calls the stages in order and keeps what they returned.
The static checks are static.py's (source and PTX) and symbols.py's (the
compiled object); the programs that run student code run in base/sandbox.py's sandbox,
whose layers the run keeps for the report.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import KIT_ROOT
from ..base import labspec, locks
from . import bench, build, checkrun, score, static


@dataclass
class LabRun:
    """Everything one grading of one lab saw.  Stages that did not run are None."""

    spec: labspec.LabSpec
    impl: str
    build_dir: Path
    source: Path
    started_at: str
    build: build.BuildResult | None = None
    static: static.StaticResult | None = None
    probe: bench.Probe | None = None
    check: checkrun.CheckRun | None = None
    bench: bench.BenchRun | None = None
    score: score.Score | None = None
    seed: int | None = None
    not_measured: str | None = None
    notes: list[str] = field(default_factory=list)
    sandbox: dict[str, str] = field(default_factory=dict)    # sandbox.Sandbox.layers of the runs


def resolve_lab_dir(arg: str | Path, kit_root: Path = KIT_ROOT) -> Path:
    """LABDIR as given, or KIT/labs/<arg> when arg is a bare lab name like 01-naive-5pt."""
    path = Path(arg)
    if not (path / "lab.json").is_file() and (Path(kit_root) / "labs" / str(arg) / "lab.json").is_file():
        path = Path(kit_root) / "labs" / str(arg)
    return path


def impl_tag(impl: str) -> str:
    """starter, reference, or dir-<the directory's absolute path, slashes as underscores>.

    The same rule as lab.mk's IMPL_TAG, applied to the path the build passes to
    make (build.make_command resolves it): one name for one directory.
    """
    if impl in ("starter", "reference"):
        return impl
    return "dir-" + str(Path(impl).resolve()).lstrip(os.sep).replace(os.sep, "_")


def kit_error(message: str) -> str | None:
    """The `kit error: ...` line of a failed build (lab.mk's own checks: a missing Check library,
    a lab without a problem-kind module), or None.  Such a failure is the machine's or the
    kit's, never the student's: a line of nvcc's output never starts that way."""
    for line in message.splitlines():
        if line.startswith("kit error: "):
            return line
    return None


def default_build_dir(lab: str, impl: str, kit_root: Path = KIT_ROOT) -> Path:
    """KIT/build/<lab>/<impl-tag>."""
    return Path(kit_root) / "build" / lab / impl_tag(impl)


def grade_lab(lab_dir: str | Path, impl: str = "starter", build_dir: str | Path | None = None,
              seed: int | None = None, arch: str | None = None, skip_bench: bool = False,
              gpu_lock: str | Path | None = None,
              build_timeout_s: float = build.DEFAULT_TIMEOUT_S,
              progress: Callable[[str], None] | None = None) -> LabRun:
    """Grade one lab.

    impl: "starter", "reference" or a directory of submissions (see build.impl_source).
    seed: replay this input seed (None: the check program draws one and prints it).
    gpu_lock: a lock file held around the GPU stages (instructor mode runs several
        gradings at once; only one uses the GPU at a time).
    progress: called with a short line as each stage starts.
    Raises labspec.LabSpecError when lab.json is wrong; everything the student's
    code does ends up in the returned LabRun instead.
    """
    say = progress or (lambda line: None)
    lab_dir = resolve_lab_dir(lab_dir)
    spec = labspec.load(Path(lab_dir) / "lab.json")
    build_dir = Path(build_dir) if build_dir else default_build_dir(spec.lab, impl)
    run = LabRun(spec, impl, build_dir, build.impl_source(spec.lab, impl),
                 datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), seed=seed)

    say(f"building {spec.lab} ({impl}) in {labspec.display_path(build_dir)} ...")
    run.build = build.build(spec.lab_dir, impl, build_dir, arch, build_timeout_s)
    if not run.build.ok and kit_error(run.build.message):
        run.build.outcome = "kit_error"
    if run.build.ok:
        run.static = static.run_static(spec, run.source, build_dir)
    if not score.may_run(run.build, run.static)[0]:
        run.score = score.score_lab(spec, run.build, run.static)
        return run

    with locks.GpuLock(gpu_lock):
        say("looking for a GPU ...")
        run.probe = bench.probe(build_dir)
        run.sandbox = run.probe.sandbox
        if run.probe.status == "no_gpu":
            run.not_measured = f"no GPU: {run.probe.message}"
        else:
            if run.probe.status == "error":
                run.notes.append(run.probe.message)
            say("running the correctness cases ...")
            run.check = checkrun.run_check(build_dir, spec.check.suite_timeout_s, seed,
                                           spec.check.case_timeout_s, on_seed=lambda n: say(f"seed: {n}"))
            run.seed = run.check.seed if run.check.seed is not None else seed
            run.sandbox = run.check.sandbox
            run.notes += run.check.notes
            if score.may_bench(run.static, run.check)[0]:
                if skip_bench:
                    run.not_measured = "skipped (--skip-bench)"
                else:
                    say("timing (bench) ...")
                    run.bench = bench.run_bench(build_dir, spec.bench.timeout_s, run.seed)
                    run.notes += run.bench.notes
    run.score = score.score_lab(spec, run.build, run.static, run.check, run.bench,
                                not_measured=run.not_measured, device_name=run.probe.name)
    return run
