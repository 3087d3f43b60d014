"""`grade.py slurm`: a class graded by Slurm job arrays.

Two parts:

- without Slurm: fake sbatch, squeue, sinfo and scancel programs record what they are asked;
  the batch scripts that `grade.py slurm` wrote are then run by hand, task by task, as Slurm
  would (SLURM_ARRAY_TASK_ID set), with one task never started and one killed mid-grading.
  Fast, and runs everywhere.
- against a real Slurm (tests/slurm/minislurm.py: slurmctld, slurmd and munged from Debian's
  packages, on loopback ports, in a temporary folder): the job graph (CPU array, then GPU
  array, then merge), every GPU stage not_measured on a machine without a GPU, an array
  task cancelled with scancel mid-run reported by the merge and completed by a second run.
  Skipped, with the reason, only where Slurm's packages are not installed
  (tests/install-deps.sh installs them when it runs as root on Debian).
  STENCIL_SLURM_PREFIX=DIR runs Slurm unpacked there (tests/slurm/unpack-debs.sh) instead.
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import FAKE_LAB, GOOD_KERNEL, KIT_ROOT, recording_row, write_recording, write_script
from stencil_grader import cli
from stencil_grader.base.gpus import Gpu
from stencil_grader.classes import batch, outdir, plan, tasks
from stencil_grader.classes.submissions import sheet_cell

sys.path.insert(0, str(KIT_ROOT / "tests" / "slurm"))
import minislurm  # noqa: E402

SLOW = GOOD_KERNEL + "// HANG\n"          # its check hangs: the grading takes the stuck-run limit


def read_csv(path):
    with open(path, newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def report(out, student, lab=FAKE_LAB):
    return json.loads(outdir.report_path(Path(out), student, lab).read_text())


@pytest.fixture(autouse=True)
def task_tmpdir(monkeypatch):
    """TMPDIR of the tasks these tests start (and of Slurm's jobs, which inherit it): a folder of
    their own, removed afterwards with whatever a task killed mid-grading left in it.  Under /tmp
    and open to all (0711): the sandbox user must reach its own folder inside."""
    folder = Path(tempfile.mkdtemp(prefix="stencil-slurm-tasks-", dir="/tmp"))
    os.chmod(folder, 0o711)
    monkeypatch.setenv("TMPDIR", str(folder))
    yield folder
    # the grading process of a task killed by a test lives on to its own limit (a session of its
    # own, as under a node's Slurm without cgroups): gone before its folder is
    deadline = time.monotonic() + 120
    while _processes_naming(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def klass(fake_kit, monkeypatch):
    """The fake kit as the kit (grade.py slurm lists its labs), and four students: one whose GPU
    stages find no GPU, a compile error, a good one, and a slow one (to be killed)."""
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)
    subs = fake_kit.root / "submissions"
    fake_kit.submission("ann", GOOD_KERNEL + "// NO_GPU\n", nested=True)
    fake_kit.submission("bob", GOOD_KERNEL + "COMPILE_ERROR\n", nested=True)
    fake_kit.submission("cat", GOOD_KERNEL, nested=True)
    fake_kit.submission("dan", SLOW, nested=True)
    (subs / "__MACOSX").mkdir()
    return subs


def slurm(*args, capsys=None):
    """grade.py slurm ARGS in this process (the fake kit's labs); (status, stdout, stderr)."""
    status = cli.main(["slurm", *map(str, args)])
    captured = capsys.readouterr() if capsys else None
    return status, captured.out if captured else "", captured.err if captured else ""


# ---------------------------------------------------------------- without Slurm: fake commands

FAKE = {
    "sbatch": '''
import json, os, sys
if "--test-only" in sys.argv:             # sbatch --test-only: the script on stdin, nothing queued
    script = sys.stdin.read()
    if os.environ.get("FAKE_NO_CONTROLLER"):
        print("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
              file=sys.stderr)
        sys.exit(1)
    if os.environ.get("FAKE_TEST_ONLY_REFUSES", "\\0") in script:
        print("sbatch: error: Memory specification can not be satisfied", file=sys.stderr)
        sys.exit(1)
    print("sbatch: Job 999 to start at 2026-01-01T00:00:00 using 1 processors on nodes n1 in partition debug",
          file=sys.stderr)
    sys.exit(0)
log = os.environ["FAKE_SLURM_LOG"]
calls = json.load(open(log)) if os.path.exists(log) else []
calls.append(["sbatch"] + sys.argv[1:])
json.dump(calls, open(log, "w"))
if os.environ.get("FAKE_SBATCH_FAIL") == str(sum(c[0] == "sbatch" for c in calls)):
    print("sbatch: error: Batch job submission failed: Invalid account or account/partition combination "
          "specified", file=sys.stderr)
    sys.exit(1)
print(str(100 + sum(c[0] == "sbatch" for c in calls)) + ";cluster")
''',
    "scancel": '''
import json, os, sys
log = os.environ["FAKE_SLURM_LOG"]
calls = json.load(open(log)) if os.path.exists(log) else []
calls.append(["scancel"] + sys.argv[1:])
json.dump(calls, open(log, "w"))
''',
    "squeue": '''
import os, sys
queued = os.environ.get("FAKE_SQUEUE", "").split()
job = sys.argv[sys.argv.index("-j") + 1] if "-j" in sys.argv else None
print("\\n".join(j for j in queued if job is None or j == job))
''',
    "sinfo": '''
import os, sys
# sinfo -h -o "%P %G": a line per node group, the default partition marked "*"
if os.environ.get("FAKE_NO_CONTROLLER"):
    sys.exit("slurm_load_partitions: Unable to contact slurm controller (connect failure)")
print(os.environ.get("FAKE_SINFO", "debug* gpu:1\\ngpu gpu:a100:4(S:0-1)\\ndebug* gpu:1"))
''',
}


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """sbatch, scancel, squeue and sinfo that record their calls (calls())."""
    bindir = tmp_path / "fakeslurm"
    for name, code in FAKE.items():
        write_script(bindir / name, code)
    log = tmp_path / "slurm-calls.json"
    monkeypatch.setenv("FAKE_SLURM_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")

    class Calls:
        def __call__(self):
            return json.loads(log.read_text()) if log.exists() else []
    return Calls()


def run_script(run_dir, stage, index=None, job="101", wait=True, **popen):
    """Run a batch script of a run folder as Slurm would run one task of it."""
    env = dict(os.environ, SLURM_JOB_ID=job, SLURM_ARRAY_JOB_ID=job)
    if index is not None:
        env["SLURM_ARRAY_TASK_ID"] = str(index)
    else:
        env.pop("SLURM_ARRAY_TASK_ID", None)
    proc = subprocess.Popen(["bash", str(Path(run_dir) / f"{stage}.sbatch")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, **popen)
    if wait:
        out = proc.communicate(timeout=300)[0]
        return proc.returncode, out
    return proc


def wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def scripts_of(stdout: str) -> dict[str, str]:
    """The job scripts a --dry-run printed, by file name."""
    found, name = {}, None
    for line in stdout.splitlines():
        if line.startswith("---- "):
            name = Path(line[5:]).name if line[5:].endswith(".sbatch") else None
            continue
        if name:
            found[name] = found.get(name, "") + line + "\n"
    return found


def test_dry_run_prints_the_scripts_and_submits_nothing(klass, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")                    # not even sbatch is needed
    out = tmp_path / "out"
    status, stdout, _ = slurm(klass, "--out", out, "--arch", "90", "--partition", "gpu", "--account", "course",
                              "--time-per-lab", "300", "--per-task", "1", "--dry-run", capsys=capsys)
    assert status == 0
    assert "4 to grade, 0 already graded" in stdout
    assert "not checked: the partitions and --gres (sinfo is not on PATH here)" in stdout
    assert "not checked: build.sbatch, gpu.sbatch, merge.sbatch with sbatch --test-only (sbatch is not on PATH " \
           "here)" in stdout
    assert "never checked by sbatch --test-only: the scripts' own lines" in stdout
    script = scripts_of(stdout)
    assert set(script) == {"build.sbatch", "gpu.sbatch", "merge.sbatch"}
    assert "#SBATCH --array=0-3\n" in script["gpu.sbatch"] and "#SBATCH --gres=gpu:1" in script["gpu.sbatch"]
    assert "#SBATCH --partition=gpu" in script["gpu.sbatch"] and "#SBATCH --account=course" in stdout
    # CPU work on the cluster's default partition: no --partition=gpu for the builds and the merge
    assert "--partition" not in script["build.sbatch"] + script["merge.sbatch"]
    assert "--gres" not in script["build.sbatch"] + script["merge.sbatch"]
    # one lab of 300 s + 120 s of slack is below the floor: 10 minutes, as D-HH:MM:SS
    assert "#SBATCH --time=0-00:10:00" in script["gpu.sbatch"]
    for name, text in script.items():
        assert "#SBATCH --no-requeue" in text and "#SBATCH --mem=" in text and "#SBATCH --cpus-per-task=" in text
        assert f"#SBATCH --job-name=stencil-submissions-run-1-{name[:-7]}" in text
        assert "not measured" in text                            # no recording here: stated defaults
        assert 'PYTHON=$(command -v python3)' in text and 'exec "$PYTHON" ' in text
        assert "sys.exit(sys.version_info < (3, 11))" in text    # an older python3 fails in one line
        assert sys.executable not in text                        # the node's interpreter, not the login node's
    assert '--task "$SLURM_ARRAY_TASK_ID" --job "$SLURM_ARRAY_JOB_ID"' in script["gpu.sbatch"]
    assert '--job "$SLURM_JOB_ID"' in script["merge.sbatch"] and "--task" not in script["merge.sbatch"]
    lines = [line for line in stdout.splitlines() if "sbatch --parsable" in line]
    assert len(lines) == 3 and lines[0].startswith("BUILD_JOB=$(sbatch --parsable ")
    assert lines[1].startswith("GPU_JOB=$(sbatch --parsable --dependency=aftercorr:$BUILD_JOB ")
    assert lines[1].endswith("gpu.sbatch)")
    assert lines[2].startswith("sbatch --parsable --dependency=afterany:$GPU_JOB ")
    assert not out.exists()                                       # nothing written


def test_bad_input_exits_2_and_loses_nothing(klass, fake_kit, tmp_path, capsys, monkeypatch, fake_slurm):
    out = tmp_path / "out"
    # no sbatch on PATH
    monkeypatch.setenv("PATH", "/nonexistent")
    status, _, err = slurm(klass, "--out", out, "--arch", "90", capsys=capsys)
    assert status == 2 and "sbatch not found on PATH" in err and not out.exists()
    monkeypatch.undo()
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakeslurm'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_LOG", str(tmp_path / "slurm-calls.json"))
    # an unknown partition (sinfo lists debug and gpu)
    status, _, err = slurm(klass, "--out", out, "--arch", "90", "--partition", "gpux", capsys=capsys)
    assert status == 2 and "unknown partition 'gpux'" in err and "debug, gpu" in err
    # no --arch and no GPU here
    monkeypatch.setattr("stencil_grader.base.gpus.list_gpus", lambda: ([], "nvidia-smi not found (test)"))
    status, _, err = slurm(klass, "--out", out, capsys=capsys)
    assert status == 2 and "--arch is required here" in err
    # nothing to grade
    empty = tmp_path / "empty"
    (empty / "zed" / FAKE_LAB).mkdir(parents=True)
    status, _, err = slurm(empty, "--out", out, "--arch", "90", capsys=capsys)
    assert status == 2 and "nothing to grade" in err
    # --out is a file
    a_file = tmp_path / "grades.csv"
    a_file.write_text("keep")
    status, _, err = slurm(klass, "--out", a_file, "--arch", "90", capsys=capsys)
    assert status == 2 and "is a file" in err and a_file.read_text() == "keep"
    assert fake_slurm() == [] and not out.exists()               # nothing submitted, nothing written
    # an output folder holding another class's results
    other = tmp_path / "other"
    (other / "yann" / FAKE_LAB).mkdir(parents=True)
    (other / "yann" / FAKE_LAB / "kernel.cu").write_text(GOOD_KERNEL)
    assert slurm(other, "--out", out, "--arch", "90", capsys=capsys)[0] == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    status, _, err = slurm(klass, "--out", out, "--arch", "90", capsys=capsys)
    assert status == 2 and "holds the results of another class" in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_sbatch_refusing_a_job_cancels_the_ones_before(klass, tmp_path, capsys, monkeypatch, fake_slurm):
    monkeypatch.setenv("FAKE_SBATCH_FAIL", "2")
    status, _, err = slurm(klass, "--out", tmp_path / "out", "--arch", "90", capsys=capsys)
    assert status == 2
    assert "sbatch refused the gpu job: sbatch: error: Batch job submission failed: Invalid account" in err
    assert "(the jobs already submitted, 101, were cancelled)" in err
    assert fake_slurm()[-1] == ["scancel", "101"]
    assert list((tmp_path / "out" / "batch").iterdir()) == []          # the run folder is gone


def test_tasks_run_by_hand_one_never_started_one_killed_then_resumed(klass, tmp_path, capsys, fake_slurm):
    out = tmp_path / "out"
    status, stdout, _ = slurm(klass, "--out", out, "--arch", "90", "--per-task", "1", capsys=capsys)
    assert status == 0 and "submitted" in stdout
    calls = fake_slurm()
    assert [c[0] for c in calls] == ["sbatch"] * 3
    assert calls[1][1:4] == ["--parsable", "--dependency=aftercorr:101", "--kill-on-invalid-dep=yes"]
    assert calls[2][2] == "--dependency=afterany:102"
    run = batch.RunDir(out / "batch" / "run-1")
    assert run.data["jobs"] == {"build": "101", "gpu": "102", "merge": "103"}
    keys = [i.key for i in run.items]
    assert keys == [f"{s}/{FAKE_LAB}" for s in ("ann", "bob", "cat", "dan")]
    script = (run.path / "gpu.sbatch").read_text()
    assert "#SBATCH --gres=gpu:1" in script and "#SBATCH --array=0-3" in script
    assert f"--output={run.path}/logs/gpu-%A_%a.out" in script

    for i in range(4):                                           # the CPU array
        assert run_script(run.path, "build", i)[0] == 0
    assert report(out, "bob")["verdict"] == "compile_error"      # final at the build stage
    assert run.pending_path(0).is_file()
    assert sorted(p.name for p in (run.path / "builds").iterdir()) == ["0", "2", "3"]      # no student's name
    assert run_script(run.path, "gpu", 0, job="102")[0] == 0     # ann: no GPU
    assert run_script(run.path, "gpu", 1, job="102")[0] == 0     # bob: settled already
    # cat's task never starts (cancelled while pending); dan's is killed mid-grading (SIGKILL: a node failure)
    proc = run_script(run.path, "gpu", 3, job="102", wait=False)
    wait_for(lambda: (outdir.read_json(run.status_path("gpu", 3)) or {}).get("current") == f"dan/{FAKE_LAB}",
             60, "dan's GPU task to start grading")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # a node that fails takes its processes with it: here, the task's grading process (a session
    # of its own) lives on until its limit; the merge comes after it, as after a dead node
    wait_for(lambda: not _processes_naming(run.path), 120, "the killed task's grading process to end")
    status, merged = run_script(run.path, "merge", job="103")
    assert status == 0, merged                          # it merged: what was not measured is in its files
    assert "NOTHING WAS MEASURED" in merged
    rows = read_csv(out / "class.csv")
    assert rows["ann"][FAKE_LAB] == "not_measured" and rows["bob"][FAKE_LAB] == "0.00"
    assert rows["cat"][FAKE_LAB] == "grader_error" and rows["dan"][FAKE_LAB] == "grader_error"
    cat = report(out, "cat")["messages"][0]
    assert "gpu task 2 of slurm job 102 never started" in cat and "gpu-102_2.out" in cat
    dan = report(out, "dan")["messages"][0]
    assert "gpu task 3 of slurm job 102 on " in dan and f"ended while grading dan/{FAKE_LAB}" in dan
    assert "a time limit, preemption, a node failure or a cancel" in dan
    assert not outdir.gradescope_path(out, FAKE_LAB, "cat").exists() and outdir.gradescope_path(out, FAKE_LAB, "bob").exists()
    assert "skipped __MACOSX" in (out / "summary.txt").read_text()
    assert not (run.path / "builds").exists() and not (run.path / "pending").exists()

    # the same command again: only what has no final grade (cat, dan; ann was not measured)
    bob_mtime = outdir.report_path(out, "bob", FAKE_LAB).stat().st_mtime_ns
    status, stdout, _ = slurm(klass, "--out", out, "--arch", "90", "--per-task", "1", capsys=capsys)
    assert status == 0 and "3 to grade, 1 already graded" in stdout
    run2 = batch.RunDir(out / "batch" / "run-2")
    assert [i.student for i in run2.items] == ["ann", "cat", "dan"]
    for i in range(3):
        run_script(run2.path, "build", i, job="104")
    # SIGTERM this time (a time limit): the task says so before it ends
    proc = run_script(run2.path, "gpu", 2, job="105", wait=False)
    wait_for(lambda: (outdir.read_json(run2.status_path("gpu", 2)) or {}).get("current") == f"dan/{FAKE_LAB}",
             60, "dan's GPU task to start grading")
    os.kill(proc.pid, signal.SIGTERM)             # the script exec'd the task: this is its process
    proc.wait(timeout=30)
    if _alive_group(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)       # what Slurm does KillWait seconds later
    state = outdir.read_json(run2.status_path("gpu", 2))
    assert state["state"] == "terminated" and "SIGTERM" in state["message"], state
    for i in (0, 1):
        run_script(run2.path, "gpu", i, job="105")
    run_script(run2.path, "merge", job="106")
    assert "ended by SIGTERM" in report(out, "dan")["messages"][0]
    assert read_csv(out / "class.csv")["cat"][FAKE_LAB] == "100.00"
    assert outdir.report_path(out, "bob", FAKE_LAB).stat().st_mtime_ns == bob_mtime
    # a third time: dan only (and ann); --student regrades one student whatever is there
    status, stdout, _ = slurm(klass, "--out", out, "--arch", "90", "--per-task", "1", "--student", "cat",
                              capsys=capsys)
    assert status == 0 and "1 to grade, 0 already graded" in stdout


def _processes_naming(path: Path) -> list[int]:
    """Processes whose command line names path (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(path).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _alive_group(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


def test_a_gpu_task_whose_gpu_fails_its_probe_grades_nothing(klass, tmp_path, capsys, monkeypatch, fake_slurm):
    """The node lists a GPU, and the one Slurm gave the task cannot be used: the task ends before any
    lab is sent to it, and the merge says so for each of its labs."""
    out = tmp_path / "out"
    assert slurm(klass, "--out", out, "--arch", "90", "--student", "cat", capsys=capsys)[0] == 0
    run = batch.RunDir(out / "batch" / "run-1")
    assert tasks.run_task(run.path, "build", 0, say=lambda line: None) == 0
    monkeypatch.setattr(tasks.gpulist, "list_gpus", lambda: ([Gpu(0, "GPU-0", "Fake GPU 80GB", "9.0")], None))
    monkeypatch.setattr(tasks.gpupool, "ContextHold", lambda: SimpleNamespace(close=lambda: None, result=(
        tasks.gpupool.ProbeResult("failed", "cuCtxSynchronize: CUDA_ERROR_ECC_UNCORRECTABLE"))))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert tasks.run_task(run.path, "gpu", 0, say=lambda line: None) == tasks.EXIT_GPU_FAILED
    assert outdir.read_json(run.status_path("gpu", 0))["state"] == "failed"
    result = tasks.merge(run.path, say=lambda line: None)
    assert result.exit_status == 1
    message = report(out, "cat")["messages"][0]
    assert "gpu task 0" in message and "(CUDA_VISIBLE_DEVICES=0)" in message
    assert "failed its probe: cuCtxSynchronize: CUDA_ERROR_ECC_UNCORRECTABLE" in message


def test_hostile_names_grade_as_plain_ones_through_the_batch_tasks(fake_kit, tmp_path, capsys, monkeypatch,
                                                                  fake_slurm):
    """No student's name reaches a path of the run folder, make or a batch script; each
    grades as the same kernel under a plain name.  An --out make cannot take is refused."""
    monkeypatch.setattr(plan, "KIT_ROOT", fake_kit.root)
    subs = tmp_path / "subs"
    names = ["plain", "o'brien \"$(touch PWNED)\" `touch PWNED`; x", "gradescope", "-rf"]
    for name in names:
        (subs / name / FAKE_LAB).mkdir(parents=True)
        (subs / name / FAKE_LAB / "kernel.cu").write_text(GOOD_KERNEL)
    status, _, err = slurm(subs, "--out", tmp_path / "o u t", "--arch", "90", capsys=capsys)
    assert status == 2 and "holds a space, which make cannot take" in err
    out = tmp_path / "out"
    assert slurm(subs, "--out", out, "--arch", "90", "--per-task", "1", capsys=capsys)[0] == 0
    run = batch.RunDir(out / "batch" / "run-1")
    for stage in ("build", "gpu"):
        for i in range(run.data["tasks"]):
            assert run_script(run.path, stage, i, job="101")[0] == 0
    assert run_script(run.path, "merge", job="103")[0] == 0
    plain = report(out, "plain")
    for name in names:
        data = report(out, name)
        assert (data["verdict"], data["points"], data["static"]) == (plain["verdict"], plain["points"], plain["static"])
    assert sorted(read_csv(out / "class.csv")) == sorted(map(sheet_cell, names))   # "-rf" as text
    assert not list(tmp_path.rglob("PWNED")) and not list(fake_kit.root.rglob("PWNED"))
    for script in ("build", "gpu", "merge"):
        assert "brien" not in (run.path / f"{script}.sbatch").read_text()


def test_a_second_submission_while_the_first_is_queued_is_refused(klass, tmp_path, capsys, monkeypatch,
                                                                  fake_slurm):
    out = tmp_path / "out"
    assert slurm(klass, "--out", out, "--arch", "90", capsys=capsys)[0] == 0
    monkeypatch.setenv("FAKE_SQUEUE", "102 103")
    status, _, err = slurm(klass, "--out", out, "--arch", "90", capsys=capsys)
    assert status == 2 and "run-1 of" in err and "still has jobs queued or running (102, 103)" in err
    assert not (out / "batch" / "run-2").exists()


def test_the_dry_run_checks_partitions_gres_and_each_script(klass, tmp_path, capsys, monkeypatch, fake_slurm):
    """--dry-run refuses a partition that does not exist and a --gres no node of the GPU partition
    offers, and puts each script through sbatch --test-only."""
    out = tmp_path / "out"
    refused = lambda *args: slurm(klass, "--out", out, "--arch", "90", "--dry-run", *args, capsys=capsys)
    status, _, err = refused("--partition", "gpux")
    assert status == 2 and "unknown partition 'gpux'" in err and "debug, gpu" in err
    status, _, err = refused("--cpu-partition", "cpux")
    assert status == 2 and "unknown partition 'cpux'" in err
    status, _, err = refused("--partition", "gpu", "--gres", "gpu:h100:1")
    assert status == 2 and "no node of partition 'gpu' offers it (sinfo: gpu:a100:4(S:0-1))" in err
    monkeypatch.setenv("FAKE_SINFO", "debug* (null)\ngpu gpu:a100:4(S:0-1)")
    status, _, err = refused()                       # the default partition's nodes have no gres
    assert status == 2 and "--gres gpu:1: no node of partition 'debug' offers it" in err and "--gres none" in err
    status, stdout, _ = refused("--partition", "gpu", "--gres", "gpu:a100:2")
    assert status == 0 and "checked with sinfo: the partitions and --gres" in stdout
    assert "gpu.sbatch: sbatch --test-only accepts it (sbatch: Job 999 to start" in stdout
    monkeypatch.setenv("FAKE_TEST_ONLY_REFUSES", "#SBATCH --mem=16384M")
    status, _, err = refused("--partition", "gpu")
    assert status == 2 and "sbatch --test-only refuses gpu.sbatch: sbatch: error: Memory specification" in err
    (tmp_path / "check.json").write_text('{"record": "check", "rows": []}')
    for bad, why in ((("--gres", "gpu"), "give NAME[:TYPE]:COUNT"), (("--setup", tmp_path / "none"), "cannot read"),
                     (("--per-task", "0"), "--per-task must be at least 1"),
                     (("--recording", tmp_path / "check.json"), "is not a class-grading recording")):
        status, _, err = refused(*bad)
        assert status == 2 and why in err, err
    assert fake_slurm() == [] and not out.exists()


def test_the_dry_run_says_what_it_could_not_check_and_warns(klass, tmp_path, capsys, monkeypatch, fake_slurm):
    """sbatch and sinfo there, no controller reachable: every script is printed and each check says
    it was not made and why (exit 0); an untyped --gres on a partition of A100 and H100 nodes with
    --arch 90 warns, naming the node types; --per-task raised to fit --array-max is said."""
    out = tmp_path / "out"
    monkeypatch.setenv("FAKE_NO_CONTROLLER", "1")
    status, stdout, err = slurm(klass, "--out", out, "--arch", "90", "--dry-run", capsys=capsys)
    assert status == 0, err
    assert set(scripts_of(stdout)) == {"build.sbatch", "gpu.sbatch", "merge.sbatch"}
    assert "not checked: the partitions and --gres (sinfo failed: slurm_load_partitions: Unable to contact" in stdout
    for name in ("build", "gpu", "merge"):
        assert f"not checked: {name}.sbatch with sbatch --test-only (no Slurm controller answered: sbatch: " \
               "error: Batch job submission failed: Unable to contact slurm controller" in stdout
    monkeypatch.delenv("FAKE_NO_CONTROLLER")
    monkeypatch.setenv("FAKE_SINFO", "debug* (null)\ngpu gpu:a100:4(S:0-1)\ngpu gpu:h100:4(S:0-1)")
    status, stdout, _ = slurm(klass, "--out", out, "--arch", "90", "--partition", "gpu", "--dry-run",
                              "--per-task", "1", "--array-max", "2", capsys=capsys)
    assert status == 0
    assert "warning: --gres gpu:1 on partition 'gpu', whose nodes hold a100 (sm_80), h100 (sm_90): a task given " \
           "a100 cannot run the build for --arch 90; ask --gres gpu:h100:1, or build for every type " \
           "(--arch '80 90')" in stdout
    assert "--per-task 1 raised to 2: 4 grading(s) must fit in at most 2 task(s) per array" in stdout
    assert "#SBATCH --array=0-1\n" in scripts_of(stdout)["gpu.sbatch"]
    status, stdout, _ = slurm(klass, "--out", out, "--arch", "80 90", "--partition", "gpu", "--dry-run", capsys=capsys)
    assert status == 0 and "warning: --gres" not in stdout
    assert not out.exists() and fake_slurm() == []


def test_an_old_python3_on_the_node_fails_in_one_line(klass, tmp_path, capsys, monkeypatch):
    """The job scripts check python3's version before running the kit (a SyntaxError otherwise)."""
    monkeypatch.setenv("PATH", "/nonexistent")
    status, stdout, _ = slurm(klass, "--out", tmp_path / "out", "--arch", "90", "--dry-run", capsys=capsys)
    script = scripts_of(stdout)["build.sbatch"]
    old = tmp_path / "oldbin"
    write_script(old / "python3", "")
    (old / "python3").write_text("#!/bin/sh\n[ \"$1\" = -V ] && { echo 'Python 3.6.8'; exit 0; }\nexit 1\n")
    (tmp_path / "job.sh").write_text(script)
    done = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{old}:/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": "1"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("Python 3.6.8 at ")
    assert "the kit needs Python 3.11 or later; add a module load or a virtual environment" in done.stderr


def test_the_scripts_ask_for_what_the_recording_measured(klass, fake_kit, tmp_path, capsys, fake_slurm):
    """--time (D-HH:MM:SS) from the recorded median times a safety factor, with a floor; --mem and
    --cpus-per-task from the stages' peak memory and CPU use; the setup lines before the node's
    python3; %N; requeue policy; the CPU work on --cpu-partition; --gres none shares the GPUs."""
    from stencil_grader.classes import resources
    out = tmp_path / "out"
    setup = tmp_path / "setup.sh"
    setup.write_text("module load cuda/12.4\nsource /opt/venvs/stencil/bin/activate\n")
    recording = write_recording(tmp_path / "class.json", [recording_row(FAKE_LAB, stage, 40.0, 120.0, 3000.0)
                                                                for stage in ("build", "gpu")], grader=100.0)
    status, stdout, _ = slurm(klass, "--out", out, "--arch", "90", "--recording", recording, "--per-task", "2",
                              "--max-running", "5", "--setup", setup, "--requeue", "--cpu-partition", "gpu",
                              "--dry-run", capsys=capsys)
    assert status == 0
    script = scripts_of(stdout)
    gpu = script["gpu.sbatch"]
    # 2 gradings x 3 x 40 s + 120 s = 360 s: below the floor of 600 s
    assert "#SBATCH --time=0-00:10:00" in gpu and "#SBATCH --array=0-1%5" in gpu
    # 120 CPU-s in 40 s: 3 CPUs, so 3 reruns at once: (3 x 3000 MiB + 2 x 100 MiB) x 1.5 = 13800 MiB,
    # rounded up to 256 MiB: 13824 MiB
    assert "#SBATCH --mem=13824M" in gpu and "#SBATCH --cpus-per-task=3" in gpu and "#SBATCH --requeue" in gpu
    assert f"measured: {recording} (Fake GPU 80GB, 2026-01-01)" in gpu
    assert "#SBATCH --partition=gpu" in script["build.sbatch"] and "#SBATCH --partition=gpu" in script["merge.sbatch"]
    lines = gpu.splitlines()
    assert lines.index("module load cuda/12.4") < lines.index("source /opt/venvs/stencil/bin/activate") \
        < next(i for i, line in enumerate(lines) if line.startswith("PYTHON=$(command -v python3)"))
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < lines.index("module load cuda/12.4")
    # longer shards: the time follows the median, not the worst case
    status, stdout, _ = slurm(klass, "--out", out, "--arch", "90", "--recording", recording, "--per-task", "4",
                              "--gres", "none", "--dry-run", capsys=capsys)
    gpu = scripts_of(stdout)["gpu.sbatch"]
    assert "#SBATCH --time=0-00:10:00" in gpu and "--gres" not in gpu and "each under a lock" in gpu
    assert resources.task_request("gpu", [[plan.select_labs([FAKE_LAB], fake_kit.root)[0]] * 8],
                                  resources.load([recording])).seconds == 8 * 3 * 40 + 120
    # submitted with --gres none: the run says the tasks share the node's GPUs under locks
    assert slurm(klass, "--out", out, "--arch", "90", "--gres", "none", "--setup", setup, capsys=capsys)[0] == 0
    run = batch.RunDir(out / "batch" / "run-1")
    assert run.data["gpu_locks"] == "node" and (run.path / "setup.sh").read_text() == setup.read_text()
    assert run.data["requests"]["gpu"]["mem_mib"] == resources.NOT_MEASURED["gpu"]["mem_mib"]


def test_gpu_tasks_without_gres_share_the_nodes_gpus_under_locks(klass, tmp_path, capsys, monkeypatch, fake_slurm):
    """With --gres none, two tasks on one node never share one GPU: each grading of a "node" gpu
    task takes one of the node's probed GPUs under the lock files every task of the node shares
    (base/locks.py GpuPool)."""
    out = tmp_path / "out"
    assert slurm(klass, "--out", out, "--arch", "90", "--gres", "none", "--student", "cat", capsys=capsys)[0] == 0
    run = batch.RunDir(out / "batch" / "run-1")
    assert tasks.run_task(run.path, "build", 0, say=lambda line: None) == 0
    two = [Gpu(0, "GPU-a", "Fake GPU 80GB", "9.0"), Gpu(1, "GPU-b", "Fake GPU 80GB", "9.0")]
    monkeypatch.setattr(tasks.gpulist, "list_gpus", lambda: (two, None))
    real_set = tasks.gpupool.GpuSet
    monkeypatch.setattr(tasks.gpupool, "GpuSet", lambda chosen, say: real_set(
        chosen, probe_gpu=lambda gpu: tasks.gpupool.ProbeResult("ok", "", gpu.uuid, gpu.name, "9.0"), say=say))
    seen = []
    real = tasks.worker.grade
    monkeypatch.setattr(tasks.worker, "grade", lambda *a, **k: seen.append(k) or real(*a, **k))
    assert tasks.run_task(run.path, "gpu", 0, say=lambda line: None) == 0
    assert [(k["gpu_locks"], k["gpus"]) for k in seen] == [(tasks.NODE_LOCKS, "0,1")]


# ---------------------------------------------------------------- a real Slurm

def _slurm_prefix() -> Path | None:
    prefix = os.environ.get("STENCIL_SLURM_PREFIX")
    return Path(prefix) if prefix else None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A one-node Slurm of this machine's packages (or STENCIL_SLURM_PREFIX's), stopped at the end."""
    if os.geteuid() != 0:
        pytest.skip("the real Slurm test runs as root (slurmd starts jobs as their user; the kit's CI is root)")
    found = minislurm.find_programs(_slurm_prefix())
    if isinstance(found, str):
        pytest.skip(f"no Slurm to test against: {found}; tests/install-deps.sh installs them when it runs as "
                    "root on Debian (or set STENCIL_SLURM_PREFIX to a folder of tests/slurm/unpack-debs.sh)")
    # A short path: a Unix socket's path (MUNGE's) must stay under 108 bytes.
    work = Path(tempfile.mkdtemp(prefix="stencil-slurm-"))
    # The node declares one GPU (gres, File=/dev/null: there is none), so that `--gres=gpu:1` is
    # honoured as on a GPU cluster and Slurm sets CUDA_VISIBLE_DEVICES for each GPU task.
    c = minislurm.MiniSlurm(work, _slurm_prefix(), gpus=["/dev/null"])
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


def _scontrol_job(cluster, job):
    return cluster.run("scontrol", "show", "job", "-o", str(job)).stdout


def test_real_slurm_job_graph_no_gpu_cancel_and_resume(cluster, fake_kit, klass, tmp_path, monkeypatch, capsys):
    # dan's check hangs until the grader calls the run stuck (2 case timeouts + 10 s)
    fake_kit.set_lab_json(check__case_timeout_s=4, check__suite_timeout_s=60)
    real = shutil.which("nvcc") or (Path("/usr/local/cuda/bin/nvcc") if Path("/usr/local/cuda/bin/nvcc").exists()
                                    else None)
    real_lab = "01-naive-5pt"
    if real:                    # one real lab too: its GPU stages, without a GPU, are not_measured
        (fake_kit.root / "labs" / real_lab).symlink_to(KIT_ROOT / "labs" / real_lab)
        target = klass / "eve" / real_lab
        target.mkdir(parents=True)
        shutil.copyfile(KIT_ROOT / "reference" / real_lab / "kernel.cu", target / "kernel.cu")
    for key, value in cluster.env().items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "out"
    # what the labs' stages use, as a GPU machine recorded it: requests this node can meet
    recording = write_recording(tmp_path / "class.json", [recording_row(lab, stage) for lab in (FAKE_LAB, real_lab)
                                                                for stage in ("build", "gpu")])
    options = ("--out", out, "--arch", "90", "--partition", minislurm.PARTITION, "--per-task", "1",
               "--max-running", "3", "--recording", recording)
    status, stdout, err = slurm(klass, *options, "--dry-run", capsys=capsys)
    assert status == 0, err
    assert "checked with sinfo: the partitions and --gres" in stdout
    for name in ("build.sbatch", "gpu.sbatch", "merge.sbatch"):
        assert f"{name}: sbatch --test-only accepts it" in stdout, stdout
    assert not out.exists()
    status, stdout, err = slurm(klass, *options, capsys=capsys)
    assert status == 0, err
    run = batch.RunDir(out / "batch" / "run-1")
    jobs = run.data["jobs"]
    # every script as written, handed to sbatch --test-only: accepted
    for name in ("build.sbatch", "gpu.sbatch", "merge.sbatch"):
        done = cluster.run("sbatch", "--test-only", str(run.path / name), check=False)
        assert done.returncode == 0, (name, done.stderr)
    # the job graph: GPU task i waits for build task i, the merge for the whole GPU array
    gpu_job, merge_job = _scontrol_job(cluster, jobs["gpu"]), _scontrol_job(cluster, jobs["merge"])
    assert f"aftercorr:{jobs['build']}" in gpu_job and f"afterany:{jobs['gpu']}" in merge_job
    assert "%3" in _scontrol_job(cluster, jobs["build"]).split("ArrayTaskId=")[1].split()[0] \
        or "ArrayTaskThrottle=3" in _scontrol_job(cluster, jobs["build"])
    assert "JobName=stencil-submissions-run-1-gpu" in gpu_job and "Requeue=0" in gpu_job
    assert "ArrayTaskId=" in gpu_job and "gpu" in gpu_job.split("TresPerNode=")[-1][:20]
    # cancel dan's GPU task while it grades dan
    dan = next(i for i, item in enumerate(run.items) if item.student == "dan")
    task = dan // run.data["shard_size"]
    wait_for(lambda: (outdir.read_json(run.status_path("gpu", task)) or {}).get("current") == f"dan/{FAKE_LAB}",
             180, "dan's GPU task to start grading")
    cluster.run("scancel", f"{jobs['gpu']}_{task}")
    cluster.wait_idle(300)
    log = (run.path / f"logs/merge-{jobs['merge']}_0.out").read_text()
    # the merge merged: COMPLETED with exit 0, though labs were not measured (that is in its files)
    assert "JobState=COMPLETED" in _scontrol_job(cluster, jobs["merge"]) and "ExitCode=0:0" in \
        _scontrol_job(cluster, jobs["merge"])
    rows = read_csv(out / "class.csv")
    assert rows["ann"][FAKE_LAB] == "not_measured" and rows["bob"][FAKE_LAB] == "0.00"
    assert rows["cat"][FAKE_LAB] == "100.00" and rows["dan"][FAKE_LAB] == "grader_error", log
    message = report(out, "dan")["messages"][0]
    assert f"gpu task {task} of slurm job {jobs['gpu']}" in message
    assert "SIGTERM" in message or "ended while grading" in message
    assert "NOTHING WAS MEASURED" in log and "grader_error" in log
    if real:
        assert rows["eve"][real_lab] == "not_measured"
        assert report(out, "eve", real_lab)["gpu"]["status"] == "no_gpu"
        assert not (out / "gradescope" / real_lab / "eve").exists()
    # the stages ran in order: GPU task i after build task i, every GPU task before the merge
    status_of = {p.stem: outdir.read_json(p) for p in (run.path / "tasks").glob("*.json")}
    assert all(f"build-{i}" in status_of and f"gpu-{i}" in status_of for i in range(run.data["tasks"]))
    for i in range(run.data["tasks"]):
        assert status_of[f"build-{i}"]["ended_epoch"] <= status_of[f"gpu-{i}"]["started_epoch"]
    gpus = [s for k, s in status_of.items() if k.startswith("gpu-")]
    assert max(s.get("ended_epoch", 0) for s in gpus) <= status_of["merge-0"]["started_epoch"]
    # Slurm gave every GPU task the node's declared GPU
    assert {s["cuda_visible_devices"] for s in gpus} == {"0"}
    cat_mtime = outdir.report_path(out, "cat", FAKE_LAB).stat().st_mtime_ns

    # the same command again: dan (and the not measured ones) only
    status, stdout, err = slurm(klass, *options, capsys=capsys)
    assert status == 0, err
    run2 = batch.RunDir(out / "batch" / "run-2")
    assert sorted(i.student for i in run2.items) == sorted(["ann", "dan"] + (["eve"] if real else []))
    cluster.wait_idle(300)
    assert report(out, "dan")["verdict"] == "timeout"
    assert read_csv(out / "class.csv")["dan"][FAKE_LAB] == "20.00"
    assert outdir.report_path(out, "cat", FAKE_LAB).stat().st_mtime_ns == cat_mtime
