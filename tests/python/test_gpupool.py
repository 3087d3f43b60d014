"""Every GPU of one host, tested without GPUs: fake GPU lists, a fake nvidia-smi, fake probes.

The class grading hands each grading's GPU stages one GPU of the pool (base/locks.py
GpuPool, one lock file per GPU) and probes every GPU first (classes/gpupool.py).  These
tests check that no two gradings hold one GPU at once (with several GPUs, and with
several workers sharing one GPU), that every lab is graded once, that a GPU failing its
probe is taken out of the pool with a message and gets no grading, and that the GPU of
each grading is recorded.  The probe program itself runs against a fake libcuda.so.1 (a
few C functions) when a C compiler is there.
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import FAKE_LAB, GOOD_KERNEL, build_fake_libcuda, write_script
from stencil_grader.base import gpuprobe
from stencil_grader.base.gpus import Gpu
from stencil_grader.classes import backend, gpupool, outdir, worker
from stencil_grader.classes.submissions import ClassError

H100 = "Fake GPU 80GB"


def fake_gpus(n, name=H100, names=None):
    return [Gpu(i, f"GPU-{i:08x}-fake-0000-0000-000000000000", (names or [name] * n)[i], "9.0") for i in range(n)]


def prober(bad=()):
    """A probe that fails the GPUs whose index is in `bad` (and counts its calls)."""
    calls = []

    def probe(gpu):
        calls.append(gpu.index)
        if gpu.index in bad:
            return gpupool.ProbeResult("failed", "cuCtxSynchronize: CUDA_ERROR_ECC_UNCORRECTABLE (fake)")
        return gpupool.ProbeResult("ok", uuid=gpu.uuid, name=gpu.name, cc=gpu.compute_cap)
    probe.calls = calls
    return probe


# ---------------------------------------------------------------- the GPU set

def test_a_gpu_failing_its_probe_is_taken_out_with_a_message():
    said = []
    pool = gpupool.GpuSet(fake_gpus(3), prober(bad={1}), say=said.append)
    pool.check()
    assert [g.index for g in pool.usable] == [0, 2] and pool.indices() == "0,2"
    assert len(said) == 1 and "GPU 1 (Fake GPU 80GB" in said[0] and "taken out of the pool" in said[0]
    assert "CUDA_ERROR_ECC_UNCORRECTABLE" in said[0] and pool.notes == said


def test_a_suspect_gpu_is_probed_again_and_taken_out_only_when_it_fails():
    probe = prober()
    pool = gpupool.GpuSet(fake_gpus(2), probe, say=lambda line: None)
    pool.check()
    assert pool.suspect(0) is False and pool.indices() == "0,1"       # a student's crash: the GPU is fine
    probe_bad = prober(bad={0})
    pool._probe = probe_bad
    assert pool.suspect(0) is True and pool.indices() == "1"
    assert pool.suspect(0) is True and probe_bad.calls == [0]         # already out: not probed again
    pool._probe = prober(bad={1})
    assert pool.suspect(1) is True and pool.indices() == ""


class FakeHold:
    def __init__(self, gpu, result):
        self.gpu, self.result, self.closed = gpu, result, False

    def close(self):
        self.closed = True


def test_a_context_is_held_on_each_usable_gpu_until_it_is_taken_out_or_the_class_ends():
    holds, first = [], prober(bad={1})
    pool = gpupool.GpuSet(fake_gpus(3), prober(), say=lambda line: None,
                          hold_gpu=lambda gpu: holds.append(FakeHold(gpu, first(gpu))) or holds[-1])
    pool.check()
    assert pool.indices() == "0,2" and sorted(first.calls) == [0, 1, 2]
    assert [h.gpu.index for h in holds if h.closed] == [1]          # the holder of a failed GPU ended at once
    holds = [h for h in holds if not h.closed]
    pool._probe = prober(bad={2})
    assert pool.suspect(2) is True
    assert [h.gpu.index for h in holds if h.closed] == [2]
    pool.close()
    assert all(h.closed for h in holds)


def test_no_gpu_machine_needs_no_probe():
    pool = gpupool.GpuSet([], prober())
    pool.check()
    assert pool.indices() is None


# ---------------------------------------------------------------- the lock: processes sharing a pool

HOLDER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from stencil_grader.base import locks
from stencil_grader.base.gpus import Gpu
gpus = [Gpu(**g) for g in json.loads(sys.argv[3])]
slot = locks.GpuPool(sys.argv[2], gpus).reserve()
slot.take()
start = time.time()
time.sleep(0.15)
print(json.dumps({"uuid": slot.gpu.uuid if slot.gpu else None, "start": start, "end": time.time()}))
slot.release()
'''


def overlaps(intervals):
    """Pairs of intervals (start, end, ...) that overlap in time."""
    found = []
    ordered = sorted(intervals)
    for a, b in zip(ordered, ordered[1:]):
        if b[0] < a[1]:
            found.append((a, b))
    return found


@pytest.mark.parametrize("n_gpus,workers", [(1, 4), (3, 9)])
def test_no_two_processes_hold_one_gpu_at_once(tmp_path, n_gpus, workers):
    gpus = fake_gpus(n_gpus)
    arg = json.dumps([g.as_dict() for g in gpus])
    grader = str(Path(backend.__file__).resolve().parents[2])
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, grader, str(tmp_path / "locks"), arg],
                              stdout=subprocess.PIPE, text=True) for _ in range(workers)]
    held = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    by_gpu = {}
    for h in held:
        by_gpu.setdefault(h["uuid"], []).append((h["start"], h["end"]))
    assert set(by_gpu) == {g.uuid for g in gpus}                     # every GPU used
    for uuid, intervals in by_gpu.items():
        assert overlaps(intervals) == [], f"two holders of {uuid} at once"
    if n_gpus > 1:                                                   # and the GPUs worked side by side
        everything = [iv for ivs in by_gpu.values() for iv in ivs]
        assert overlaps(everything)


def test_a_grading_next_in_line_gets_the_gpu_next_and_no_third_lines_up_behind_it(tmp_path):
    """reserve(): the GPU when it is free, else its place next in line (whose holder makes its CUDA start while
    the GPU is busy); only that holder waits for the GPU, and the place frees when it takes the GPU."""
    import threading
    from stencil_grader.base import locks
    gpus = fake_gpus(1)
    pool = lambda: locks.GpuPool(tmp_path / "locks", gpus)          # one per grading, as in the processes
    first = pool().reserve()
    assert first.held and first.gpu.uuid == gpus[0].uuid
    second = pool().reserve()
    assert not second.held and second.gpu.uuid == gpus[0].uuid
    third: list = []
    lining_up = threading.Thread(target=lambda: third.append(pool().reserve()))
    lining_up.start()
    lining_up.join(0.3)
    assert third == []                                              # the place next in line is taken
    taking = threading.Thread(target=second.take)
    taking.start()
    taking.join(0.3)
    assert taking.is_alive()                                        # the GPU is still the first grading's
    first.release()
    taking.join(10)
    lining_up.join(10)
    assert second.held and second.waited_s >= 0.3
    assert len(third) == 1 and not third[0].held                    # next in line behind the second now
    second.release()
    third[0].take()
    assert third[0].held
    third[0].release()
    again = pool().reserve()
    assert again.held                                               # everything was given back
    again.release()


def test_a_free_gpu_is_taken_rather_than_a_place_in_line(tmp_path):
    from stencil_grader.base import locks
    gpus = fake_gpus(2)
    busy = locks.GpuPool(tmp_path, gpus).reserve()
    other = locks.GpuPool(tmp_path, gpus).reserve()
    assert busy.held and other.held and {busy.gpu.uuid, other.gpu.uuid} == {g.uuid for g in gpus}
    waiting = [locks.GpuPool(tmp_path, gpus).reserve() for _ in gpus]
    assert not any(w.held for w in waiting) and {w.gpu.uuid for w in waiting} == {g.uuid for g in gpus}
    for slot in [busy, other] + waiting:
        slot.release()


# ---------------------------------------------------------------- a class on fake GPUs, end to end

LOGGER = '''
import os as _os, re as _re, sys as _sys, time as _time
if True:
    _start = _time.time()
    _time.sleep(0.3)
    with open("{log}", "a") as _f:
        _f.write("%s %f %f %s\\n" % (_os.environ.get("CUDA_VISIBLE_DEVICES", "-"), _start, _time.time(),
                                     _re.search(r"STUDENT=(\\w+)", SRC).group(1)))
'''


@pytest.fixture
def gpu_host(fake_kit, tmp_path, monkeypatch):
    """A host with fake GPUs: nvidia-smi lists them (FAKE_SMI), and the fake lab's check logs the
    GPU it was given (CUDA_VISIBLE_DEVICES) and when its cases ran (after the go), to a log anyone may write (the check runs
    as the sandbox user)."""
    logdir = Path(tempfile.mkdtemp(prefix="stencil-gpupool-test-", dir="/tmp"))
    os.chmod(logdir, 0o777)
    log = logdir / "check.log"
    log.touch()
    os.chmod(log, 0o666)
    check = fake_kit.fake / "check"
    before, after = check.read_text().split("# the cases start here\n")     # after the go, if any
    check.write_text(before + LOGGER.format(log=log) + after)
    bindir = tmp_path / "bin"
    smi_list = tmp_path / "gpus.csv"
    write_script(bindir / "nvidia-smi", f"print(open({str(smi_list)!r}).read(), end='')\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")

    class Host:
        def __init__(self):
            self.log, self.kit, self.subs = log, fake_kit, tmp_path / "subs"

        def gpus(self, listed):
            smi_list.write_text("".join(f"{g.index}, {g.uuid}, {g.compute_cap}, {g.name}\n" for g in listed))
            return listed

        def students(self, n, extra=""):
            for i in range(n):
                folder = self.subs / f"s{i:02d}" / FAKE_LAB
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "kernel.cu").write_text(GOOD_KERNEL + f"// STUDENT=s{i:02d}\n{extra}")

        def runs(self):
            rows = [line.split() for line in self.log.read_text().splitlines()]
            return [(float(start), float(end), gpu, student) for gpu, start, end, student in rows]
    yield Host()
    shutil.rmtree(logdir, ignore_errors=True)


def _grade(host, listed, jobs, probe=None, tmp=None):
    pool = gpupool.GpuSet(listed, probe or prober(), say=lambda line: None)
    return backend.grade_class(host.subs, tmp / "out", jobs=jobs, progress=lambda line: None,
                               kit_root=host.kit.root, gpu_set=pool)


def test_a_class_on_three_gpus_one_failing_its_probe(gpu_host, tmp_path):
    listed = gpu_host.gpus(fake_gpus(3))
    gpu_host.students(8)
    result = _grade(gpu_host, listed, jobs=4, probe=prober(bad={1}), tmp=tmp_path)
    assert [g.verdict for g in result.gradings] == ["pass"] * 8
    runs = gpu_host.runs()
    # every lab graded once, on a GPU of the pool, never the one that failed its probe
    assert sorted(r[3] for r in runs) == [f"s{i:02d}" for i in range(8)]
    assert {r[2] for r in runs} <= {listed[0].uuid, listed[2].uuid}
    assert len({r[2] for r in runs}) == 2                              # both good GPUs worked
    for uuid in {r[2] for r in runs}:
        assert overlaps([r for r in runs if r[2] == uuid]) == [], f"two gradings on {uuid} at once"
    assert any("GPU 1 (Fake GPU 80GB" in n and "taken out of the pool" in n for n in result.summary)
    # which GPU graded each lab: the report, and gradings.csv (index, UUID, name)
    rows = list(csv.DictReader(open(tmp_path / "out" / "gradings.csv")))
    assert len(rows) == 8
    for row in rows:
        report = json.loads(outdir.report_path(tmp_path / "out", row["student"], FAKE_LAB).read_text())
        assert report["gpu"]["assigned"]["uuid"] == row["gpu_uuid"]
        assert row["gpu_index"] in ("0", "2") and row["gpu_name"] == H100 and row["host"]
    assert result.alarm == []                                          # one model: no warning


def test_two_workers_sharing_gpu_0_take_turns(gpu_host, tmp_path):
    listed = gpu_host.gpus(fake_gpus(1))
    gpu_host.students(4)
    result = _grade(gpu_host, listed, jobs=3, tmp=tmp_path)
    assert [g.verdict for g in result.gradings] == ["pass"] * 4
    runs = gpu_host.runs()
    assert len(runs) == 4 and {r[2] for r in runs} == {listed[0].uuid}
    assert overlaps(runs) == []


def test_mixed_gpu_models_are_warned_about(gpu_host, tmp_path):
    listed = gpu_host.gpus(fake_gpus(2, names=[H100, "Fake GPU 40GB"]))
    gpu_host.students(4)
    result = _grade(gpu_host, listed, jobs=2, tmp=tmp_path)
    assert result.exit_status == 0
    warning = [a for a in result.alarm if "different models" in a]
    assert warning and H100 in warning[0] and "Fake GPU 40GB" in warning[0]


def test_a_gpu_that_breaks_mid_run_is_taken_out_and_its_lab_graded_again(gpu_host, tmp_path, monkeypatch):
    """A grading that finds its GPU unusable (no GPU through it) gets the GPU probed again; the
    GPU is taken out and the lab graded on another."""
    listed = gpu_host.gpus(fake_gpus(2))
    gpu_host.students(1)
    pool = gpupool.GpuSet(listed, prober(), say=lambda line: None)
    pool.check()
    real_grade = worker.grade
    calls = []

    def breaks_once(task, subs, limit, *a, **k):
        if k.get("stage") == "build":
            return real_grade(task, subs, limit, *a, **k)
        calls.append(k.get("gpus"))
        report, log = real_grade(task, subs, limit, *a, **k)
        if len(calls) == 1:                      # the first grading saw no GPU through GPU 0
            report["gpu"]["assigned"] = listed[0].as_dict()
            report["gpu"]["status"] = "no_gpu"
            report["verdict"] = "not_measured"
            pool._probe = prober(bad={0})        # and GPU 0 fails its probe from now on
        return report, log
    monkeypatch.setattr(worker, "grade", breaks_once)
    result = backend.grade_class(gpu_host.subs, tmp_path / "out", jobs=1, progress=lambda line: None,
                                 kit_root=gpu_host.kit.root, gpu_set=pool)
    assert calls == ["0,1", "1"]
    assert [g.verdict for g in result.gradings] == ["pass"]
    assert any("GPU 0" in n and "taken out" in n for n in result.summary)


def test_every_gpu_failing_refuses_the_class(gpu_host, tmp_path):
    listed = gpu_host.gpus(fake_gpus(2))
    gpu_host.students(1)
    with pytest.raises(ClassError, match="no usable GPU: GPU 0 .*GPU 1 "):
        _grade(gpu_host, listed, jobs=1, probe=prober(bad={0, 1}), tmp=tmp_path)
    assert not (tmp_path / "out").exists()


def test_gpus_option_picks_by_index_and_refuses_an_unknown_one(gpu_host, tmp_path, monkeypatch):
    listed = gpu_host.gpus(fake_gpus(3))
    gpu_host.students(2)
    monkeypatch.setattr(gpupool, "ContextHold", lambda uuid=None: FakeHold(
        None, gpupool.ProbeResult("ok", uuid=uuid, name=H100, cc="9.0")))
    result = backend.grade_class(gpu_host.subs, tmp_path / "out", jobs=2, gpus="0,2", progress=lambda line: None,
                                 kit_root=gpu_host.kit.root)
    assert [g.verdict for g in result.gradings] == ["pass"] * 2
    assert {r[2] for r in gpu_host.runs()} <= {listed[0].uuid, listed[2].uuid}
    with pytest.raises(ClassError, match="'5' is not a GPU of this host"):
        backend.grade_class(gpu_host.subs, tmp_path / "out2", gpus="5", progress=lambda line: None,
                            kit_root=gpu_host.kit.root)
    assert not (tmp_path / "out2").exists()


# ---------------------------------------------------------------- the probe program, on a fake driver

@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory):
    """The fake driver (data/fake_libcuda.c, shared with test_preflight.py)."""
    return build_fake_libcuda(tmp_path_factory.mktemp("fakecuda"))


@pytest.mark.parametrize("mode,status,message", [
    ("0", "ok", ""), ("1", "no_gpu", "cuInit: CUDA_ERROR_NO_DEVICE"),
    ("2", "failed", "cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS"),
    ("3", "failed", "the probe kernel wrote 7, not 1234567")])
def test_probe_program_on_a_fake_driver(fake_libcuda, monkeypatch, mode, status, message):
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_libcuda))
    monkeypatch.setenv("FAKE_CUDA", mode)
    found = gpupool.probe("GPU-anything")
    assert found.status == status and found.message == message
    if status == "ok":
        assert found.uuid == "GPU-00112233-4455-6677-8899-aabbccddeeff"
        assert found.name == "Fake GPU 80GB" and found.cc == "9.0"


def test_probe_without_a_driver_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))          # no libcuda.so.1 there
    found = gpupool.probe()
    if found.status == "ok":
        pytest.skip("this machine has a working NVIDIA driver")
    assert found.status == "no_gpu"


def test_when_the_last_gpu_breaks_the_rest_is_not_measured(gpu_host, tmp_path, monkeypatch):
    listed = gpu_host.gpus(fake_gpus(1))
    gpu_host.students(2)
    pool = gpupool.GpuSet(listed, prober(), say=lambda line: None)
    pool.check()
    real_grade = worker.grade

    def breaks(task, subs, limit, *a, **k):
        report, log = real_grade(task, subs, limit, *a, **k)
        if k.get("stage") == "build":
            return report, log
        report["gpu"]["status"], report["verdict"] = "no_gpu", "not_measured"
        pool._probe = prober(bad={0})
        return report, log
    monkeypatch.setattr(worker, "grade", breaks)
    result = backend.grade_class(gpu_host.subs, tmp_path / "out", jobs=1, progress=lambda line: None,
                                 kit_root=gpu_host.kit.root, gpu_set=pool)
    assert [g.verdict for g in result.gradings] == ["not_measured", "not_measured"]
    assert all("no usable GPU left" in g.message for g in result.gradings)
    assert result.exit_status == 1


@pytest.mark.parametrize("env,status,held", [
    ({}, "ok", True), ({"FAKE_CUDA_COMPUTE_MODE": "2"}, "ok", False), ({"FAKE_CUDA": "1"}, "no_gpu", False),
    ({"FAKE_CUDA": "2"}, "failed", False)])
def test_a_context_holder_on_a_fake_driver(fake_libcuda, monkeypatch, env, status, held):
    """The full probe, then held while the grading runs, ended by close(); never on a GPU in an exclusive compute
    mode (it would lock the gradings out) nor on a GPU that fails its probe or without a GPU."""
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_libcuda))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    holder = gpupool.ContextHold("GPU-anything")
    assert holder.held is held and holder.result.status == status
    assert holder.result == gpupool.probe("GPU-anything")             # the probe's findings, in one process
    proc = holder._proc
    assert (proc is not None and proc.poll() is None) if held else proc is None
    holder.close()
    if held:
        assert proc.returncode == 0
    holder.close()                                     # twice: nothing more


def test_a_context_holder_without_a_driver_holds_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))          # no libcuda.so.1 there
    holder = gpupool.ContextHold()
    if holder.held:
        holder.close()
        pytest.skip("this machine has a working NVIDIA driver")
    assert holder._proc is None and holder.result.status == "no_gpu"


def test_a_holder_that_writes_much_on_stderr_still_ends_when_asked(monkeypatch):
    """A holder's stderr is never a pipe nobody reads: one that writes more than a pipe holds still sees its
    stdin close and ends by itself, at once."""
    monkeypatch.setattr(gpuprobe, "PROBE_PROGRAM", (
        "import json, sys\n"
        "print(json.dumps({'status': 'ok', 'held': True, 'uuid': 'GPU-x', 'name': 'G'}), flush=True)\n"
        "sys.stderr.write('warning from the driver\\n' * 20000); sys.stderr.flush()\n"
        "sys.stdin.read()\n"))
    holder = gpupool.ContextHold("GPU-x")
    assert holder.held and holder.result.status == "ok"
    proc, start = holder._proc, time.monotonic()
    holder.close()
    assert proc.returncode == 0 and time.monotonic() - start < 5
