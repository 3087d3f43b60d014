"""One lab, start to end: build -> static checks -> correctness -> bench -> score.

Which stage runs after which is score.may_run / score.may_bench's; this module calls the stages in
order and keeps what they returned (LabRun), with each stage's wall seconds, CPU seconds and peak
resident set (process.metered) for the report and the batch systems (classes/resources.py).  A
grading runs whole (stage="all") or in two halves, "build" then "gpu", passing STATE_FILE through
the build directory (grader/README.md, section 4).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import re
import resource
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import KIT_ROOT, __version__
from ..base import gpus, labspec, locks, process
from ..base.files import display_path, sha256_of
from . import bench, build, checkrun, launches, sass, score, static
from .checks import StaticCheck

#: The longest build directory name impl_tag gives, in bytes (a file name holds at most 255).
TAG_BYTES = 160
#: Where stage="build" leaves what stage="gpu" needs.
STATE_FILE = "stages.json"
STAGES = ("all", "build", "gpu")
#: Seconds stage_seconds allows the GPU stages for finding their GPU (a driver's start).
GPU_START_S = 60.0


class StageError(RuntimeError):
    """stage="gpu" cannot go on: no state from a build stage, or state that does not match
    (another kit version, another source, a build for another GPU).  Not the student's fault."""


@dataclass
class LabRun:
    """Everything one grading of one lab saw; stages that did not run are None.  seconds: wall
    seconds per stage (build, static, gpu_wait: in line for the GPU, with a pool the check program's CUDA
    start made there; cases, bench) and "total"; resources: per stage,
    {"cpu_s", "peak_rss_mib"} of its programs, and "grader": the grading process's own peak; gpu:
    the GPU a pool handed out."""

    spec: labspec.LabSpec
    impl: str
    build_dir: Path
    source: Path
    started_at: str
    build: build.BuildResult | None = None
    static: static.StaticResult | None = None
    device: dict | None = None       # the GPU the GPU stages ran on, as the check program found it
    check: checkrun.CheckRun | None = None
    bench: bench.BenchRun | None = None
    score: score.Score | None = None
    seed: int | None = None
    not_measured: str | None = None
    notes: list[str] = field(default_factory=list)
    sandbox: dict[str, str] = field(default_factory=dict)    # sandbox.Sandbox.layers of the runs
    seconds: dict[str, float] = field(default_factory=dict)
    resources: dict[str, dict[str, float]] = field(default_factory=dict)
    gpu: gpus.Gpu | None = None
    launches: list[StaticCheck] = field(default_factory=list)   # the launch audit's checks (launches.py)
    final: bool = True           # False after stage="build" when the GPU stages remain

    @property
    def device_name(self) -> str | None:
        """The model of the GPU the GPU stages ran on (check's `device:` line, else the bench's)."""
        return (self.device or {}).get("name") or (self.device or {}).get("device")

    @contextmanager
    def timed(self, stage: str):
        """Adds the wall seconds of the `with` block to seconds[stage], and what its programs used
        to resources[stage] (CPU seconds summed, peak resident set the largest)."""
        start = time.monotonic()
        try:
            with process.metered() as usage:
                yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.monotonic() - start
            if usage.runs:
                had = self.resources.get(stage, {})
                self.resources[stage] = {
                    "cpu_s": round(had.get("cpu_s", 0.0) + usage.cpu_s, 3),
                    "peak_rss_mib": round(max(had.get("peak_rss_mib", 0.0), usage.peak_rss_kib / 1024), 1)}


def resolve_lab_dir(arg: str | Path, kit_root: Path = KIT_ROOT) -> Path:
    """LABDIR as given, or KIT/labs/<arg> when arg is a bare lab name like 01-naive-5pt."""
    path = Path(arg)
    if not (path / "lab.json").is_file() and (Path(kit_root) / "labs" / str(arg) / "lab.json").is_file():
        path = Path(kit_root) / "labs" / str(arg)
    return path


def impl_tag(impl: str) -> str:
    """starter, reference, or dir-<the directory's absolute path, slashes as underscores> (lab.mk's
    IMPL_TAG).  A path make cannot take (build.make_path_problem), or a tag over TAG_BYTES, has each
    unsafe character as "_", is cut and ends in 12 hex digits of its sha256."""
    if impl in ("starter", "reference"):
        return impl
    path = str(Path(impl).resolve())
    tag = "dir-" + path.lstrip(os.sep).replace(os.sep, "_")
    if build.make_path_problem(Path(os.sep) / tag) is None and len(tag.encode("utf-8", "replace")) <= TAG_BYTES:
        return tag
    plain = "".join(c if c.isascii() and build.make_path_problem(Path(os.sep) / c) is None else "_" for c in tag)
    return f"{plain[:TAG_BYTES - 13]}-{hashlib.sha256(path.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}"


def stage_seconds(spec: labspec.LabSpec, stage: str = "all") -> float:
    """Seconds the stages of one grading of `spec` may take at most, each stage at its own
    limit: "build" (the build; the static checks are bounded by it), "gpu" (finding the GPU,
    listing and running the cases, the bench), "all" (both, in that order)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    build_s = build.DEFAULT_TIMEOUT_S
    gpu_s = GPU_START_S + checkrun.LIST_TIMEOUT_S + spec.check.suite_timeout_s + spec.bench.timeout_s
    return {"build": build_s, "gpu": gpu_s, "all": build_s + gpu_s}[stage]


def stray_sources(lab_dir: Path, graded: Path) -> list[str]:
    """A note for each CUDA file in the lab's folder (which ships none) that is not the file graded:
    work saved where `make check` runs would otherwise be ignored without a word."""
    notes = []
    for path in sorted(Path(lab_dir).glob("*.cu")):
        if path.resolve() == Path(graded).resolve():
            continue
        notes.append(f"{display_path(path)} is not graded: make check grades "
                     f"{display_path(graded)}; move your work there (or grade this folder's "
                     f"kernel.cu with make check IMPL=.)")
    return notes


def default_build_dir(lab: str, impl: str, kit_root: Path = KIT_ROOT) -> Path:
    """KIT/build/<lab>/<impl-tag>."""
    return Path(kit_root) / "build" / lab / impl_tag(impl)


_GENCODE = re.compile(r"code=(sm|compute)_(\d+)")


def built_architectures(build_dir: Path) -> tuple[set[int], set[int]]:
    """(SASS architectures, PTX architectures) the build compiled for, e.g. ({90}, {90}),
    read from BUILD_DIR/flags.stamp (lab.mk writes the nvcc flags there)."""
    try:
        text = (Path(build_dir) / "flags.stamp").read_text()
    except OSError:
        return set(), set()
    sass = {int(n) for kind, n in _GENCODE.findall(text) if kind == "sm"}
    ptx = {int(n) for kind, n in _GENCODE.findall(text) if kind == "compute"}
    return sass, ptx


def runs_on(build_dir: Path, compute_cap: str) -> str | None:
    """Why the build cannot run on a GPU of compute capability compute_cap ("9.0"), or None
    when it can: machine code that loads on it (gpus.elf_runs_on), or PTX of an earlier one."""
    if (cc := gpus.arch(compute_cap)) is None:
        return None                       # unknown: let the run itself tell
    sass, ptx = built_architectures(build_dir)
    if not sass and not ptx or any(gpus.elf_runs_on(a, cc) for a in sass) or any(p <= cc for p in ptx):
        return None
    built = ", ".join(f"sm_{a}" for a in sorted(sass)) or "nothing"
    return (f"this build is for {built}, not for this GPU (sm_{cc}): build again for it "
            f"(grade.py ... --arch {cc})")


def _save_state(run: LabRun, arch: str | None) -> None:
    state = {"kit_version": __version__, "lab": run.spec.lab, "impl": run.impl, "source": str(run.source),
             "source_sha256": sha256_of(run.source), "arch": arch, "started_at": run.started_at,
             "build": dataclasses.asdict(run.build),
             "static": [dataclasses.asdict(c) for c in run.static.checks] if run.static else None,
             "seconds": run.seconds, "resources": run.resources, "notes": run.notes}
    (Path(run.build_dir) / STATE_FILE).write_text(json.dumps(state, indent=2, default=str) + "\n")


def _load_state(run: LabRun) -> None:
    path = Path(run.build_dir) / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except OSError:
        raise StageError(f"no {STATE_FILE} in {run.build_dir}: run the build stage first") from None
    except json.JSONDecodeError as err:
        raise StageError(f"{path} is not JSON ({err.msg}): run the build stage again") from None
    if state.get("kit_version") != __version__:
        raise StageError(f"{path} was written by kit version {state.get('kit_version')}, this is "
                         f"{__version__}: run the build stage again")
    if state.get("source_sha256") != sha256_of(run.source):
        raise StageError(f"{run.source} changed since its build stage: run the build stage again")
    b = dict(state["build"])
    b["kernels"] = [build.KernelResources(**k) for k in b.get("kernels", [])]
    b["build_dir"] = Path(b["build_dir"])
    run.build = build.BuildResult(**b)
    if state.get("static") is not None:
        run.static = static.StaticResult([static.StaticCheck(**c) for c in state["static"]])
    run.started_at = state.get("started_at", run.started_at)
    run.seconds.update(state.get("seconds", {}))
    run.resources.update(state.get("resources", {}))
    run.notes += state.get("notes", [])


def grade_lab(lab_dir: str | Path, impl: str = "starter", build_dir: str | Path | None = None,
              seed: int | None = None, arch: str | None = None, skip_bench: bool = False,
              gpu_pool: locks.GpuPool | None = None, stage: str = "all",
              build_timeout_s: float = build.DEFAULT_TIMEOUT_S,
              progress: Callable[[str], None] | None = None,
              defines: dict[str, int | str] | None = None) -> LabRun:
    """Grade one lab.  impl: as build.impl_source's; seed: replay this input seed (None: check
    draws one); gpu_pool: hands this grading one GPU for its GPU stages (None: the GPUs CUDA shows);
    stage: "all", "build" or "gpu"; progress: called with a line as each stage starts; defines:
    build.make_command's.  Raises labspec.LabSpecError for a wrong lab.json and StageError when
    stage="gpu" finds no matching build; whatever the student's code does ends in the LabRun."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    start = time.monotonic()
    say = progress or (lambda line: None)
    lab_dir = resolve_lab_dir(lab_dir)
    spec = labspec.load(Path(lab_dir) / "lab.json")
    build_dir = Path(build_dir) if build_dir else default_build_dir(spec.lab, impl)
    run = LabRun(spec, impl, build_dir, build.impl_source(spec.lab, impl),
                 datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), seed=seed)
    if stage == "gpu":
        _load_state(run)
    else:
        run.notes += stray_sources(spec.lab_dir, run.source)
        for note in run.notes:
            say(f"note: {note}")
        say(f"building {display_path(run.source)} in {display_path(build_dir)} ...")
        (build_dir / STATE_FILE).unlink(missing_ok=True)
        with run.timed("build"):
            run.build = build.build(spec.lab_dir, impl, build_dir, arch, build_timeout_s, defines)
        if run.build.ok:
            with run.timed("static"):
                try:
                    run.static = static.run_static(spec, run.source, build_dir)
                except sass.SassError as err:              # no disassembler: the machine, not the student
                    _machine_fault(run, err)
    if not score.may_run(run.build, run.static)[0]:
        run.score = score.score_lab(spec, run.build, run.static)
    elif stage == "build":
        _save_state(run, arch)
        run.final = False
        run.score = score.score_lab(spec, run.build, run.static, not_measured="pending: the GPU stages "
                                    "have not run yet")
        run.score.verdict = "pending"
    else:
        _gpu_stages(run, seed, skip_bench, gpu_pool, say)
    run.seconds["total"] = run.seconds.get("total", 0.0) + time.monotonic() - start
    # ru_maxrss: KiB on Linux; the grading process's own peak, which a batch task holds beside its programs
    run.resources["grader"] = {"peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    return run


def _machine_fault(run: LabRun, err: Exception) -> None:
    """The kit's tools failed on this machine (sass.SassError: no cuobjdump, say): kit_error, no grade."""
    run.build.outcome = "kit_error"
    run.build.message = f"kit error: {err}"


def _gpu_stages(run: LabRun, seed: int | None, skip_bench: bool, gpu_pool: locks.GpuPool | None,
                say: Callable[[str], None]) -> None:
    spec, build_dir = run.spec, run.build_dir
    with run.timed("gpu_wait"):
        # A GPU, or its place next in line: the check program makes its CUDA start there and runs its cases
        # once slot.take() returned (checkrun.run_check's take).
        slot = gpu_pool.reserve() if gpu_pool is not None else None
    gpu = slot.gpu if slot is not None else None
    try:
        run.gpu = gpu
        env = locks.GpuPool.env(gpu)
        if gpu is not None and (why := runs_on(build_dir, gpu.compute_cap)):
            run.not_measured = f"not run on GPU {gpu.index} ({gpu.name}): {why}"
            run.build.outcome = "kit_error"
            run.build.message = why
            run.score = score.score_lab(spec, run.build, run.static)
            return
        # One CUDA start for both: the check program times the kernel itself once every case passed.
        then_bench = spec.bench.timeout_s if not skip_bench and score.may_time_after_cases(run.static) else None
        with run.timed("cases"):
            # Said once the check program has found a GPU: without one, no case runs (the report says why).
            run.check = checkrun.run_check(build_dir, spec.check.suite_timeout_s, seed,
                                           spec.check.case_timeout_s, env=env,
                                           on_start=lambda n, device: say(
                                               f"running the correctness cases on {device.get('name', 'the GPU')} "
                                               f"(seed {n}) ..."),
                                           bench_timeout_s=then_bench,
                                           on_bench=lambda: say("every case passed; timing (bench) ..."),
                                           take=slot.take if slot is not None else None)
        if slot is not None:
            slot.take()
        # Before its go the run made its CUDA start, in line for the GPU: the wait's, not the cases'.
        before_go = run.check.phases.get("before_go", 0.0)
        run.seconds["gpu_wait"] += before_go
        run.seconds["cases"] = max(0.0, run.seconds["cases"] - before_go)
        if run.check.bench is not None:           # its seconds are the bench stage's
            run.seconds["bench"] = run.check.bench.seconds
            run.seconds["cases"] = max(0.0, run.seconds["cases"] - run.check.bench.seconds)
        run.seed = run.check.seed if run.check.seed is not None else seed
        run.sandbox = run.check.sandbox
        run.device = run.check.device
        run.notes += run.check.notes
        if run.check.status == "no_gpu":
            run.not_measured = f"no GPU: {run.check.no_gpu}"
            run.check = None
        else:
            if score.may_bench(run.static, run.check)[0]:
                if skip_bench:
                    run.not_measured = "skipped (--skip-bench)"
                elif run.check.bench is not None:
                    run.bench = run.check.bench
                    run.notes += run.bench.notes
                else:                             # the cases needed more than one process
                    say("timing (bench) ...")
                    with run.timed("bench"):
                        run.bench = bench.run_bench(build_dir, spec.bench.timeout_s, run.seed, env=env)
                    run.notes += run.bench.notes
                    if run.bench.data and not run.device:
                        run.device = {k: run.bench.data.get(k) for k in ("device", "cc", "sm_count")}
    finally:
        if slot is not None:
            slot.release()
    if run.bench is not None:
        # After the GPU is given back: the audit is judged on the machine code (cuobjdump, ptxas), CPU work
        # that would keep the next grading off an idle GPU.
        try:
            run.launches = launches.check_launches(spec, run.bench.data, build_dir, run.bench.program)
        except sass.SassError as err:
            _machine_fault(run, err)
    run.score = score.score_lab(spec, run.build, run.static, run.check, run.bench,
                                not_measured=run.not_measured, device_name=run.device_name, launches=run.launches)
