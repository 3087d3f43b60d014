"""grade.py figures: every marked figure of the kit's documents equals its recording in handouts/data."""

import argparse
import datetime
import json
import re
import warnings

import pytest

from conftest import KIT_ROOT
from stencil_grader.base.files import write_json
from stencil_grader.base.files import display_path
from stencil_grader.instructor import commands, figures, records, tour

T0 = datetime.datetime(2026, 11, 23, 10, 0, tzinfo=datetime.timezone.utc)
DEVICE = {"name": "Test GPU", "compute_capability": "9.0", "sm_count": 132, "sm_clock_max_mhz": 1980.0,
          "driver": "999.1", "cuda": "13.0"}


# ------------------------------------------------------------------ the kit itself

def test_the_kit_quotes_its_recordings():
    result = figures.run()
    problems = result.errors + [f"{p.file}:{p.line}: <!-- fig {p.spec} -->: text {p.old.strip()!r}, "
                                f"recording {p.new.strip()!r}" for p in result.differences]
    assert not problems, ("figures differ from their recordings (python3 grader/grade.py figures rewrites "
                          "them):\n" + "\n".join(problems))
    assert len(result.places) > 100, "the kit's measured figures should all be marked"
    for line in result.warnings():
        if " is provisional " in line:               # shown by pytest -rw; never a pass or a fail
            warnings.warn(line)


def test_every_recording_is_valid_and_names_one_gpu_per_folder():
    recs = figures.load_recordings()
    assert {slug for slug, _ in recs.records} >= {"h100", "h200"}
    assert recs.device("h100") == "NVIDIA H100 80GB HBM3" and recs.device("h200") == "NVIDIA H200"


def test_the_handouts_follow_the_recording_not_a_typed_figure():
    """The naive 3D figure reads the same everywhere: every copy is a marker on one recording."""
    recs = figures.load_recordings()
    naive = figures.figure("h100/tour 05/naive_3d ratio", recs).text
    for name in ("handouts/05-z-coarsening.md", "handouts/06-register-tiling.md"):
        text = (KIT_ROOT / name).read_text()
        assert "h100/tour 05/naive_3d" in text, f"{name} quotes the naive 3D kernel without a marker"
    assert "<!-- figures h100/tour 3d -->" in (KIT_ROOT / "README.md").read_text()
    text = (KIT_ROOT / "handouts" / "05-z-coarsening.md").read_text()
    assert f"<!-- fig h100/tour 05/naive_3d ratio -->{naive}<!-- /fig -->" in text
    assert "<!-- MEASURED" not in "".join(p.read_text() for p in figures.default_files())


# ------------------------------------------------------------------ recordings for the tests below

def _tour_record(provisional=False, rows=None):
    bench = lambda ms, gbps, steps=1: {"ms_median": ms, "steps": steps, "gbps": gbps, "copy_gbps": 3000.0,  # noqa
                                       "ratio": gbps / 3000.0, "repetitions": 20}
    made = tour.tour_rows([("01-naive-5pt", "reference", "lab 1", bench(0.5, 2000.0)),
                           ("02-shared-tiling", "reference", "lab 2", bench(0.4, 2500.0)),
                           ("04-max-smem", "reference", "lab 4", bench(2.4, 3000.0, steps=8))],
                          "2D, 16 x 8 grid", "2d")
    record = tour.record_tour(made, [{"id": "2d", "title": "2D, 16 x 8 grid", "grid": [16, 8, 1],
                                      "scaled_down": False}], dict(DEVICE), T0)
    record["provisional"] = provisional
    if provisional:
        record["source"] = "transcribed for a test"
    if rows is not None:
        record["rows"] = [r for r in record["rows"] if r["id"] in rows]
    return record


def _data(tmp_path, **records):
    """A data folder: records["t100_tour"] = record -> tmp/data/t100/tour.json."""
    root = tmp_path / "data"
    for key, record in records.items():
        slug, name = key.split("_")
        write_json(root / slug / f"{name}.json", record)
    return root


def _md(tmp_path, text, name="doc.md"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------ inline markers

def test_inline_markers_are_rewritten_and_checked(tmp_path):
    data = _data(tmp_path, t100_tour=_tour_record())
    doc = _md(tmp_path, "Lab 1 reaches <!-- fig t100/tour 01/reference ratio -->0.99<!-- /fig --> of copy, on\n"
                        "a <!-- fig t100/tour device.name -->?<!-- /fig --> of "
                        "<!-- fig t100/tour date -->?<!-- /fig --> (<!-- fig t100/tour 01/reference gbps :,.1f -->"
                        "x<!-- /fig --> GB/s).\n")
    result = figures.run([doc], data)
    assert not result.errors and len(result.places) == 4 and len(result.differences) == 4
    status, text = figures.report(result, check=True)
    assert status == 1 and "doc.md:1: <!-- fig t100/tour 01/reference ratio -->: the text says '0.99', " \
                           "the recording says '0.67'" in text
    status, _ = figures.report(result, check=False)
    assert status == 0
    figures.write(result)
    assert doc.read_text() == ("Lab 1 reaches <!-- fig t100/tour 01/reference ratio -->0.67<!-- /fig --> of copy, "
                               "on\na <!-- fig t100/tour device.name -->Test GPU<!-- /fig --> of "
                               "<!-- fig t100/tour date -->2026-11-23<!-- /fig --> "
                               "(<!-- fig t100/tour 01/reference gbps :,.1f -->2,000.0<!-- /fig --> GB/s).\n")
    again = figures.run([doc], data)
    assert figures.report(again, check=True)[0] == 0 and not again.rewritten     # idempotent


@pytest.mark.parametrize("spec, text", [
    ("t100/tour 04/reference ms_per_sweep", "0.300"),          # 2.4 ms per call of 8 sweeps
    ("t100/tour 04/reference ms_median", "2.400"),
    ("t100/tour 02/reference step_speedup", "1.25"),
    ("t100/tour 02/reference gbps*9/8 :.0f", "2812"),
    ("t100/tour 9000/copy_gbps :.2f", "3.00"),
    ("t100/tour 01/reference ratio*100 :.0f", "67"),
    ("t100/tour device.sm_count", "132"),
    ("t100/tour 01/reference kernel", "lab 1"),
])
def test_fields_arithmetic_and_formats(tmp_path, spec, text):
    recs = figures.load_recordings(_data(tmp_path, t100_tour=_tour_record()))
    assert figures.figure(spec, recs).text == text


@pytest.mark.parametrize("spec, message", [
    ("t100/tour 09/reference ratio", r"has no row 09/reference \(rows: 01/reference, 02/reference, 04/reference\)"),
    ("t100/tour 01/reference speed", r"has no field 'speed'"),
    ("t200/tour date", r"no recording t200/tour .*recordings: t100/tour"),
    ("t100/tour 01/reference ratio :.3q", r"'\.3q' is not a format specification"),
    ("t100/tour 01/reference kernel :.2f", r"kernel is text"),
    ("t100 ratio", r"'t100' is not a source"),
    ("t100/tour a b c", r"an inline marker is <!-- fig SOURCE \[ROW\] FIELD \[:FORMAT\] -->"),
    ("t100/tour 01/reference ratio^2", r"'ratio\^2' is not a field"),
])
def test_bad_markers_say_what_is_wrong(tmp_path, spec, message):
    recs = figures.load_recordings(_data(tmp_path, t100_tour=_tour_record()))
    with pytest.raises(records.RecordError, match=message):
        figures.figure(spec, recs)


def test_a_final_recording_may_not_lack_a_quoted_figure(tmp_path):
    record = _tour_record(rows={"01/reference"})
    record["rows"][0]["gbps"] = None
    recs = figures.load_recordings(_data(tmp_path, t100_tour=record))
    with pytest.raises(records.RecordError, match="no row 02/reference"):
        figures.figure("t100/tour 02/reference ratio", recs)
    with pytest.raises(records.RecordError, match="gbps is null: the run did not measure it"):
        figures.figure("t100/tour 01/reference gbps", recs)


def test_a_provisional_recording_renders_what_it_lacks_as_not_measured(tmp_path):
    record = _tour_record(provisional=True, rows={"01/reference"})
    record["rows"][0]["gbps"] = None
    data = _data(tmp_path, t100_tour=record)
    doc = _md(tmp_path, "a <!-- fig t100/tour 02/reference ratio -->1.0<!-- /fig --> b "
                        "<!-- fig t100/tour 01/reference gbps -->2000<!-- /fig --> c "
                        "<!-- fig t100/tour 01/reference ratio -->0.67<!-- /fig -->\n")
    result = figures.run([doc], data)
    assert not result.errors
    assert [p.new for p in result.places] == ["not measured", "not measured", "0.67"]
    said = result.warnings()
    assert any("t100/tour.json is provisional (transcribed for a test): 3 marker(s)" in w for w in said)
    assert sum("not measured:" in w for w in said) == 2
    status, text = figures.report(result, check=True)
    assert status == 1 and "warning:" in text           # the two stale texts differ; warnings are no failure
    figures.write(result)
    status, text = figures.report(figures.run([doc], data), check=True)
    assert status == 0 and "warning: " in text and "all 3 marked figures match" in text


def test_a_marker_may_not_start_a_line(tmp_path):
    """CommonMark: a line that starts with <!-- begins an HTML block, even inside a paragraph."""
    data = _data(tmp_path, t100_tour=_tour_record())
    doc = _md(tmp_path, "The kernel reaches\n<!-- fig t100/tour 01/reference ratio -->0.67<!-- /fig --> of copy.\n"
                        "- a list item\n  <!-- fig t100/tour 01/reference ratio -->0.67<!-- /fig --> too\n")
    result = figures.run([doc], data)
    assert [e.split(": ", 1)[0] for e in result.errors] == [f"{display_path(doc)}:2", f"{display_path(doc)}:4"]
    assert all("put a word before it" in e for e in result.errors)


def test_unmatched_markers_are_errors_and_nothing_is_written(tmp_path):
    data = _data(tmp_path, t100_tour=_tour_record())
    doc = _md(tmp_path, "x <!-- fig t100/tour 01/reference ratio -->0.5 and no end\n\n"
                        "y <!-- fig t100/tour date -->?<!-- /fig -->\n\n<!-- figures t100/tour 2d -->\nno end\n")
    before = doc.read_text()
    result = figures.run([doc], data)
    assert len(result.errors) == 2 and all("without its other half" in e for e in result.errors)
    status, text = figures.report(result, check=False)
    assert status == 1 and "nothing written" in text
    assert doc.read_text() == before


# ------------------------------------------------------------------ tables

def test_a_table_shows_the_rows_asked_for_with_speedups_over_the_rows_shown(tmp_path):
    data = _data(tmp_path, t100_tour=_tour_record())
    doc = _md(tmp_path, "Intro.\n\n<!-- figures t100/tour 2d rows=04/reference,01/reference -->\nold\n"
                        "<!-- /figures -->\n\nAfter.\n")
    result = figures.run([doc], data)
    assert not result.errors
    figures.write(result)
    text = doc.read_text()
    assert text.startswith("Intro.\n\n<!-- figures t100/tour 2d rows=04/reference,01/reference -->\n*`make tour` "
                           "on an Test GPU (compute capability 9.0, 132 SMs; CUDA 13.0, driver 999.1), 2026-11-23")
    assert text.endswith("<!-- /figures -->\n\nAfter.\n") and "old" not in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| kernel (2D, 16 x 8 grid) | ms per sweep | GB/s | fraction of copy | step")
    assert table[1] == "| lab 4 | 0.300 | 3000 | 1.00 | - | 1.00x |"
    assert table[2] == "| lab 1 | 0.500 | 2000 | 0.67 | 0.60x | 0.60x |"      # over the row shown above it
    assert "copy bandwidth 3000 GB/s" in text and "Provisional" not in text
    assert figures.report(figures.run([doc], data), check=True)[0] == 0


def test_a_one_row_table_has_no_speedups(tmp_path):
    recs = figures.load_recordings(_data(tmp_path, t100_tour=_tour_record()))
    body, missing, _ = figures.tour_table("t100/tour 2d rows=02/reference", recs)
    assert missing == [] and "speed-up" not in body and "| lab 2 | 0.400 | 2500 | 0.83 |" in body


def test_a_table_of_a_provisional_recording_says_so(tmp_path):
    recs = figures.load_recordings(_data(tmp_path, t100_tour=_tour_record(provisional=True, rows={"01/reference"})))
    body, missing, _ = figures.tour_table("t100/tour 2d rows=01/reference,02/reference", recs)
    assert "Provisional: transcribed for a test" in " ".join(body.split())
    assert "| 02/reference |" + " not measured |" * 5 in body
    assert len(missing) == 1 and "has no row 02/reference in part 2d" in missing[0]
    with pytest.raises(records.RecordError, match="tables come from tour records"):
        figures.tour_table("t100/check 2d", recs)


# ------------------------------------------------------------------ lab.json targets

def _kit(tmp_path, targets, policy=None):
    lab = tmp_path / "kit" / "labs" / "08-fake-lab"
    lab.mkdir(parents=True)
    raw = {"targets": targets, "check": {"case_timeout_s": 3, "suite_timeout_s": 300}}
    if policy:
        raw["targets_policy"] = policy
    (lab / "lab.json").write_text(json.dumps(raw))
    return tmp_path / "kit"


def test_lab_targets_come_from_lab_json(tmp_path):
    kit = _kit(tmp_path, {"generic": {"floor": 1.0, "target": 1.2}, "Test GPU": {"floor": 0.5, "target": 0.95}},
               {"floor": 1.0, "target": 1.2, "why": "bonus"})
    recs = figures.load_recordings(_data(tmp_path, t100_tour=_tour_record()))
    assert figures.figure("lab/08 generic target", recs, kit).text == "1.20"
    assert figures.figure("lab/08 t100 floor", recs, kit).text == "0.50"          # t100's GPU: Test GPU
    assert figures.figure("lab/08 policy target*100 :.0f", recs, kit).text == "120"
    assert figures.figure("lab/08 check case_timeout_s :g", recs, kit).text == "3"    # the correctness limits
    with pytest.raises(records.RecordError, match=r"lab/07: no labs/07-\*/lab\.json"):
        figures.figure("lab/07 generic floor", recs, kit)
    with pytest.raises(records.RecordError, match="name the table"):
        figures.figure("lab/08 floor", recs, kit)


def test_a_calibration_that_lab_json_no_longer_holds_is_an_error(tmp_path):
    kit = _kit(tmp_path, {"generic": {"floor": 0.3, "target": 0.6}, "Test GPU": {"floor": 0.5, "target": 0.95}})
    record = dict(tour.record_header("calibrate", "grade.py calibrate --runs 3", dict(DEVICE), T0), runs=3,
                  rows=[{"id": "08/reference", "lab": "08-fake-lab", "ratios": [1.0, 1.0, 1.0], "median": 1.0,
                         "floor": 0.5, "target": 0.95, "written": True, "policy": False}])
    data = _data(tmp_path, t100_calibrate=record)
    assert figures.consistency(figures.load_recordings(data), kit) == []
    record["rows"][0]["target"] = 0.9
    data = _data(tmp_path, t100_calibrate=record)
    (problem,) = figures.consistency(figures.load_recordings(data), kit)
    assert "targets for Test GPU are floor 0.5, target 0.95" in problem and "recorded floor 0.5, target 0.9" in problem
    kit_with_policy = _kit(tmp_path / "p", {"generic": {"floor": 1.0, "target": 1.2}},
                           {"floor": 1.0, "target": 1.2, "why": "bonus"})
    assert figures.consistency(figures.load_recordings(data), kit_with_policy) == []   # a policy lab is left alone


# ------------------------------------------------------------------ the recordings themselves

@pytest.mark.parametrize("change, message", [
    (lambda r: r.update(format=99), r"format must be 1"),
    (lambda r: r.update(record="check"), r"record must be \"tour\""),
    (lambda r: r.pop("source"), r"source is missing"),
    (lambda r: r.update(date="23.11.2026"), r"date must be a day, YYYY-MM-DD"),
    (lambda r: r.update(date=None), r"date must be a day"),                   # null only when provisional
    (lambda r: r["device"].update(name=""), r"device must be an object whose name is the GPU's name"),
    (lambda r: r["rows"].append(dict(r["rows"][0])), r"the id 01/reference appears twice"),
    (lambda r: r["rows"][0].update(part="3d"), r"row 01/reference: part \"3d\" is not one of the parts \(2d\)"),
])
def test_a_bad_recording_is_refused_with_its_file_and_key(tmp_path, change, message):
    record = _tour_record()
    change(record)
    data = _data(tmp_path, t100_tour=record)
    with pytest.raises(records.RecordError, match=message) as err:
        figures.load_recordings(data)
    assert "t100/tour.json" in str(err.value)


def test_one_folder_is_one_gpu(tmp_path):
    other = dict(tour.record_header("check", "test", dict(DEVICE, name="Other GPU"), T0), rows=[])
    data = _data(tmp_path, t100_tour=_tour_record(), t100_check=other)
    with pytest.raises(records.RecordError, match=r"its records name different GPUs \(Other GPU, Test GPU\)"):
        figures.load_recordings(data)


def test_the_command_checks_and_rewrites(tmp_path, capsys):
    data = _data(tmp_path, t100_tour=_tour_record())
    doc = _md(tmp_path, "x <!-- fig t100/tour 01/reference ratio -->0.1<!-- /fig -->\n")
    args = argparse.Namespace(files=[doc], data=data, check=True)
    assert commands.cmd_figures(args) == 1 and "the recording says '0.67'" in capsys.readouterr().err
    assert doc.read_text().count("0.1") == 1                                   # --check changes nothing
    assert commands.cmd_figures(argparse.Namespace(files=[doc], data=data, check=False)) == 0
    assert "0.67" in doc.read_text() and "rewrote" in capsys.readouterr().out
    assert commands.cmd_figures(args) == 0


# ------------------------------------------------------------------ sources, arithmetic, one copy figure

def test_a_recorded_run_quotes_one_copy_bandwidth_and_says_what_it_is_the_median_of():
    """Every table of one recorded tour names the same copy bandwidth (the record's), whichever rows it shows."""
    recs = figures.load_recordings()
    tour_copy = recs.get("h100", "tour").data["copy_gbps"]
    found = {}
    for path in figures.default_files():
        for m in re.finditer(r"recorded in `(handouts/data/[^`]+)`; copy bandwidth (\d+) GB/s, the median of its "
                             r"(\d+) bench runs", path.read_text()):
            found.setdefault(m.group(1), set()).add((m.group(2), m.group(3)))
    assert found["handouts/data/h100/tour.json"] == {(f"{tour_copy:.0f}", "14")}
    assert all(len(v) == 1 for v in found.values()), found


def test_tuning_files_are_a_source(tmp_path):
    recs = figures.load_recordings()
    tuned = json.loads((KIT_ROOT / "labs" / "05-z-coarsening" / "tuning" / "nvidia-h100-80gb-hbm3.json").read_text())
    one = next(v for v in tuned["variants"] if v["params"] == {"ROWS_PER_THREAD": 1, "PLANES_PER_BLOCK": 32})
    assert figures.figure("tune/05 h100:ROWS_PER_THREAD=1,PLANES_PER_BLOCK=32 ratio :.3f", recs).text \
        == f"{one['ratio']:.3f}"
    assert figures.figure("tune/05 h100 variants", recs).text == str(len(tuned["variants"]))
    total = sum(len(json.loads(p.read_text())["variants"])
                for p in KIT_ROOT.glob("labs/*/tuning/nvidia-h100-80gb-hbm3.json"))
    assert figures.figure("tune/all h100 variants", recs).text == str(total)
    for spec, message in (("tune/05 h100:ROWS_PER_THREAD=3 ratio", "0 variants have"),
                          ("tune/05 h100:ROWS_PER_THREAD=2 ratio", "3 variants have"),
                          ("tune/05 ratio", "name the GPU"),
                          ("tune/99 h100 ratio", "no labs/99-")):
        with pytest.raises(records.RecordError, match=message):
            figures.figure(spec, recs)


def test_a_field_may_divide_another_and_be_offset(tmp_path):
    assert figures.format_value(3.29, "ratio", "-1*100", ".0f", repr(4.51)) == "37"
    recs = figures.load_recordings()
    assert figures.figure("h100/notes 08/edge_only defaults_ratio/ratio-1*100 :.0f", recs).text == "37"
    with pytest.raises(records.RecordError, match="has no field"):
        figures.figure("h100/notes 08/edge_only nothing/ratio", recs)


def test_development_notes_are_always_provisional_and_counted(tmp_path):
    rec = {"record": "notes", "format": records.RECORD_FORMAT, "provisional": False, "source": "typed",
           "date": "2026-11-25", "device": {"name": "G"}, "rows": []}
    assert any("provisional" in p for p in records.validate_record(rec, tmp_path / "notes.json"))
    rec["provisional"] = True
    assert records.validate_record(rec, tmp_path / "notes.json") == []
    said = "\n".join(figures.run().warnings())
    assert "notes.json: " in said and "development notes" in said


def test_the_profile_record_is_make_profiles_analysis_of_the_recorded_inputs(tmp_path, capsys):
    """grade.py record-profile of tests/python/data/ncu: the committed handouts/data/h100/profile.json
    (the kit's version and the findings' wording aside), each row's figures make profile's analysis."""
    from stencil_grader.student import profile
    inputs = sorted((KIT_ROOT / "tests" / "python" / "data" / "ncu").glob("*.json"))
    out = tmp_path / "profile.json"
    assert commands.cmd_record_profile(argparse.Namespace(inputs=inputs, out=out)) == 0
    assert f"wrote {out}: {len(inputs)} profiled runs on NVIDIA H100 80GB HBM3, 2026-11-25" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert records.validate_record(record, out) == []
    row = next(r for r in record["rows"] if r["id"] == "01/diag_uncoalesced")
    again = profile.analyse(json.loads(inputs[[p.name for p in inputs].index("01-naive-5pt--diag_uncoalesced.json")]
                                       .read_text()), profile.load_rules())
    assert row["figures"]["gld_sectors_per_request"] == again["kernels"][0]["figures"]["gld_sectors_per_request"]
    committed = json.loads((KIT_ROOT / "handouts" / "data" / "h100" / "profile.json").read_text())
    for rec in (record, committed):
        rec.pop("kit")
        for r in rec["rows"]:
            r.pop("findings")
    assert record == committed
    assert commands.cmd_record_profile(argparse.Namespace(inputs=[tmp_path / "none.json"], out=out)) == 1
    assert "none.json: cannot read" in capsys.readouterr().err


def test_kernel_comments_teach_and_quote_no_timing():
    """Starter and reference kernels' comments quote no bandwidth, ratio of copy or time (those are recordings)."""
    from stencil_grader.grading.source import strip_source
    timing = re.compile(r"\d[\d,]*(\.\d+)?\s*(GB/s|TB/s|ms per)|\b[0-4]\.\d{2,3}\b[^\n]{0,30}\b(of (the )?copy|x the copy)"
                        r"|\b\d\.\d+ x the copy|\b(measured|reached)\b[^\n.]{0,40}\b[0-4]\.\d\d\b")
    found = []
    for path in sorted(KIT_ROOT.glob("reference/**/kernel.cu")) + sorted(KIT_ROOT.glob("starter/*/kernel.cu")):
        text = path.read_text()
        code = strip_source(text)[0]
        comments = "".join(c if c != k else " " for c, k in zip(text, code))    # the comments alone
        for m in timing.finditer(comments):
            found.append(f"{path.relative_to(KIT_ROOT)}: {comments[max(0, m.start() - 30):m.end() + 10]!r}")
    assert not found, "\n".join(found)


def test_record_archs_puts_the_recorded_builds_check_records_together_again(tmp_path, capsys):
    """handouts/data/h100/archs.json split back into one check record per build (its LABEL=FILE
    arguments): grade.py record-archs writes the recorded file again."""
    recorded = json.loads((KIT_ROOT / "handouts" / "data" / "h100" / "archs.json").read_text())
    pairs = []
    for build in recorded["builds"]:
        rows = [{k: v for k, v in r.items() if k != "build"} | {"id": r["id"].split("@")[0]}
                for r in recorded["rows"] if r["build"] == build["label"]]
        run = {k: v for k, v in recorded.items() if k not in ("builds", "rows")} | {
            "record": "check", "source": "grade.py record-check", "impl": "reference", "rows": rows,
            "device": dict(recorded["device"], cuda=build["cuda"])}
        (tmp_path / f"{build['label']}.json").write_text(json.dumps(run))
        pairs.append(f"{build['label']}={tmp_path / (build['label'] + '.json')}")
    out = tmp_path / "h100" / "archs.json"
    assert commands.cmd_record_archs(argparse.Namespace(out=out, runs=pairs)) == 0
    assert f"recorded 56 rows of 7 builds: {out}" in capsys.readouterr().out
    assert out.read_text() == (KIT_ROOT / "handouts" / "data" / "h100" / "archs.json").read_text()
    with pytest.raises(commands.UsageError, match="give LABEL=FILE"):
        commands.cmd_record_archs(argparse.Namespace(out=out, runs=["compute_75"]))
