"""The optimisation tour's rows (declared by the labs), its arithmetic, its recorded runs, and the
calibration rule (no GPU needed)."""

import json
import re
import shutil

import pytest

from conftest import KIT_ROOT
from stencil_grader.base import labspec
from stencil_grader.grading import score
from stencil_grader.instructor import figures, pictures, records, roofs, tour, tune


def _bench(ms, steps=1, gbps=1000.0, copy=2000.0):
    return {"ms_median": ms, "steps": steps, "gbps": gbps, "copy_gbps": copy, "ratio": gbps / copy,
            "device": "Test GPU", "cc": "9.0", "sm_count": 132, "repetitions": 20}


def test_speedups_compare_time_per_sweep():
    rows = tour.tour_rows([
        ("01", "reference", "one", _bench(2.0)),
        ("02", "reference", "two", _bench(1.0)),
        ("04", "reference", "four", _bench(4.0, steps=8)),   # 0.5 ms per sweep
    ])
    assert [r.ms_per_sweep for r in rows] == [2.0, 1.0, 0.5]
    assert rows[0].step_speedup is None and rows[0].cumulative_speedup == 1.0
    assert rows[1].step_speedup == pytest.approx(2.0)
    assert rows[2].step_speedup == pytest.approx(2.0)
    assert rows[2].cumulative_speedup == pytest.approx(4.0)
    assert (rows[2].steps, rows[2].ms_median) == (8, 4.0)


def test_render_names_device_and_every_row():
    rows = tour.tour_rows([("01", "reference", "lab 1", _bench(2.0)), ("02", "reference", "lab 2", _bench(1.0))])
    text = tour.render(rows, "Test GPU")
    assert "Test GPU" in text and "lab 1" in text and "2.00x" in text
    md = tour.render(rows, "Test GPU", markdown=True)
    assert md.count("\n|---") == 1 and "| lab 2 |" in md


def test_each_part_has_its_own_speedups_and_table():
    rows = (tour.tour_rows([("01", "reference", "lab 1", _bench(2.0)), ("02", "reference", "lab 2", _bench(1.0))],
                           "2D, 16 x 8 grid", "2d")
            + tour.tour_rows([("05", "naive", "naive 3D", _bench(3.0)), ("05", "reference", "lab 5", _bench(1.5))],
                             "3D, 8 x 8 x 8 grid", "3d"))
    assert [r.part for r in rows] == ["2D, 16 x 8 grid"] * 2 + ["3D, 8 x 8 x 8 grid"] * 2
    assert rows[2].step_speedup is None and rows[2].cumulative_speedup == 1.0   # not over lab 2's row
    assert rows[3].cumulative_speedup == pytest.approx(2.0)
    md = tour.render(rows, "Test GPU", markdown=True)
    assert md.count("\n|---") == 2 and "**3D, 8 x 8 x 8 grid**" in md and "first row of each part" in md
    text = tour.render(rows, "Test GPU")
    assert text.index("2D, 16 x 8 grid:") < text.index("lab 2") < text.index("3D, 8 x 8 x 8 grid:")


def test_row_ids_name_the_lab_and_the_implementation_folder():
    assert tour.row_id("05-z-coarsening", "reference/tour/05-z-coarsening/naive_3d") == "05/naive_3d"
    assert tour.row_id("03-boundary-neat", "starter") == "03/starter"
    ids = [tour.row_id(r.lab, r.impl) for part in tour.tour_parts() for r in part.rows]
    assert len(ids) == len(set(ids)), "two rows of the tour share an id: the handouts could not address them"


def test_the_labs_declare_the_tour_rows_and_their_parts():
    parts = tour.tour_parts()
    assert [(p.id, p.dims) for p in parts] == [("2d", "2D"), ("3d", "3D"), ("lab8", "2D, lab 8's designs")]
    ids = {p.id: [tour.row_id(r.lab, r.impl) for r in p.rows] for p in parts}
    assert ids == {"2d": ["01/reference", "02/reference", "03/starter", "03/reference", "04/reference", "08/reference"],
                   "3d": ["05/naive_3d", "05/book_shared_tile_t8", "05/book_z_coarsening_t32", "05/reference",
                          "06/book_register_tiling_t32", "06/reference"],
                   "lab8": ["08/starter", "08/good_overlapped_tile"]}
    for part in parts:
        for row in part.rows:                       # every label and sweep count resolves on the defaults
            defaults = tune.source_defaults(KIT_ROOT / row.impl / "kernel.cu") if "/" in row.impl else \
                tune.source_defaults(KIT_ROOT / row.impl / row.lab / "kernel.cu")
            label, fused = row.resolve(defaults)
            assert "{" not in label and fused >= 1
    lab8 = next(r for r in parts[0].rows if r.lab.startswith("08"))
    label, fused = lab8.resolve({"K": 4})
    assert fused == 4 and label.endswith("4 sweeps per pass")
    with pytest.raises(tour.TourError, match="names K, which its build does not declare"):
        lab8.resolve({})


def _tour_kit(tmp_path, text):
    """A kit with lab 1's lab.json and a reference/tour/01-naive-5pt/tour.json holding `text`."""
    lab = tmp_path / "labs" / "01-naive-5pt"
    lab.mkdir(parents=True)
    shutil.copy(KIT_ROOT / "labs" / "01-naive-5pt" / "lab.json", lab / "lab.json")
    (tmp_path / "reference" / "tour" / "01-naive-5pt").mkdir(parents=True)
    (tmp_path / "reference" / "tour" / "01-naive-5pt" / "tour.json").write_text(text)
    return tmp_path


@pytest.mark.parametrize("text, words", [
    ("{", "not valid JSON"),
    ('{"rows": {}}', "with \"rows\" (a list)"),
    ('{"rows": [], "colour": 1}', "with \"rows\" (a list)"),
    ('{"rows": [{"impl": "reference"}]}', "rows[0] must be"),
    ('{"rows": [{"impl": "../../etc", "kernel": "x"}]}', "a folder beside tour.json"),
    ('{"rows": [{"impl": "reference", "kernel": "x", "part": "4d"}]}', "part '4d' is not a part"),
    ('{"rows": [{"impl": "reference", "kernel": "x", "sweeps_per_pass": 0}]}', "an integer >= 1"),
    ('{"parts": ["x"], "rows": []}', "\"parts\" must be an object"),
])
def test_a_malformed_tour_file_is_refused_with_its_key(tmp_path, text, words):
    kit = _tour_kit(tmp_path, text)
    with pytest.raises(tour.TourError, match=re.escape(words)):
        tour.tour_parts(kit)


def test_a_lab_adds_a_part_and_a_folder_row(tmp_path):
    kit = _tour_kit(tmp_path, json.dumps({"parts": {"own": "2D, mine"}, "rows": [
        {"impl": "mine", "kernel": "mine: {B} blocks", "part": "own", "sweeps_per_pass": "B"},
        {"impl": "reference", "kernel": "lab 1"}]}))
    two_d, own = tour.tour_parts(kit)
    assert (two_d.id, [r.impl for r in two_d.rows]) == ("2d", ["reference"])
    (row,) = own.rows
    assert (own.id, own.dims, row.impl) == ("own", "2D, mine", "reference/tour/01-naive-5pt/mine")
    assert row.resolve({"B": 3}) == ("mine: 3 blocks", 3)


def _fake_tour(monkeypatch, missing=(), k=8):
    timed = []

    def fake_measure(lab, impl, seed=None):
        timed.append((lab, impl))
        three_d = lab[:2] in ("05", "06")
        data = dict(_bench(1.0, steps=16 if lab.startswith("08") else 1), nx=8, ny=8, nz=8 if three_d else 1,
                    scaled_down=False)
        src = KIT_ROOT / impl / "kernel.cu" if "/" in impl else KIT_ROOT / impl / lab / "kernel.cu"
        params = tune.source_defaults(src)
        if "K" in params:
            params["K"] = k                          # what a tuning file may have chosen
        return data, params

    monkeypatch.setattr(tour, "measure", fake_measure)
    monkeypatch.setattr(tour, "available", lambda lab, impl: (lab, impl) not in missing)
    monkeypatch.setattr(records.gpus, "smi_facts", lambda name: {"driver": "999.1", "sm_clock_max_mhz": 1980.0})
    monkeypatch.setattr(records, "cuda_release", lambda: "13.0")
    return timed


def test_run_tour_skips_rows_this_kit_lacks(monkeypatch):
    last_3d = tour.tour_parts()[1].rows[-1]
    missing = (last_3d.lab, last_3d.impl)
    timed = _fake_tour(monkeypatch, {missing})
    text, _, _ = tour.run_tour()
    every = [(r.lab, r.impl) for part in tour.tour_parts() for r in part.rows]
    assert timed == [r for r in every if r != missing]
    assert "3D, 8 x 8 x 8 grid:" in text and "lab 6 reference" not in text
    assert "2D, lab 8's designs, 8 x 8 grid:" in text


def test_run_tour_writes_a_self_describing_record(monkeypatch, tmp_path):
    _fake_tour(monkeypatch)
    out = tmp_path / "h100" / "tour.json"
    tour.run_tour(out_json=out)
    record = json.loads(out.read_text())
    assert records.validate_record(record, out) == []
    assert record["record"] == "tour" and record["format"] == records.RECORD_FORMAT
    assert record["provisional"] is False and "grade.py tour" in record["source"]
    assert record["device"] == {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 132,
                                "sm_clock_max_mhz": 1980.0, "driver": "999.1", "cuda": "13.0"}
    assert record["kit"]["version"] and len(record["date"]) == 10 and record["copy_gbps"] == 2000.0
    assert [p["id"] for p in record["parts"]] == ["2d", "3d", "lab8"]
    rows = {r["id"]: r for r in record["rows"]}
    assert set(rows) == {tour.row_id(r.lab, r.impl) for part in tour.tour_parts() for r in part.rows}
    lab8 = rows["08/reference"]
    assert (lab8["part"], lab8["steps"], lab8["sweeps_per_pass"], lab8["ms_median"]) == ("2d", 16, 8, 1.0)
    assert lab8["kernel"] == "lab 8 reference: temporal blocking, 8 sweeps per pass"
    assert lab8["ms_per_sweep"] == pytest.approx(1.0 / 16)
    for key in ("lab", "impl", "kernel", "gbps", "copy_gbps", "ratio", "step_speedup", "cumulative_speedup",
                "repetitions"):
        assert key in lab8
    # and the renderer reads it: a table of the 3D part and one figure
    recs = figures.load_recordings(tmp_path)
    table, missing, _ = figures.tour_table("h100/tour 3d", recs)
    assert missing == [] and "naive 3D: one thread per cell" in table and "Test GPU" in table
    assert figures.figure("h100/tour 05/reference ratio", recs).text == "0.50"


def test_the_sweeps_per_pass_follow_the_build_that_was_timed(monkeypatch, tmp_path):
    """A tuning file that chose K = 4 for lab 8's reference moves it on the roofline to 9 x 4 / 8."""
    _fake_tour(monkeypatch, k=4)
    out = tmp_path / "tour.json"
    tour.run_tour(out_json=out)
    lab8 = next(r for r in json.loads(out.read_text())["rows"] if r["id"] == "08/reference")
    assert lab8["sweeps_per_pass"] == 4 and lab8["kernel"].endswith("4 sweeps per pass")
    row = tour.tour_rows([("08-temporal-blocking", "reference", "lab 8", _bench(2.0, steps=16), 4)], "2D", "2d")
    assert pictures.roofline_points(row)[0].intensity == pytest.approx(9 * 4 / 8)


def test_built_parameters_are_read_from_the_tour_build(monkeypatch, tmp_path):
    monkeypatch.setattr(tour, "_build_dir", lambda lab, impl: tmp_path)
    with pytest.raises(tour.TourError, match="flags.stamp is missing"):
        tour.built_parameters("08-temporal-blocking", "reference")
    (tmp_path / "flags.stamp").write_text("-O3 -DTUNE_K=4 -DTUNE_SEG=64\n")
    params = tour.built_parameters("08-temporal-blocking", "reference")
    assert (params["K"], params["SEG"], params["VEC"]) == (4, 64, 4)       # VEC: the source's default


def test_3d_rows_build_in_the_tour_directory():
    row = tour.tour_parts()[1].rows[0]
    lab, impl = row.lab, row.impl
    assert tour.available(lab, impl) and tour.available("05-z-coarsening", "reference")
    assert not tour.available("05-z-coarsening", "tests/submissions/05-z-coarsening/no_such_submission")
    assert tour._build_dir(lab, impl) == tour.KIT_ROOT / "build" / "tour" / lab / "naive_3d"
    assert all(tour.available(r.lab, r.impl) for r in tour.tour_parts()[2].rows)


@pytest.mark.parametrize("ratio, floor, target", [(0.719, 0.35, 0.68), (1.0, 0.5, 0.95), (0.2, 0.1, 0.19)])
def test_calibrated_target_rounds_down(ratio, floor, target):
    got_floor, got_target = score.calibrated_target(ratio)
    assert (got_floor, got_target) == (floor, target)
    assert got_target <= ratio and got_floor < got_target


def test_roofline_places_each_row_at_its_intensity():
    rows = tour.tour_rows([("04-max-smem", "reference", "lab 4", _bench(8.0, steps=8, gbps=3000.0)),
                           ("08-temporal-blocking", "reference", "lab 8", _bench(2.0, steps=8, gbps=7200.0), 8)],
                          "2D, 4 x 4 grid", "2d")
    rows += tour.tour_rows([("05-z-coarsening", "reference", "lab 5", _bench(1.0, gbps=2800.0))],
                           "3D, 4 x 4 x 4 grid", "3d")
    points = {p.label: p for p in pictures.roofline_points(rows)}
    assert points["lab 4"].intensity == pytest.approx(9 / 8)           # 9 FLOP per 8 compulsory bytes
    assert points["lab 8"].intensity == pytest.approx(9 * 8 / 8)       # 8 sweeps per pass over DRAM
    assert points["lab 5"].intensity == pytest.approx(13 / 8)          # the 3D 7-point update
    assert points["lab 8"].gflops == pytest.approx(7200.0 * 9 / 8)     # useful GFLOP/s from effective GB/s


def test_roofline_ceilings_of_the_2d_part():
    rows = tour.tour_rows([("04-max-smem", "reference", "lab 4", _bench(8.0, steps=8, gbps=3000.0)),
                           ("08-temporal-blocking", "reference", "lab 8", _bench(2.0, steps=16, gbps=13600.0))],
                          "2D, 4 x 4 grid", "2d")
    rows += tour.tour_rows([("08-temporal-blocking", "reference/tour/08-temporal-blocking/good_overlapped_tile",
                             "tile", _bench(4.0, steps=16, gbps=4000.0))], "2D, lab 8's designs", "lab8")
    counted = next(c for c in roofs.DESIGN_COUNTS if c.row == "08/reference").params
    ceilings, notes = roofs.roofline_ceilings(rows, 132, 1980, params_of=lambda lab, impl: dict(counted))
    got = {c.label: c for c in ceilings}
    assert notes == [] and list(got) == ["fp32 without FMA (2D)", "instruction issue, lab 8 reference",
                                         "shared memory, overlapped tile"]
    assert got["fp32 without FMA (2D)"].gflops == pytest.approx(66908.16 / 2)
    # 132 x 128 x 1.98e9 / (732/64 x 128/112 x 144/128) useful updates/s: 18.2 TB/s effective
    issue = got["instruction issue, lab 8 reference"].gflops
    assert issue == pytest.approx(132 * 128 * 1.98e9 / (732 / 64 * 128 / 112 * 144 / 128) * 9 / 1e9)
    assert issue * 8 / 9 == pytest.approx(18200, rel=2e-3)
    # 132 x 32 x 1.98e9 / (6 x 1.173): 9.5 TB/s effective
    assert got["shared memory, overlapped tile"].gflops * 8 / 9 == pytest.approx(9510, rel=2e-3)
    assert all(c.how for c in ceilings)
    # The measured roof (smem-roof) replaces the datasheet's 128 bytes per clock: 96 of them, 3/4 the ceiling.
    measured, _ = roofs.roofline_ceilings(rows, 132, 1980, params_of=lambda lab, impl: dict(counted),
                                          shared_bytes_per_clock=96.0)
    got_measured = {c.label: c for c in measured}
    assert got_measured["shared memory, overlapped tile (measured roof)"].gflops == pytest.approx(
        got["shared memory, overlapped tile"].gflops * 96 / 128)
    assert got_measured["instruction issue, lab 8 reference"] == got["instruction issue, lab 8 reference"]


def test_roofline_ceilings_left_out_say_why():
    three_d = tour.tour_rows([("05-z-coarsening", "reference", "lab 5", _bench(1.0))], "3D, 4 x 4 x 4 grid", "3d")
    assert roofs.roofline_ceilings(three_d, 132, 1980) == ([], [])        # 9 FLOP per update is 2D's
    lab8 = tour.tour_rows([("08-temporal-blocking", "reference", "lab 8", _bench(2.0, steps=16))], "2D", "2d")
    other = {"K": 4, "VEC": 4, "SEG": 64, "WARPS": 2, "OCC": 8, "AHEAD": 3}   # a tuning file chose these
    ceilings, notes = roofs.roofline_ceilings(lab8, 132, 1980, params_of=lambda lab, impl: other)
    assert [c.label for c in ceilings] == ["fp32 without FMA (2D)"]
    assert len(notes) == 1 and "instruction issue" in notes[0] and "K=4" in notes[0]
    ceilings, notes = roofs.roofline_ceilings(lab8, 132, 1980, params_of=lambda lab, impl: None)
    assert "unknown parameters" in notes[0]


def test_design_counts_match_the_reference_they_were_taken_from():
    # a count taken for parameters the reference no longer has as defaults would never be drawn
    count = next(c for c in roofs.DESIGN_COUNTS if c.row == "08/reference")
    assert tune.source_defaults(KIT_ROOT / "reference" / "08-temporal-blocking" / "kernel.cu") == count.params
    assert roofs.strip_redundancy(**count.params) == pytest.approx(128 / 112 * 144 / 128)
    assert roofs.tile_redundancy(8, 128, 64) == pytest.approx(1.1726, abs=1e-4)    # the handout's table: 1.17


def test_draw_says_why_nothing_was_drawn(monkeypatch, tmp_path):
    rows = tour.tour_rows([("01-naive-5pt", "reference", "lab 1", _bench(1.0))], "2D")
    monkeypatch.setattr(pictures, "path_bars", lambda *a: False)
    assert pictures.draw(rows, "Test GPU", 132, tmp_path / "p.png") == ["(no plots: matplotlib is not installed)"]
    monkeypatch.setattr(pictures, "path_bars", lambda *a: True)
    monkeypatch.setattr(pictures.plot, "max_sm_clock_mhz", lambda: None)
    said = pictures.draw(rows, "Test GPU", 132, tmp_path / "p.png")
    assert said[0].startswith("path: ") and "no roofline" in said[1]


def test_run_tour_with_nothing_to_time_is_an_error(monkeypatch):
    monkeypatch.setattr(tour, "available", lambda lab, impl: False)
    with pytest.raises(tour.TourError, match="nothing to time"):
        tour.run_tour()


# ------------------------------------------------------------------ what a record says about its run

def test_nvidia_smi_facts_pick_the_named_gpu(monkeypatch):
    gpus = records.gpus
    out = "NVIDIA A100, 550.1, 1410\nNVIDIA H100 80GB HBM3, 580.159.04, 1980\n"
    monkeypatch.setattr(gpus.process, "output", lambda argv, timeout_s=30: out)
    assert gpus.smi_facts("NVIDIA H100 80GB HBM3") == {"driver": "580.159.04", "sm_clock_max_mhz": 1980.0}
    assert gpus.smi_facts("Other")["driver"] == "550.1"          # none matches: the first GPU
    monkeypatch.setattr(gpus.process, "output", lambda argv, timeout_s=30: None)
    assert gpus.smi_facts("x") == {"driver": None, "sm_clock_max_mhz": None}   # no nvidia-smi


def test_cuda_release_reads_nvcc(monkeypatch, tmp_path):
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text('#!/bin/sh\necho "Cuda compilation tools, release 13.0, V13.0.88"\n')
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert records.cuda_release() == "13.0"
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "none"))
    assert records.cuda_release() is None


def test_kit_facts_name_the_version(monkeypatch):
    facts = records.kit_facts()
    assert facts["version"] == records.__version__ and set(facts) == {"version", "commit", "modified"}
    # A copy of the tree whose git metadata is missing or stale: the caller names the commit.
    monkeypatch.setenv(records.COMMIT_ENV, "845e99f")
    assert records.kit_facts() == {"version": records.__version__, "commit": "845e99f", "modified": None}


# ------------------------------------------------------------------ make check, recorded

def _report(lab, ratio, device=None, launchers=()):
    device = device or {"name": "Test GPU", "cc": "9.0", "sm_count": 132}
    return {"lab": lab, "impl": "reference", "verdict": "pass", "points": 100.0, "max_points": 100.0,
            "generated_at": "2026-11-23T10:00:00+00:00", "seconds": {"build": 10.0, "check": 2.5},
            "gpu": {"status": "ok", "device": device},
            "correctness": {"passed": 16, "total": 16},
            "performance": {"ratio": ratio, "target": {"table": "Test GPU", "floor": 0.3, "target": 0.6,
                                                       "calibrated": "x", "note": "y"},
                            "bench": {"gbps": ratio * 3000, "copy_gbps": 3000.0, "ms_median": 0.5, "steps": 1,
                                      "launchers": [dict(name=n, ms_median=0.2, gbps=1.0, ratio=r, output_ok=True)
                                                    for n, r in launchers]}}}


def test_record_check_collects_every_lab(monkeypatch):
    monkeypatch.setattr(records.gpus, "smi_facts", lambda name: {"driver": "999.1", "sm_clock_max_mhz": None})
    monkeypatch.setattr(records, "cuda_release", lambda: "13.0")
    reports = [_report("01-naive-5pt", 0.697),
               _report("07-reduction-residual", 1.003, launchers=[("residual_norm2", 0.969), ("jacobi_sweep", 1.04)])]
    record = records.record_check(reports)
    assert records.validate_record(record, KIT_ROOT / "x" / "check.json") == []
    assert record["date"] == "2026-11-23" and record["impl"] == "reference" and record["copy_gbps"] == 3000.0
    assert record["device"]["name"] == "Test GPU" and record["device"]["driver"] == "999.1"
    one, seven = record["rows"]
    assert (one["id"], one["ratio"], one["points"], one["cases_passed"], one["seconds"]) == \
        ("01/reference", 0.697, 100.0, 16, 12.5)
    assert seven["launchers"]["residual_norm2"]["ratio"] == 0.969 and one["launchers"] is None
    assert one["target"] == {"table": "Test GPU", "floor": 0.3, "target": 0.6}


def test_record_check_refuses_what_it_cannot_record():
    with pytest.raises(records.RecordError, match="no report"):
        records.record_check([])
    other = _report("02-shared-tiling", 1.0, device={"name": "Other GPU"})
    with pytest.raises(records.RecordError, match="different GPUs"):
        records.record_check([_report("01-naive-5pt", 0.7), other])
    no_gpu = dict(_report("01-naive-5pt", 0.0), gpu={"status": "no_gpu", "device": None})
    with pytest.raises(records.RecordError, match="no GPU measured 01-naive-5pt"):
        records.record_check([no_gpu])
    old = dict(_report("02-shared-tiling", 1.0), generated_at="2026-11-20T10:00:00+00:00")
    with pytest.raises(records.RecordError, match="not by one make check"):
        records.record_check([_report("01-naive-5pt", 0.7), old])


def test_collect_reports_reads_make_checks_build_folders(tmp_path):
    for lab in ("01-naive-5pt", "02-shared-tiling"):
        (tmp_path / "labs" / lab).mkdir(parents=True)
        (tmp_path / "labs" / lab / "lab.json").write_text("{}")
    build = tmp_path / "build" / "01-naive-5pt" / "reference"
    build.mkdir(parents=True)
    (build / "report.json").write_text(json.dumps(_report("01-naive-5pt", 0.7)))
    assert [r["lab"] for r in records.collect_reports("reference", tmp_path)] == ["01-naive-5pt"]
    (build / "report.json").write_text("{not json")
    with pytest.raises(records.RecordError, match="not valid JSON"):
        records.collect_reports("reference", tmp_path)


# ------------------------------------------------------------------ calibration and a targets policy

def _labs_in(tmp_path, names):
    dirs = []
    for name in names:
        d = tmp_path / "labs" / name
        d.mkdir(parents=True)
        shutil.copy(KIT_ROOT / "labs" / name / "lab.json", d / "lab.json")
        dirs.append(d)
    return dirs


def test_calibrate_leaves_a_lab_with_a_targets_policy_alone(monkeypatch, tmp_path):
    lab1, lab8 = _labs_in(tmp_path, ["01-naive-5pt", "08-temporal-blocking"])
    before = (lab8 / "lab.json").read_text()
    monkeypatch.setattr(labspec, "discover_labs", lambda *a: [lab1, lab8])
    monkeypatch.setattr(tour, "measure", lambda lab, impl, seed=None: (dict(
        _bench(1.0, gbps=7500.0 if lab.startswith("08") else 2100.0, copy=3000.0), device="Test GPU"), {}))
    monkeypatch.setattr(tour, "device_facts", lambda data: {"name": data["device"]})
    out = tmp_path / "data" / "test" / "calibrate.json"
    lines = tour.calibrate(runs=2, out_json=out)
    assert (lab8 / "lab.json").read_text() == before                       # untouched
    assert "08-temporal-blocking" in lines[1] and "targets kept" in lines[1] and "reaches" in lines[1]
    entry = json.loads((lab1 / "lab.json").read_text())["targets"]["Test GPU"]
    assert (entry["floor"], entry["target"], entry["reference_ratio"]) == (0.35, 0.66, 0.7)   # 0.5 and 0.95 x 0.7
    record = json.loads(out.read_text())
    assert records.validate_record(record, out) == []
    rows = {r["id"]: r for r in record["rows"]}
    assert rows["08/reference"]["written"] is False and rows["08/reference"]["policy"] is True
    assert rows["08/reference"]["target"] == 1.2 and rows["08/reference"]["median"] == 2.5
    assert rows["01/reference"]["written"] is True and rows["01/reference"]["ratios"] == [0.7, 0.7]


def test_calibrate_says_when_the_reference_misses_the_policy(monkeypatch, tmp_path):
    (lab8,) = _labs_in(tmp_path, ["08-temporal-blocking"])
    monkeypatch.setattr(labspec, "discover_labs", lambda *a: [lab8])
    monkeypatch.setattr(tour, "measure", lambda lab, impl, seed=None: (dict(_bench(1.0, gbps=3000.0, copy=3000.0)), {}))
    (line,) = tour.calibrate(runs=1)
    assert "falls SHORT of the targets_policy's target" in line


def test_calibrate_lowers_the_generic_table_below_a_new_gpu_s(monkeypatch, tmp_path):
    """A GPU whose reference reaches less than the generic target brings generic down with it."""
    (lab1,) = _labs_in(tmp_path, ["01-naive-5pt"])
    monkeypatch.setattr(labspec, "discover_labs", lambda *a: [lab1])
    monkeypatch.setattr(tour, "measure", lambda lab, impl, seed=None: (dict(
        _bench(1.0, gbps=900.0, copy=3000.0), device="Slow GPU"), {}))         # ratio 0.3
    lines = tour.calibrate(runs=1)
    targets = json.loads((lab1 / "lab.json").read_text())["targets"]
    assert (targets["Slow GPU"]["floor"], targets["Slow GPU"]["target"]) == (0.15, 0.28)
    assert (targets["generic"]["floor"], targets["generic"]["target"]) == (0.15, 0.28)
    assert any("generic lowered to floor 0.15, target 0.28" in line for line in lines)


@pytest.mark.parametrize("slug", ["h100", "h200"])
def test_run_tour_writes_the_recorded_tour_again_from_its_measurements(monkeypatch, tmp_path, slug):
    """handouts/data/SLUG/tour.json, each row's bench figures fed back as the measurements: the record
    written is the recorded one (the kit's version and commit and the rows' labels aside)."""
    import datetime
    recorded = json.loads((KIT_ROOT / "handouts" / "data" / slug / "tour.json").read_text())
    grids = {p["id"]: p for p in recorded["parts"]}

    def fake_measure(lab, impl, seed=None):
        row = next(r for r in recorded["rows"] if (r["lab"], r["impl"]) == (lab, impl))
        part = grids[row["part"]]
        nx, ny, nz = part["grid"]
        data = {k: row[k] for k in ("ms_median", "steps", "gbps", "copy_gbps", "ratio", "repetitions")}
        data.update(nx=nx, ny=ny, scaled_down=part["scaled_down"], **({"nz": nz} if row["part"] == "3d" else {}))
        src = KIT_ROOT / impl / "kernel.cu" if "/" in impl else KIT_ROOT / impl / lab / "kernel.cu"
        params = tune.source_defaults(src)
        if "K" in params:
            params["K"] = row["sweeps_per_pass"]
        return data, params

    monkeypatch.setattr(tour, "measure", fake_measure)
    monkeypatch.setattr(tour, "device_facts", lambda data: dict(recorded["device"]))
    monkeypatch.setattr(tour, "now", lambda: datetime.datetime.fromisoformat(recorded["started_at"]))
    out = tmp_path / slug / "tour.json"
    tour.run_tour(out_json=out)
    written = json.loads(out.read_text())
    for record in (written, recorded):               # labels declared since the recording have moved on
        record.pop("kit")
        for row in record["rows"]:
            row.pop("kernel")
    assert written == recorded


def test_calibrate_writes_the_recorded_calibration_again_from_its_measurements(monkeypatch, tmp_path):
    """handouts/data/h100/calibrate.json, its ratios fed back as the measurements: the record written
    is the recorded one, and each lab.json's H100 entry is the committed one (the date aside)."""
    import datetime
    recorded = json.loads((KIT_ROOT / "handouts" / "data" / "h100" / "calibrate.json").read_text())
    rows = {r["lab"]: r for r in recorded["rows"]}
    labs = _labs_in(tmp_path, list(rows))
    monkeypatch.setattr(labspec, "discover_labs", lambda *a: labs)
    left = {lab: list(r["ratios"]) for lab, r in rows.items()}
    monkeypatch.setattr(tour, "measure", lambda lab, impl, seed=None: (
        dict(_bench(1.0), ratio=left[lab].pop(0), device=recorded["device"]["name"]), {}))
    monkeypatch.setattr(tour, "device_facts", lambda data: dict(recorded["device"]))
    monkeypatch.setattr(tour, "now", lambda: datetime.datetime.fromisoformat(recorded["started_at"]))
    out = tmp_path / "calibrate.json"
    tour.calibrate(runs=recorded["runs"], out_json=out)
    written = json.loads(out.read_text())
    assert {k: v for k, v in written.items() if k != "kit"} == {k: v for k, v in recorded.items() if k != "kit"}
    for lab in labs:
        got = json.loads((lab / "lab.json").read_text())["targets"]
        want = json.loads((KIT_ROOT / "labs" / lab.name / "lab.json").read_text())["targets"]
        for entry in (got, want):
            if recorded["device"]["name"] in entry:
                entry[recorded["device"]["name"]]["calibrated"] = entry[recorded["device"]["name"]]["calibrated"][10:]
        assert got == want, lab.name
