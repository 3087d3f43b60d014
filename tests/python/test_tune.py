"""grade.py tune (grader/stencil_grader/instructor/tune.py; its pictures: pictures.py): the sweep's bounds,
the candidates, the tuning files and what lab.mk reads from them, the choice of the best, and the
sweep graded through the pipeline with the build, static, Check and bench stages replaced by fakes
(no GPU needed).
The real kit's references and tune.json files are checked too: every declared parameter
has a default in its reference."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KIT_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(KIT_ROOT / "grader"))

from stencil_grader.grading import bench, build, checkrun, static  # noqa: E402
from stencil_grader.grading.checks import StaticCheck  # noqa: E402
from stencil_grader.instructor import pictures, tune  # noqa: E402

SOURCE = """/* a reference */
#ifndef TUNE_K
#define TUNE_K 8          /* sweeps per pass */
#endif
#ifndef TUNE_VEC
#define TUNE_VEC 4
#endif
constexpr int K = TUNE_K;
"""


def make_kit(tmp_path: Path, space: dict | None, source: str = SOURCE) -> Path:
    """A kit root with labs/08-fake/{lab.json,tune.json} and reference/08-fake/kernel.cu."""
    lab = tmp_path / "labs" / "08-fake"
    lab.mkdir(parents=True)
    (lab / "lab.json").write_text("{}")
    if space is not None:
        (lab / "tune.json").write_text(json.dumps(space))
    ref = tmp_path / "reference" / "08-fake"
    ref.mkdir(parents=True)
    (ref / "kernel.cu").write_text(source)
    return tmp_path


SPACE = {"parameters": {"K": [4, 8], "VEC": [2, 4, 8]},
         "constraints": ["2 * VEC * K <= 64"], "plot": {"x": "K", "y": "VEC"}}


# ---- tune.json ---------------------------------------------------------------------------

def test_space_loads_and_candidates_put_the_defaults_first(tmp_path):
    kit = make_kit(tmp_path, SPACE)
    lab = kit / "labs" / "08-fake"
    space = tune.load_space(lab)
    assert space.parameters == {"K": [4, 8], "VEC": [2, 4, 8]}
    assert (space.plot_x, space.plot_y) == ("K", "VEC")
    found = tune.candidates(space, tune.source_defaults(kit / "reference" / "08-fake" / "kernel.cu"))
    assert found[0] == {"K": 8, "VEC": 4}                      # the defaults, even past a constraint
    assert {"K": 8, "VEC": 8} not in found                     # 2*8*8 = 128 > 64
    assert {"K": 4, "VEC": 8} in found and {"K": 8, "VEC": 2} in found
    assert len(found) == len({tune.variant_name(c) for c in found})


def test_no_tune_json_is_none(tmp_path):
    kit = make_kit(tmp_path, None)
    assert tune.load_space(kit / "labs" / "08-fake") is None


@pytest.mark.parametrize("space, words", [
    ({"parameters": {}}, "not empty"),
    ({"parameters": {"k": [1]}}, "upper case"),
    ({"parameters": {"K": [1, 1]}}, "distinct integers"),
    ({"parameters": {"K": [1.5]}}, "distinct integers"),
    ({"parameters": {"K": [True]}}, "distinct integers"),
    ({"parameters": {"K": [1]}, "constraints": ["K <"]}, "constraint"),
    ({"parameters": {"K": [1]}, "constraints": ["VEC > 1"]}, "not parameters"),
    ({"parameters": {"K": [1]}, "constraints": ["__import__('os')"]}, "min(...) and max(...)"),
    ({"parameters": {"K": [1]}, "constraints": ["K.real > 0"]}, "not allowed"),
    ({"parameters": {"K": [1]}, "plot": {"x": "VEC"}}, "not a parameter"),
    ({"parameters": {"K": [1]}, "colour": "red"}, "unknown keys"),
])
def test_bad_tune_json_names_what_is_wrong(tmp_path, space, words):
    kit = make_kit(tmp_path, space)
    with pytest.raises(tune.TuneError, match="tune.json") as err:
        tune.load_space(kit / "labs" / "08-fake")
    assert words in str(err.value)


def test_a_parameter_without_a_default_in_the_source_is_an_error(tmp_path):
    kit = make_kit(tmp_path, {"parameters": {"K": [4], "SEG": [64]}})
    space = tune.load_space(kit / "labs" / "08-fake")
    with pytest.raises(tune.TuneError, match="no default for TUNE_SEG"):
        tune.candidates(space, tune.source_defaults(kit / "reference" / "08-fake" / "kernel.cu"))


@pytest.mark.parametrize("text, values, expected", [
    ("2 * VEC * K <= 128", {"VEC": 8, "K": 8}, True),
    ("2 * VEC * K <= 127", {"VEC": 8, "K": 8}, False),
    ("K % 4 == 0 and not VEC == 2", {"VEC": 4, "K": 8}, True),
    ("K == 4 or VEC // 2 == 4", {"VEC": 8, "K": 8}, True),
    ("1 <= K < 8", {"K": 8}, False),
    ("max(K, VEC) - min(K, VEC) == 4", {"VEC": 4, "K": 8}, True),
    ("-K + 8 == 0", {"K": 8}, True),
])
def test_evaluate(text, values, expected):
    assert tune.evaluate(text, values) is expected


def test_evaluate_refuses_a_missing_name_and_division_by_zero():
    with pytest.raises(ValueError, match="VEC has no value"):
        tune.evaluate("VEC > 1", {})
    with pytest.raises(ValueError, match="division by zero"):
        tune.evaluate("K // VEC > 1", {"K": 1, "VEC": 0})


# ---- the real kit ------------------------------------------------------------------------

def test_every_tune_json_of_the_kit_is_valid_and_its_reference_declares_the_defaults():
    labs = tune.tunable_labs()
    assert labs, "the kit's labs have tune.json files"
    for lab_dir in labs:
        space = tune.load_space(lab_dir)
        src = tune.reference_source(lab_dir)
        if not src.is_file():                      # a student kit: no reference/
            continue
        found = tune.candidates(space, tune.source_defaults(src))
        assert 2 <= len(found) <= 32, f"{lab_dir.name}: {len(found)} variants (make tune has 10 minutes)"


def test_the_kit_tuning_files_name_declared_parameters():
    for lab_dir in tune.tunable_labs():
        for path in sorted((lab_dir / tune.TUNING_DIR).glob("*.json")):
            data = json.loads(path.read_text())
            assert path.name == tune.device_slug(data["device"]) + ".json"
            assert tune.tuned_parameters(lab_dir, data["device"]) == data["best"]
            ok = [v for v in data["variants"] if v["status"] == "ok"]
            assert data["best_ratio"] == max(v["ratio"] for v in ok) or data["best"] == data["default"]


# ---- tuning files ------------------------------------------------------------------------

def test_device_slug():
    assert tune.device_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert tune.device_slug("NVIDIA H200") == "nvidia-h200"
    with pytest.raises(tune.TuneError):
        tune.device_slug("!!!")


def write_tuning(lab: Path, device: str, best: dict) -> Path:
    path = tune.tuning_path(lab, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"device": device, "best": best, "variants": []}))
    return path


def test_print_defines_follows_the_local_gpu(tmp_path, monkeypatch):
    kit = make_kit(tmp_path, SPACE)
    lab = kit / "labs" / "08-fake"
    write_tuning(lab, "Fake GPU 1", {"K": 4, "VEC": 8})
    monkeypatch.setattr(tune, "local_device", lambda: "Fake GPU 1")
    assert tune.print_defines("08", kit) == "-DTUNE_K=4 -DTUNE_VEC=8"
    assert tune.print_defines("8", kit) == "-DTUNE_K=4 -DTUNE_VEC=8"
    monkeypatch.setattr(tune, "local_device", lambda: "Fake GPU 2")     # no file: the defaults
    assert tune.print_defines("08-fake", kit) == ""
    monkeypatch.setattr(tune, "local_device", lambda: None)             # no GPU
    assert tune.print_defines("08-fake", kit) == ""
    with pytest.raises(tune.TuneError, match="no lab '09'"):
        tune.print_defines("09", kit)


def test_a_stale_or_broken_tuning_file_is_an_error(tmp_path, monkeypatch):
    kit = make_kit(tmp_path, SPACE)
    lab = kit / "labs" / "08-fake"
    monkeypatch.setattr(tune, "local_device", lambda: "Fake GPU")
    path = write_tuning(lab, "Fake GPU", {"K": 4, "SEG": 64})
    with pytest.raises(tune.TuneError, match="TUNE_SEG no longer declared"):
        tune.print_defines("08", kit)
    path.write_text('{"best": {"K": "4"}}')
    with pytest.raises(tune.TuneError, match="NAME: integer"):
        tune.print_defines("08", kit)
    path.write_text("{")
    with pytest.raises(tune.TuneError, match="not valid JSON"):
        tune.print_defines("08", kit)


def test_kernel_defines_in_the_make_command(tmp_path):
    cmd = build.make_command(tmp_path, "reference", tmp_path / "b", defines={"TUNE_K": 8, "TUNE_VEC": 4})
    assert cmd[-1] == "KERNEL_DEFINES=-DTUNE_K=8 -DTUNE_VEC=4"
    assert build.make_command(tmp_path, "reference", tmp_path / "b", defines={})[-1] == "KERNEL_DEFINES="
    assert not any(a.startswith("KERNEL_DEFINES") for a in build.make_command(tmp_path, "reference", tmp_path))
    for bad in ({"TUNE K": 1}, {"TUNE_K": "8; rm -rf /"}, {"TUNE_K": "$(shell id)"}):
        with pytest.raises(ValueError):
            build.make_command(tmp_path, "reference", tmp_path / "b", defines=bad)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_lab_mk_passes_kernel_defines_to_the_kernel_only(tmp_path):
    """make -n of a lab build: KERNEL_DEFINES reach the kernel.o and kernel.ptx lines, not
    the harness's, and are written into flags.stamp (a change rebuilds)."""
    build_dir = tmp_path / "b"
    run = subprocess.run(["make", "--no-print-directory", "-n", "-C", str(KIT_ROOT / "labs" / "01-naive-5pt"),
                          "build", "IMPL=starter", f"BUILD_DIR={build_dir}", "CUDA_ARCH=90",
                          "KERNEL_DEFINES=-DTUNE_PROBE=7"], capture_output=True, text=True, timeout=120)
    if run.returncode != 0 and "kit error" in run.stdout + run.stderr:
        pytest.skip("this machine cannot plan a lab build: " + (run.stdout + run.stderr).strip()[-200:])
    lines = run.stdout.splitlines()
    with_define = [line for line in lines if "-DTUNE_PROBE=7" in line]
    assert any(" -c " in line and "kernel.cu" in line for line in with_define), run.stdout[-2000:]
    assert any(" -ptx " in line for line in with_define)
    assert all("kernel.cu" in line for line in with_define)
    assert "-DTUNE_PROBE=7" in (build_dir / "flags.stamp").read_text()
    # what a build was compiled with is read back from that stamp (the tour's sweeps per pass)
    src = tmp_path / "kernel.cu"
    src.write_text(SOURCE)
    assert tune.built_parameters(build_dir, src) == {"K": 8, "VEC": 4, "PROBE": 7}


def test_built_parameters_are_the_defaults_replaced_by_the_builds_defines(tmp_path):
    src = tmp_path / "kernel.cu"
    src.write_text(SOURCE)
    with pytest.raises(tune.TuneError, match="flags.stamp is missing"):
        tune.built_parameters(tmp_path, src)
    (tmp_path / "flags.stamp").write_text("-std=c++17 -O3 -DSTENCIL_DEBUG_BUILD -gencode arch=compute_90,code=sm_90\n")
    assert tune.built_parameters(tmp_path, src) == {"K": 8, "VEC": 4}           # no KERNEL_DEFINES
    (tmp_path / "flags.stamp").write_text("-std=c++17 -O3 -Wall -DTUNE_K=4 -DTUNE_VEC=8\n")
    assert tune.built_parameters(tmp_path, src) == {"K": 4, "VEC": 8}


# ---- choosing and sweeping ------------------------------------------------------------------

def variant(params, ratio, status="ok", default=False):
    return tune.Variant(params, is_default=default, status=status, ratio=ratio)


def test_choose_best_needs_min_gain_over_the_defaults():
    d = variant({"K": 8}, 3.0, default=True)
    small = variant({"K": 4}, 3.05)
    assert tune.choose_best([d, small], 0.02) == (d, d)              # 1.7 % faster: noise
    big = variant({"K": 6}, 3.2)
    assert tune.choose_best([d, small, big], 0.02) == (big, d)
    broken = variant({"K": 5}, 9.9, status="incorrect")
    assert tune.choose_best([d, broken], 0.02) == (d, d)             # never a failed variant
    assert tune.choose_best([variant({"K": 8}, None, "compile_error", True)], 0.02)[0] is None
    failed_default = variant({"K": 8}, None, "incorrect", True)
    assert tune.choose_best([failed_default, small], 0.02) == (small, failed_default)


LAB_JSON = {"lab": "08-fake", "number": 8, "title": "Fake", "api": "stencil2d_sweep",
            "tolerance": {"rtol": 1e-5, "atol": 1e-6}, "check": {"case_timeout_s": 2, "suite_timeout_s": 3},
            "bench": {"nx": 64, "ny": 64, "nz": 1, "steps": 1, "repetitions": 20, "timeout_s": 10},
            "constraints": {"shared_memory": False, "no_div_rem": False, "forbidden_calls": []},
            "points": {"correctness": 60, "performance": 40}, "targets": {"generic": {"floor": 0.3, "target": 0.6}}}


def test_tune_labs_grades_each_variant_through_the_pipeline(tmp_path, monkeypatch):
    """Each variant is graded by pipeline.grade_lab, stage "build" (in parallel) then "gpu", with
    the build, static, Check and bench stages replaced by fakes: K4-VEC2 does not compile, K8-VEC2
    calls a forbidden function, K4-VEC4 fails a case, K2-VEC8 runs on another stream (the launch
    audit: constraint), K4-VEC8 is fastest and is written; only variants that passed every case
    reach the bench; the defaults are built with KERNEL_DEFINES= (empty), the others with their
    macros."""
    space = {"parameters": {"K": [2, 4, 8], "VEC": [2, 4, 8]}, "constraints": ["2 * VEC * K <= 64"]}
    kit = make_kit(tmp_path, space)
    lab = kit / "labs" / "08-fake"
    (lab / "lab.json").write_text(json.dumps(LAB_JSON))
    monkeypatch.setattr(tune, "KIT_ROOT", kit)
    monkeypatch.setattr(tune, "local_device", lambda: "Fake GPU")
    built, benched = {}, []
    order = []                                    # (variant, stage) in the order the stages ran

    def fake_build(lab_dir, impl, build_dir, arch=None, timeout_s=None, defines=None):
        name = Path(build_dir).name
        built[name] = defines
        order.append((name, "build"))
        Path(build_dir).mkdir(parents=True, exist_ok=True)
        bad = defines == {"TUNE_K": 4, "TUNE_VEC": 2}
        return build.BuildResult("compile_error" if bad else "ok", [], Path(build_dir),
                                 message="kernel.cu(3): error: static_assert failed" if bad else "")

    def fake_static(spec, src, build_dir):
        name = Path(build_dir).name
        order.append((name, "static"))
        forbidden = name == "K8-VEC2"
        return static.StaticResult([StaticCheck("symbols", "fail" if forbidden else "pass", "forbidden",
                                                "fopen: file access is forbidden" if forbidden else "ok")])

    def fake_check(build_dir, suite_timeout_s, seed, case_timeout_s, on_start=None, env=None,
                   bench_timeout_s=None, on_bench=None, take=None):
        # a check that does not time the kernel itself (CheckRun.bench None): the bench program below does
        name = Path(build_dir).name
        order.append((name, "cases"))
        bad = name == "K4-VEC4"
        cases = [checkrun.CaseResult("passes", 0, "nx=1000", "pass"),
                 checkrun.CaseResult("seams", 1, "nx=496", "fail" if bad else "pass", "cell (3, 4)")]
        return checkrun.CheckRun(cases, seed, "ok", exit_status=1 if bad else 0)

    ratios = {"default": 0.5, "K4-VEC8": 0.6, "K2-VEC8": 0.9, "K2-VEC2": 0.3, "K2-VEC4": 0.4}

    def fake_bench(build_dir, timeout_s, seed, env=None):
        name = Path(build_dir).name
        order.append((name, "bench"))
        benched.append(name)
        r = ratios[name]
        on_stream = name != "K2-VEC8"                      # one variant launches on another stream
        audit = {"status": "ok", "calls": 3, "launches": [{
            "launcher": "stencil2d_sweep", "kind": "kernel", "name": "k", "on_launcher_stream": on_stream,
            "stream": 7 if on_stream else 0, "count": 3, "grid": [64, 64, 1], "block": [32, 8, 1],
            "static_smem": 0, "dynamic_smem": 0, "registers": 16}]}
        return bench.BenchRun("ok", {"device": "Fake GPU", "gbps": r * 3000, "copy_gbps": 3000.0, "ms_median": 1.0,
                                     "ratio": r, "output_ok": True, "audit": audit})

    monkeypatch.setattr(build, "build", fake_build)
    monkeypatch.setattr(static, "run_static", fake_static)
    monkeypatch.setattr(checkrun, "run_check", fake_check)
    monkeypatch.setattr(bench, "run_bench", fake_bench)
    (done,) = tune.tune_labs([lab], seed=5, jobs=2, log=lambda *a: None)
    assert built["default"] == {}
    assert built["K4-VEC8"] == {"TUNE_K": 4, "TUNE_VEC": 8}
    for name in built:                                # the pipeline's order, for every variant
        mine = [stage for n, stage in order if n == name]
        assert mine in (["build"], ["build", "static"], ["build", "static", "cases"],
                        ["build", "static", "cases", "bench"]), (name, mine)
    assert sorted(benched) == ["K2-VEC2", "K2-VEC4", "K2-VEC8", "K4-VEC8", "default"]
    by_name = {v.name: v for v in done.variants}
    assert by_name["K4-VEC2"].status == "compile_error" and "static_assert" in by_name["K4-VEC2"].message
    assert by_name["K8-VEC2"].status == "forbidden" and "fopen" in by_name["K8-VEC2"].message
    assert by_name["K4-VEC4"].status == "incorrect" and "seams" in by_name["K4-VEC4"].message
    assert by_name["K2-VEC8"].status == "constraint" and "another stream" in by_name["K2-VEC8"].message
    assert done.best.name == "K4-VEC8" and done.default.name == "default"
    data = json.loads((lab / "tuning" / "fake-gpu.json").read_text())
    assert data["best"] == {"K": 4, "VEC": 8} and data["default"] == {"K": 8, "VEC": 4}
    assert data["best_ratio"] == 0.6 and data["seed"] == 5
    if pictures.plot.pyplot() is not None:                  # the pictures of the sweep and of its tuning file
        assert pictures.draw_sweep(done, tmp_path / "s.png") == tmp_path / "s.png"
        assert pictures.draw_devices("08", ["Fake GPU"], tmp_path / "d.png", lab.parent.parent) == tmp_path / "d.png"
        for name in ("s.png", "d.png"):
            assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {v["status"] for v in data["variants"]} == {"ok", "compile_error", "forbidden", "incorrect",
                                                        "constraint"}
    text = tune.render(done)
    assert "best: K4-VEC8 at 0.600 of copy, 1.20x the defaults K8-VEC4 (0.500)" in text
    assert "wrote " in text
    assert tune.print_defines("08", kit) == "-DTUNE_K=4 -DTUNE_VEC=8"


def test_tune_labs_without_a_gpu_refuses_before_building(tmp_path, monkeypatch):
    kit = make_kit(tmp_path, SPACE)
    monkeypatch.setattr(tune, "local_device", lambda: None)
    monkeypatch.setattr(build, "build", lambda *a, **k: pytest.fail("built without a GPU"))
    with pytest.raises(tune.TuneError, match="no GPU"):
        list(tune.tune_labs([kit / "labs" / "08-fake"], log=lambda *a: None))


def test_draw_devices_needs_the_tuning_files(tmp_path, monkeypatch):
    kit = make_kit(tmp_path, SPACE)
    with pytest.raises(tune.TuneError, match="no tuning file"):
        pictures.draw_devices("08", ["Fake GPU"], tmp_path / "x.png", kit)


@pytest.mark.parametrize("path", sorted(KIT_ROOT.glob("labs/*/tuning/*.json")),
                         ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_a_recorded_sweep_chooses_and_writes_its_tuning_file_again(path, tmp_path):
    """Each committed tuning file, its variants fed back as a finished sweep: the same best and
    defaults are chosen, and the file written is the committed one (the date and nvcc aside)."""
    recorded = json.loads(path.read_text())
    variants = [tune.Variant(**{k: v for k, v in r.items() if k != "default"}, is_default=r["default"])
                for r in recorded["variants"]]
    done = tune.LabSweep(recorded["lab"], recorded["device"], recorded["seed"], variants,
                          min_gain=recorded["min_gain"])
    done.best, done.default = tune.choose_best(variants, done.min_gain)
    assert (done.best.params, done.default.params) == (recorded["best"], recorded["default"])
    written = json.loads(tune.write_tuning(tmp_path, done).read_text())
    assert written["date"] and isinstance(written["nvcc"], str)
    written.update(date=recorded["date"], nvcc=recorded["nvcc"])
    assert json.dumps(written, indent=1) + "\n" == path.read_text()
