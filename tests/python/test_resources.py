"""What a batch task asks for (classes/resources.py), from a class recording (a "class" record of
handouts/data, written by tests/submissions/bench_class.py --record from the reports' own figures)."""

import json
import sys

import pytest

from conftest import FAKE_LAB, GOOD_KERNEL, KIT_ROOT, recording_row, write_recording
from stencil_grader.classes import backend, gpupool, plan, resources
from stencil_grader.grading import score
from stencil_grader.instructor import records

sys.path.insert(0, str(KIT_ROOT / "tests" / "submissions"))
import bench_class  # noqa: E402


def report(lab, build_s, cases_s, cpu, rss, grader=60.0, verdict="pass"):
    return {"lab": lab, "verdict": verdict, "seconds": {"build": build_s, "static": 0.5, "cases": cases_s, "bench": 1.0},
            "resources": {"build": {"cpu_s": cpu, "peak_rss_mib": rss}, "static": {"cpu_s": 0.1, "peak_rss_mib": 20},
                          "cases": {"cpu_s": cpu, "peak_rss_mib": rss}, "bench": {"cpu_s": 0.5, "peak_rss_mib": 2 * rss},
                          "grader": {"peak_rss_mib": grader}}}


def test_summarize_takes_medians_and_peaks_and_leaves_out_what_was_not_measured():
    reports = [report("05-z", 10, 2, 8, 500), report("05-z", 20, 4, 10, 700, grader=90),
               report("05-z", 30, 3, 12, 600), report("01-a", 5, 1, 4, 100, verdict="not_measured")]
    rows, grader = resources.summarize(reports, score.is_grade)
    by_id = {r["id"]: r for r in rows}
    assert grader == 90
    assert by_id["05/build"] == {"id": "05/build", "lab": "05-z", "stage": "build", "n": 3, "wall_s_median": 20.5,
                                 "wall_s_max": 30.5, "cpu_s_median": 10.1, "peak_rss_mib_max": 700}
    assert by_id["05/gpu"]["wall_s_median"] == 4.0 and by_id["05/gpu"]["peak_rss_mib_max"] == 1400
    assert by_id["01/gpu"]["n"] == 0 and by_id["01/gpu"]["wall_s_median"] is None   # not measured: null
    assert by_id["01/build"]["n"] == 1


def test_requests_from_recordings(tmp_path, fake_kit):
    spec = plan.select_labs([FAKE_LAB], fake_kit.root)[0]
    h100 = write_recording(tmp_path / "h100.json", [recording_row(FAKE_LAB, "build", 20, 18, 900),
                                                   recording_row(FAKE_LAB, "gpu", 2, 6, 2000)], "NVIDIA H100 80GB HBM3")
    h200 = write_recording(tmp_path / "h200.json", [recording_row(FAKE_LAB, "gpu", 3, 3, 1500)], "NVIDIA H200", 100)
    rec = resources.load([h100, h200])
    # the largest of each figure over the recordings: the cluster may hold either GPU
    assert rec.figures[FAKE_LAB, "gpu"] == {"n": 5, "wall_s_median": 3, "wall_s_max": 6, "cpu_s_median": 6,
                                             "peak_rss_mib_max": 2000}
    gpu = resources.task_request("gpu", [[spec] * 300, [spec] * 10], rec)
    assert gpu.seconds == 300 * 3 * 3 + 120                        # the longest shard: median x 3 + slack
    # (2000 x 2 reruns at once on its 2 CPUs + 2 x 100) x 1.5, to 256 MiB: the concurrent peak
    assert gpu.mem_mib == 6400 and gpu.cpus == 2
    assert gpu.cpus == 2                                           # 6 CPU-s over 3 s wall
    assert gpu.basis.startswith(f"measured: {h100} (NVIDIA H100 80GB HBM3, 2026-01-01); {h200}")
    build = resources.task_request("build", [[spec]], rec)
    assert build.seconds == resources.TIME_FLOOR_S and build.mem_mib == 1792 and build.cpus == 1   # (900+200) x 1.5
    assert resources.task_request("gpu", [[spec] * 4], rec, time_per_lab=50).seconds == resources.TIME_FLOOR_S
    assert resources.default_per_task(rec, [spec]) == resources.MAX_PER_TASK       # 600 s / 3 s, at most 64
    # nothing recorded: the stated defaults, said to be not measured, and the labs' own limits
    none = resources.task_request("gpu", [[spec] * 2], None)
    assert (none.mem_mib, none.cpus) == (16384, 4) and none.basis.startswith("not measured")
    assert resources.default_per_task(None, [spec]) == resources.NOT_MEASURED_PER_TASK
    other = plan.select_labs(None, KIT_ROOT)[0]                    # a lab the recording lacks
    mixed = resources.task_request("gpu", [[spec, other]], rec)
    assert "not measured for " + other.lab in mixed.basis and mixed.mem_mib >= 16384
    (tmp_path / "bad.json").write_text('{"record": "check", "rows": []}')
    with pytest.raises(ValueError, match="is not a class-grading recording"):
        resources.load([tmp_path / "bad.json"])
    assert resources.load([]) is None


def test_bench_class_records_what_the_class_used(fake_kit, tmp_path, monkeypatch):
    """bench_class.py --record: a record of handouts/data's format, read back by resources.load."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name, text in (("ann", GOOD_KERNEL), ("ben", GOOD_KERNEL + "// WRONG\n"), ("cy", GOOD_KERNEL + "// NO_GPU\n")):
        (subs / name / FAKE_LAB).mkdir(parents=True)
        (subs / name / FAKE_LAB / "kernel.cu").write_text(text)
    backend.grade_class(subs, out, kit_root=fake_kit.root, progress=lambda line: None, gpu_set=gpupool.GpuSet([]))
    monkeypatch.setattr(bench_class.gpulist, "list_gpus", lambda: ([], "nvidia-smi not found (test)"))
    path = tmp_path / "data" / "fake" / "class.json"
    rec = bench_class.record_resources(out, path, records.now(), "bench_class.py --record", {"students": 3})
    assert records.validate_record(json.loads(path.read_text()), path) == []
    assert rec["device"]["name"] == "Fake GPU 80GB"                # the GPU the reports' stages ran on
    by_id = {r["id"]: r for r in rec["rows"]}
    assert by_id["01/build"]["n"] == 3 and by_id["01/gpu"]["n"] == 2   # cy's GPU stages measured nothing
    assert by_id["01/gpu"]["peak_rss_mib_max"] > 1 and rec["grader_peak_rss_mib"] > 10
    loaded = resources.load([path])
    assert loaded.figures[FAKE_LAB, "build"]["n"] == 3
    assert records.load_recordings(tmp_path / "data").records[("fake", "class")]


def test_bench_class_splits_the_gpu_stages_by_whether_builds_still_ran(tmp_path):
    """bench_class's gpu_stages: each grading's build ended at graded_at less its GPU wait and stages; the cases of
    the gradings that ended by the last build's end are "building", the later ones "after"; a hang is left out."""
    head = "student,lab,verdict,graded_at,build_s,static_s,gpu_wait_s,cases_s,bench_s\n"
    lines = ["a,01,pass,2026-11-29T00:00:10+00:00,4,0.1,0,0.5,0.1",        # built at :09.4, ended while building
             "b,01,pass,2026-11-29T00:00:20+00:00,4,0.1,5,0.4,0.1",        # built at :14.5, ended while building
             "c,01,timeout,2026-11-29T00:00:24+00:00,4,0.1,0,3.5,",        # a hang: in no median
             "d,01,pass,2026-11-29T00:00:30+00:00,4,0.1,9,0.2,0.1",        # built at :20.7, the last build
             "e,01,compile_error,2026-11-29T00:00:05+00:00,4,0.1,,,"]      # the first to end, on no GPU
    (tmp_path / "gradings.csv").write_text(head + "\n".join(lines) + "\n")
    cost = bench_class.gpu_stages(tmp_path)
    assert cost["last_build_end_s"] == 16                                       # d's build, 20.7 s after e ended
    assert (cost["gradings_building"], cost["cases_s_median_building"]) == (2, 0.45)
    assert (cost["gradings_after"], cost["cases_s_median_after"]) == (1, 0.2)


def test_one_command_records_a_gpu_machine(tmp_path):
    """`make bench-class SLUG=h100` is the one command that writes handouts/data/h100/class.json."""
    import subprocess
    done = subprocess.run(["make", "-n", "-C", str(KIT_ROOT), "bench-class", "SLUG=h100"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "bench_class.py --students 8" in done.stdout
    assert "--record handouts/data/h100/class.json" in done.stdout
