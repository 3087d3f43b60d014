"""`grade.py lab`, end to end, on a fake lab (fake make, check and bench; see conftest.py)."""

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import FAKE_LAB, GOOD_KERNEL, KIT_ROOT, run_grade
from stencil_grader.grading import build, gradescope, pipeline


@pytest.fixture
def grade(fake_kit, tmp_path):
    """grade(kernel_text, *extra_args) -> (completed process, report dict or None, build dir)."""
    def run(text=GOOD_KERNEL, *extra, name="student", nested=False, env=None):
        folder = fake_kit.submission(name, text, nested=nested)
        build_dir = tmp_path / "build" / name
        done = run_grade("lab", fake_kit.lab_dir, "--impl", folder, "--build-dir", build_dir, *extra, env=env)
        report_path = build_dir / "report.json"
        data = json.loads(report_path.read_text()) if report_path.is_file() else None
        return done, data, build_dir
    return run


def test_good_submission_gets_full_points_and_exit_0(grade, tmp_path):
    gradescope = tmp_path / "gs" / "results.json"
    done, report, build_dir = grade(GOOD_KERNEL, "--gradescope", gradescope, "--json", tmp_path / "r.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["verdict"] == "pass" and report["points"] == 100 and report["full_points"]
    assert report["correctness"]["passed"] == 3 and report["correctness"]["total"] == 3
    perf = report["performance"]
    assert perf["bench"]["gbps"] == pytest.approx(2550.0) and perf["ratio"] == pytest.approx(0.85)
    assert perf["target"]["table"] == "Fake GPU 80GB" and perf["target"]["calibrated"] == "test table"
    assert report["seed"] == 777
    assert perf["stderr_tail"].split()[-2:] == ["--seed", "777"]          # the check's seed
    layers = report["sandbox"]
    assert set(layers) == {"user", "directory", "environment", "network", "limits"}
    assert layers["directory"].startswith("on") and layers["limits"].startswith("on")
    assert json.loads((tmp_path / "r.json").read_text()) == report
    results = json.loads(gradescope.read_text())
    assert results["score"] == 100 and results["extra_data"]["max_points"] == 100      # Gradescope's format
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(100)
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(100)
    out = done.stdout
    assert "verdict      pass" in out and "100.00/100 points" in out
    assert "2550.0 GB/s effective, copy 3000.0 GB/s, ratio 0.850" in out
    # Once the GPU is found, with the seed (a run stopped by hand can still be replayed) ...
    assert "running the correctness cases on Fake GPU 80GB (seed 777) ...\n" in out
    assert "every case passed; timing (bench) ...\n" in out                 # said as the timed run starts
    assert "ran: check" in perf["stderr_tail"]                 # timed in the check run: one CUDA start
    assert out.count("seed: 777") == 1                           # ... and the seed line once, first in the report
    assert out.index("seed: 777 (replay: cd ") < out.index("Lab 01-fake-5pt")
    assert "building " in out and "kernel.cu in " in out          # which file is graded
    assert f"make check SEED=777 IMPL={tmp_path}" in out
    assert "sandbox" in out
    assert f"report: {build_dir / 'report.json'}" in out
    assert "\033[" not in out                                  # no colour: not a tty, NO_COLOR set
    seconds = report["seconds"]                        # each stage's wall seconds add up to the total
    assert {"build", "static", "gpu_wait", "cases", "bench", "total"} <= set(seconds)
    assert sum(v for k, v in seconds.items() if k != "total") == pytest.approx(seconds["total"], rel=0.05)
    used = report["resources"]                         # each stage's programs' CPU seconds and peak memory
    assert set(used) == {"build", "static", "cases", "grader"}      # one process for the cases and the timing
    for stage in ("build", "cases"):
        assert used[stage]["cpu_s"] > 0 and used[stage]["peak_rss_mib"] > 1, (stage, used)
    assert used["grader"]["peak_rss_mib"] > 10


def test_a_check_program_that_does_not_time_leaves_it_to_the_bench_program(grade):
    """A check program that ends after its cases (a build of an earlier kit): the bench program times."""
    done, report, _ = grade(GOOD_KERNEL + "// NO_THEN_BENCH\n")
    assert done.returncode == 0 and report["verdict"] == "pass" and report["points"] == 100
    tail = report["performance"]["stderr_tail"]
    assert "ran: bench --json - --seed 777" in tail and "ran: check" not in tail
    assert set(report["resources"]) == {"build", "static", "cases", "bench", "grader"}


def test_no_gpu_build_and_static_run_then_not_measured_exit_1(grade):
    done, report, build_dir = grade(GOOD_KERNEL + "// NO_GPU\n")
    assert done.returncode == 1
    assert report["verdict"] == "not_measured" and report["points"] == 0
    assert report["build"]["outcome"] == "ok" and report["static"][0]["status"] == "pass"
    # CUDA's words are said once, in the next step; the stages point there
    assert "correctness: not measured (no GPU, see next)" in done.stdout
    assert done.stdout.count("CUDA says: no CUDA-capable device is detected") == 1
    assert "performance: not measured" in done.stdout
    assert report["correctness"]["total"] is None and report["performance"]["bench"] is None
    # No GPU, no case: nothing announces cases that cannot run, and the seed is said once.
    assert "correctness cases" not in done.stdout and done.stdout.count("seed: ") == 1


def test_a_kernel_cu_in_the_lab_folder_is_named_as_not_graded(grade, fake_kit):
    """A kernel.cu saved in labs/NN-slug/ is named as not graded, before anything runs."""
    (fake_kit.lab_dir / "kernel.cu").write_text("// my work, saved in the wrong folder\n")
    done, report, _ = grade(GOOD_KERNEL)
    note = [n for n in report["notes"] if "kernel.cu is not graded" in n]
    assert len(note) == 1 and "make check IMPL=." in note[0], report["notes"]
    assert note[0].startswith(str(fake_kit.lab_dir / "kernel.cu")) or "labs/" in note[0]
    assert done.stdout.index("note: ") < done.stdout.index("building ")        # said before anything runs
    assert pipeline.stray_sources(fake_kit.lab_dir, fake_kit.lab_dir / "kernel.cu") == []


needs_cc = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")),
                              reason="no C compiler to make the fake kernel.o")


@needs_cc
def test_forbidden_symbol_is_not_run(grade):
    done, report, build_dir = grade(GOOD_KERNEL.replace("{\n    stencil5",
                                                        "{\n    cudaDeviceSynchronize();\n    stencil5")
                                    + "// CALLS=cudaDeviceSynchronize\n")
    assert done.returncode == 1 and report["verdict"] == "forbidden" and report["points"] == 0
    assert "line 6: cudaDeviceSynchronize (in stencil2d_sweep): host synchronisation" in done.stdout
    assert report["correctness"]["total"] is None


@needs_cc
def test_harmless_names_pass_and_the_object_is_what_counts(grade):
    """A variable named like the harness (cpu_count) is fine; a getenv reached without naming it is not."""
    done, report, _ = grade(GOOD_KERNEL + "const int cpu_count = 0, harness_x = 1;\n")
    assert report["verdict"] == "pass", done.stdout
    symbols_check = [c for c in report["static"] if c["name"] == "linked symbols"][0]
    assert symbols_check["status"] == "pass"
    done, report, _ = grade(GOOD_KERNEL + "#define LOOKUP get##env\n// CALLS=getenv\n", name="sneaky")
    assert report["verdict"] == "forbidden" and "getenv (in stencil2d_sweep): the environment" in done.stdout


def test_lab_specific_forbidden_call(grade, fake_kit):
    """lab.json's forbidden_calls are judged on the compiled object, however the source spells the call."""
    fake_kit.set_lab_json(constraints={"shared_memory": False, "no_div_rem": False,
                                       "forbidden_calls": ["cudaMemsetAsync"]})
    done, report, _ = grade(GOOD_KERNEL + "#define ZERO cuda##MemsetAsync\n// CALLS=cudaMemsetAsync\n")
    assert report["verdict"] == "forbidden"
    assert "lab.json" in done.stdout


def test_hanging_suite_is_a_timeout_not_a_pass(grade):
    start = time.monotonic()
    done, report, _ = grade(GOOD_KERNEL + "// HANG\n")
    assert time.monotonic() - start < 30
    assert done.returncode == 1 and report["verdict"] == "timeout"
    outcomes = [c["outcome"] for c in report["correctness"]["cases"]]
    assert outcomes == ["pass", "timeout", "not_run"]        # the rule of one run stopped at its timeout


def test_first_case_timeout_stops_the_run(grade):
    """Check reports the second case timed out and would hang in the third: stopped at once, the third not run."""
    start = time.monotonic()
    done, report, _ = grade(GOOD_KERNEL + "// CASE_TIMEOUT\n", env={})
    assert time.monotonic() - start < 30
    assert report["verdict"] == "timeout" and report["correctness"]["stopped_early"]
    cases = report["correctness"]["cases"]
    assert [c["outcome"] for c in cases] == ["pass", "timeout", "not_run"]
    assert cases[2]["message"] == "not run: an earlier case timed out"
    assert "stopped at the first case timeout" in report["correctness"]["run_message"]


def test_div_rem_constraint(grade, fake_kit):
    fake_kit.set_lab_json(constraints={"shared_memory": False, "no_div_rem": True, "forbidden_calls": []})
    done, report, build_dir = grade(GOOD_KERNEL + "// DIVREM\n")
    assert done.returncode == 1 and report["verdict"] == "constraint"
    assert report["correctness"]["points"] == 60 and report["performance"]["points"] == 0
    assert "stencil5, sm_90 offset 0x0010: I2F.RP" in done.stdout
    assert report["performance"]["bench"] is None
    done, report, _ = grade(GOOD_KERNEL, name="clean")
    assert report["verdict"] == "pass"


def test_shared_memory_constraint(grade, fake_kit):
    """The tile rule is judged on the audited launch, never on the PTX alone."""
    fake_kit.set_lab_json(constraints={"shared_memory": True, "no_div_rem": False, "forbidden_calls": []})
    done, report, _ = grade(GOOD_KERNEL)
    assert report["verdict"] == "constraint" and "uses 0 bytes of shared memory" in done.stdout
    tiled = GOOD_KERNEL + "// SHARED SMEM=4096 KERNEL=_Z5tiledPKfPfi\n"
    assert grade(tiled, name="tiled")[1]["verdict"] == "pass"
    decoy = GOOD_KERNEL + "// SHARED SMEM=0 KERNEL=_Z5plainPKfPfi\n"        # the tile's kernel never ran
    assert grade(decoy, name="decoy")[1]["verdict"] == "constraint"
    assert grade(tiled + "// NO_AUDIT\n", name="unaudited")[1]["verdict"] == "not_measured"


@pytest.mark.parametrize("marker, verdict, points, said, fields", [
    ("COMPILE_ERROR", "compile_error", 0, 'error: identifier "oops" is undefined',
     {"static": None, "correctness.total": None}),
    ("NO_CHECK_LIB", "kit_error", 0, "the machine or the kit is at fault", {"build.outcome": "kit_error"}),
    ("WRONG", "incorrect", 40, "fail: nx=33 ny=9: 2 mismatches; first at (x=3, y=4)",
     {"correctness.points": 40, "performance.points": 0, "performance.bench": None}),
    ("CUDA_ERROR", "crash", 40, "", {"correctness.points": 40}),
    # the Fake GPU table: floor 0.40, target 0.80 -> 40 * 0.05/0.40
    ("RATIO=0.45", "slow", 65, "", {"correctness.points": 60, "performance.points": 5.0}),
    ("RATIO=1.2", "implausible", 60, "", {"correctness.points": 60, "performance.points": 0}),
    ("BENCH_BAD_OUTPUT", "incorrect", 60, "", {"correctness.points": 60, "performance.points": 0}),
    ("BENCH_CUDA", "crash", 60, "", {"correctness.points": 60, "performance.points": 0}),
])
def test_each_failure_has_its_verdict_and_points(grade, marker, verdict, points, said, fields):
    """Correctness gates performance; a build failure runs nothing; the kit's own failure is kit_error."""
    done, report, _ = grade(GOOD_KERNEL + f"// {marker}\n")
    assert done.returncode == 1 and said in done.stdout
    assert report["verdict"] == verdict and report["points"] == pytest.approx(points)
    for path, value in fields.items():
        node = report
        for key in path.split("."):
            node = node[key]
        assert node == (pytest.approx(value) if isinstance(value, float) else value), (path, node)


def test_skip_bench(grade):
    done, report, build_dir = grade(GOOD_KERNEL, "--skip-bench")
    assert done.returncode == 1 and report["verdict"] == "not_measured"
    assert report["correctness"]["points"] == 60
    assert report["performance"]["bench"] is None


def test_seed_option_environment_arch_and_nested_layout(grade, tmp_path):
    done, report, build_dir = grade(GOOD_KERNEL, "--seed", "5", "--arch", "80", nested=True)
    assert report["seed"] == 5 and "ran: check SEED=5" in report["correctness"]["stderr_tail"]
    assert (build_dir / "make.args").read_text().split()[-1] == "CUDA_ARCH=80"
    assert "SEED=5" in report["replay"]
    done, report, build_dir = grade(GOOD_KERNEL, name="env", env={"SEED": "6"})
    assert report["seed"] == 6


def test_usage_and_config_errors_exit_2(fake_kit, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_grade("lab", fake_kit.lab_dir, "--impl", empty, "--build-dir", tmp_path / "b")
    assert done.returncode == 2 and "does not exist" in done.stderr
    done = run_grade("lab", fake_kit.lab_dir, "--impl", tmp_path / "nowhere")
    assert done.returncode == 2 and "--impl is starter, reference or a directory" in done.stderr
    fake_kit.set_lab_json(api="stencil9d")
    folder = fake_kit.submission("x")
    done = run_grade("lab", fake_kit.lab_dir, "--impl", folder, "--build-dir", tmp_path / "b")
    assert done.returncode == 2 and "api must be one of" in done.stderr
    done = run_grade("lab", fake_kit.lab_dir, "--seed", "-3")
    assert done.returncode == 2
    assert run_grade().returncode == 2


def test_default_build_dir_and_impl_tags(tmp_path):
    assert pipeline.impl_tag("starter") == "starter" and pipeline.impl_tag("reference") == "reference"
    tag = pipeline.impl_tag(str(tmp_path / "my_subs"))
    assert tag == "dir-" + str(tmp_path.resolve() / "my_subs").lstrip("/").replace("/", "_")
    assert pipeline.default_build_dir("01-naive-5pt", "starter") == KIT_ROOT / "build" / "01-naive-5pt" / "starter"
    assert pipeline.resolve_lab_dir("01-naive-5pt") == KIT_ROOT / "labs" / "01-naive-5pt"
    assert FAKE_LAB != "01-naive-5pt"


def test_impl_tags_are_paths_make_can_take(tmp_path):
    """impl_tag turns any folder name into a short build folder name make can take."""
    tags = set()
    for name in ("Jos\u00e9 Garc\u00eda", "x`id`y", "$(id)", "a b", "a_b", "a" * 300):
        tag = pipeline.impl_tag(str(tmp_path / name))
        assert build.make_path_problem(Path("/") / tag) is None and len(tag.encode()) <= pipeline.TAG_BYTES
        tags.add(tag)
    assert len(tags) == 6


def test_build_dir_rule_is_lab_mks(tmp_path):
    """pipeline.impl_tag and lab.mk's IMPL_TAG name an IMPL=DIR build directory alike."""
    if not shutil.which("make"):
        pytest.skip("make not installed")
    folder = tmp_path / "subs"
    folder.mkdir()
    done = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(KIT_ROOT / "labs" / "01-naive-5pt"),
                           "print-build-dir", f"IMPL={folder.resolve()}"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(pipeline.default_build_dir("01-naive-5pt", str(folder)))


def test_build_then_gpu_stage_gives_the_whole_grading(grade, fake_kit, tmp_path):
    """stage=build leaves a pending report and the state; stage=gpu finishes from it alone."""
    done, report, build_dir = grade(GOOD_KERNEL, "--stage", "build")
    assert done.returncode == 1 and report["verdict"] == "pending" and not report["final"]
    assert (build_dir / pipeline.STATE_FILE).is_file()
    assert report["correctness"]["total"] is None                  # nothing ran on a GPU
    folder = fake_kit.submission("student", GOOD_KERNEL)
    done = run_grade("lab", fake_kit.lab_dir, "--impl", folder, "--build-dir", build_dir, "--stage", "gpu")
    report = json.loads((build_dir / "report.json").read_text())
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["verdict"] == "pass" and report["final"] and report["build"]["outcome"] == "ok"
    assert report["seconds"]["build"] > 0 and report["seconds"]["bench"] > 0


def test_gpu_stage_refuses_a_changed_source_or_a_missing_build(grade, fake_kit, tmp_path):
    grade(GOOD_KERNEL, "--stage", "build")
    folder = fake_kit.submission("student", GOOD_KERNEL + "// edited after the build\n")
    done = run_grade("lab", fake_kit.lab_dir, "--impl", folder, "--build-dir", tmp_path / "build" / "student",
                     "--stage", "gpu")
    assert done.returncode == 2 and "changed since its build stage" in done.stderr
    done = run_grade("lab", fake_kit.lab_dir, "--impl", folder, "--build-dir", tmp_path / "nowhere",
                     "--stage", "gpu")
    assert done.returncode == 2 and "run the build stage first" in done.stderr


def test_a_build_for_another_gpu_is_refused(tmp_path):
    (tmp_path / "flags.stamp").write_text("-gencode arch=compute_80,code=sm_80 "
                                          "-gencode arch=compute_80,code=compute_80\n")
    assert pipeline.runs_on(tmp_path, "8.0") is None
    assert pipeline.runs_on(tmp_path, "9.0") is None                  # PTX of sm_80 runs on sm_90
    (tmp_path / "flags.stamp").write_text("-gencode arch=compute_90,code=sm_90 "
                                          "-gencode arch=compute_90,code=compute_90\n")
    assert "build again for it" in pipeline.runs_on(tmp_path, "8.0")
    (tmp_path / "flags.stamp").write_text("-gencode arch=compute_80,code=sm_80\n")    # machine code alone
    assert pipeline.runs_on(tmp_path, "8.6") is None                  # sm_80 code loads on sm_86
    assert "build again for it" in pipeline.runs_on(tmp_path, "9.0")  # not on another major version
    (tmp_path / "flags.stamp").write_text("-gencode arch=compute_86,code=sm_86\n")
    assert "build again for it" in pipeline.runs_on(tmp_path, "8.0")  # nor on an older minor one


def test_a_kernels_printf_grades_as_its_twin_and_is_shown(grade):
    """A debug printf costs nothing and is shown (terminal, report, Gradescope)."""
    _, twin, _ = grade(GOOD_KERNEL, name="twin")
    done, report, _ = grade(GOOD_KERNEL + "// PRINTF\n", name="printer")
    assert (report["verdict"], report["points"]) == (twin["verdict"], twin["points"]) == ("pass", 100)
    assert "hello from the kernel: x = 3" in report["program_output"]
    assert "output of your code" in done.stdout and "hello from the kernel: x = 3" in done.stdout
    assert any(t["name"].endswith("output of your code") and "hello" in t["output"]
               for t in gradescope.tests(report))


def test_work_on_another_stream_costs_the_performance_points(grade):
    """A kernel the audit sees on another stream than the launcher's: constraint, performance points lost."""
    done, report, _ = grade(GOOD_KERNEL + "// OTHER_STREAM\n")
    assert report["verdict"] == "constraint" and report["points"] == 60
    assert report["performance"]["points"] == 0 and "another stream" in report["performance"]["message"]
    (stream,) = [c for c in report["launches"] if c["name"] == "launch stream"]
    assert stream["status"] == "fail" and "ran on stream 14" in stream["details"][0]


LAB6_CONSTRAINTS = {"shared_memory": True, "no_div_rem": False, "forbidden_calls": [], "max_shared_planes": 1,
                    "shared_tile": {"halo": 1, "smallest_tile": [32, 6], "row_padding": 4, "rule": "One plane."}}


def test_without_the_audit_the_stream_rule_is_a_note_and_planes_are_not_measured(grade, fake_kit):
    done, report, _ = grade(GOOD_KERNEL + "// NO_AUDIT\n", name="a")
    assert report["verdict"] == "pass"                        # the timer covers every stream anyway
    assert report["launches"][0]["status"] == "skipped" and "not verified" in report["launches"][0]["message"]
    fake_kit.set_lab_json(constraints=LAB6_CONSTRAINTS)
    done, report, _ = grade(GOOD_KERNEL + "// NO_AUDIT\n", name="b")
    assert report["verdict"] == "not_measured" and report["performance"]["points"] == 0
    assert "needs the launch audit" in report["performance"]["message"]


def test_shared_planes_are_judged_as_launched(grade, fake_kit):
    """Lab 6's rule on the audited launch: 4 x 37 blocks of 512 threads on a 1024 x 512 plane."""
    fake_kit.set_lab_json(constraints=LAB6_CONSTRAINTS)
    _, report, _ = grade(GOOD_KERNEL + "// SHARED SMEM=4096 KERNEL=_Z5tiledPKfPfi\n", name="one")
    assert report["verdict"] == "pass", report["launches"]
    _, report, _ = grade(GOOD_KERNEL + "// SHARED SMEM=32768 KERNEL=_Z5tiledPKfPfi\n", name="three")
    assert report["verdict"] == "constraint"
    (planes,) = [c for c in report["launches"] if c["name"] == "max shared planes"]
    assert planes["status"] == "fail" and "32768 bytes of shared memory per block" in planes["message"]
