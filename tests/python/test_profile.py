"""`make profile` without a GPU, on Nsight Compute inputs recorded on an H100 (data/ncu/): references clean,
each diagnostic submission's own defect first (expected.json's "profile"); the pieces; a fake ncu."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, GRADE_PY, KIT_ROOT
from stencil_grader.base import labspec
from stencil_grader.base.files import sha256_of
from stencil_grader.grading import sass
from stencil_grader.student import profile
from stencil_grader.student.profile import command, common, counters, ncu
from stencil_grader.student.profile import text as rendering
from stencil_grader.student.profile import rules as rule_table

NCU_DATA = DATA / "ncu"
FIXTURES = sorted(NCU_DATA.glob("*--*.json"))
#: First findings of fixtures that are not diagnostic submissions (lab 3's starter is the modulo
#: baseline its handout starts from).
OTHER_FIRST = {"03-boundary-neat--starter": "div_rem"}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def expected_first(name: str) -> str | None:
    """The rule a fixture's first finding must be: expected.json's "profile" of a diag_* entry."""
    if name in OTHER_FIRST:
        return OTHER_FIRST[name]
    lab, impl = name.split("--")
    table = json.loads((KIT_ROOT / "tests" / "submissions" / lab / "expected.json").read_text())
    return table.get(impl, {}).get("profile")


@pytest.fixture(scope="module")
def rules():
    return rule_table.load_rules()


def test_fixtures_are_there_and_name_their_device():
    assert len(FIXTURES) >= 15, f"expected the recorded fixtures in {NCU_DATA}"
    for path in FIXTURES:
        data = load(path)
        assert data["format"] == common.INPUTS_FORMAT
        assert data["device"] == "NVIDIA H100 80GB HBM3", path.name
        assert re.match(r"\d{4}-\d\d-\d\dT", data["recorded_at"]), path.name
        assert data["ncu_version"].startswith("Version 2025"), path.name
        assert "--clock-control" in data["ncu_command"] and "none" in data["ncu_command"]
        assert data["ncu_raw_csv"].count("\n") >= 3


@pytest.mark.parametrize("path", [p for p in FIXTURES if p.name.split("--")[1].startswith("reference")],
                         ids=lambda p: p.stem)
def test_every_reference_is_clean(path, rules):
    result = profile.analyse(load(path), rules)
    above = [f"{f['rule']} ({f['severity']}): {f['message']}" for f in result["findings"] if f["severity"] != "info"]
    assert not above, f"{path.stem}: a reference must get no finding above info, got {above}"
    assert result["kernels"], "the reference's kernels were profiled"


@pytest.mark.parametrize("path", [p for p in FIXTURES if expected_first(p.stem)], ids=lambda p: p.stem)
def test_each_diagnostic_submission_gets_its_own_defect_first(path, rules):
    result = profile.analyse(load(path), rules)
    assert result["findings"], f"{path.stem}: no finding"
    first = result["findings"][0]
    assert first["rule"] == expected_first(path.stem), \
        f"{path.stem}: first finding {first['rule']}, ranked {[f['rule'] for f in result['findings']]}"
    assert first["severity"] != "info"


def test_every_defect_rule_has_a_diagnostic_submission(rules):
    """Each rule above info, and each of the six defects, is first in a recorded diag_*; each diag_* is recorded."""
    firsts = {expected_first(p.stem) for p in FIXTURES} - {None}
    assert {"uncoalesced", "bank_conflicts", "spills", "smem_occupancy", "div_rem", "redundant_loads"} <= firsts
    defects = {r.id for r in rules.rules if r.severity != "info" and r.mode == "counters"}
    assert defects <= firsts, f"rules without a diagnostic submission: {sorted(defects - firsts)}"
    diag_dirs = sorted(p.parent for p in (KIT_ROOT / "tests" / "submissions").glob("*/diag_*/kernel.cu"))
    names = {p.stem for p in FIXTURES}
    for d in diag_dirs:
        assert f"{d.parent.name}--{d.name}" in names, f"no recorded profile for {d}"
        assert expected_first(f"{d.parent.name}--{d.name}"), f"{d}: expected.json names no \"profile\""


def test_a_finding_shows_a_figure_not_measured_as_a_question_mark_whatever_its_format():
    say = common.show_figures
    assert say("{ratio:.2f} of copy, {n} loads", {"n": 3}) == "? of copy, 3 loads"
    assert say("{ratio:.2f} of copy", {"ratio": None}) == "? of copy"
    assert say("{ratio:.2f} of copy", {"ratio": 0.5}) == "0.50 of copy"
    assert say("{dram:MB} read", {"dram": 2.5e6}) == "2 MB read"        # bytes shown in megabytes


def test_rules_point_at_handout_sections_that_exist(rules):
    for rule in rules.rules:
        handout = KIT_ROOT / "handouts" / rule.handout
        assert handout.is_file(), f"{rule.id}: {handout} does not exist"
        headings = [line.lstrip("#").strip() for line in handout.read_text().splitlines() if line.startswith("#")]
        assert rule.section in headings, f"{rule.id}: {rule.handout} has no section {rule.section!r}"
        assert rule.source.strip()


def test_rules_only_use_figures_the_profile_derives(rules):
    kernel = profile.analyse(load(FIXTURES[0]), rules)["kernels"][0]
    known = set(kernel["figures"])
    for rule in (r for r in rules.rules if r.mode == "counters"):
        for name, _, _ in rule.when:
            assert name in known, f"{rule.id}: unknown figure {name!r}"
        for name in re.findall(r"\{(\w+)", rule.message):
            assert name in known | {"kernel", "stall_meaning"}, f"{rule.id}: message uses unknown {name!r}"


def test_stall_reasons_explain_every_top_stall_seen(rules):
    for path in FIXTURES:
        for k in profile.analyse(load(path), rules)["kernels"]:
            top = k["figures"]["top_stall"]
            assert top in rules.stall_reasons, f"{path.stem}: no words for stall reason {top!r}"


def test_findings_are_ranked_by_severity_then_table_order(rules):
    result = profile.analyse(load(NCU_DATA / "01-naive-5pt--diag_register_spills.json"), rules)
    ranks = [(-rule_table.SEVERITIES.index(f["severity"]), f["order"]) for f in result["findings"]]
    assert ranks == sorted(ranks)
    assert [f["rule"] for f in result["findings"]][:2] == ["spills", "dram_excess"]


def test_a_finding_names_its_handout_section_in_text(rules):
    result = profile.analyse(load(NCU_DATA / "01-naive-5pt--diag_uncoalesced.json"), rules)
    text = rendering.render_text(result)
    assert "32.0 sectors per request where 4 would do" in text
    assert 'handout 1, "Coalescing and the thread-to-data mapping"' in text
    assert "NVIDIA H100 80GB HBM3" in text


def test_lab_7_maps_each_kernel_to_its_launcher(rules):
    result = profile.analyse(load(NCU_DATA / "07-reduction-residual--reference.json"), rules)
    launchers = {k["label"].split("<")[0]: k["figures"]["launcher"] for k in result["kernels"]}
    assert launchers == {"residual_kernel": "residual_norm2", "jacobi_kernel": "jacobi_sweep"}


# ---------------------------------------------------------------- the pieces

RAW = '''==PROF== Connected to process 7
"ID","Process ID","Kernel Name","Block Size","Grid Size","gpu__time_duration.sum","dram__bytes_read.sum","launch__occupancy_limit_registers","launch__occupancy_limit_shared_mem","launch__occupancy_limit_warps","launch__occupancy_limit_blocks","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
"","","","","","nsecond","byte","block","block","block","block","ratio","ratio"
"0","7","_Z1kv","(128, 1, 1)","(64, 1, 1)","1,500,000","1,073,741,824","8","4","16","32","0.5","12.25"
"1","7","_Z1kv","(128, 1, 1)","(64, 1, 1)","n/a","2","8","8","8","32","",""
'''


def test_parse_raw_csv_skips_banner_and_units_and_reads_grouped_numbers():
    rows = ncu.parse_raw_csv(RAW)
    assert [r["id"] for r in rows] == ["0", "1"]
    m = rows[0]["metrics"]
    assert m["gpu__time_duration.sum"] == 1_500_000.0 and m["dram__bytes_read.sum"] == 1073741824.0
    assert "gpu__time_duration.sum" not in rows[1]["metrics"]            # n/a is no number
    assert rows[0]["block"] == "(128, 1, 1)" and rows[0]["name"] == "_Z1kv"
    with pytest.raises(ValueError, match="Kernel Name"):
        ncu.parse_raw_csv("no header here\n")


def test_occupancy_limiter_and_stalls_from_raw_rows():
    inputs = {"bench": {"nx": 64, "ny": 128, "nz": 1, "copy_gbps": 1000.0},
              "launchers": [{"name": "stencil2d_sweep", "bytes_per_cell": 8, "flop_per_cell": 9}]}
    rows = ncu.parse_raw_csv(RAW)
    f = counters.derive(rows[0], {}, inputs, 1.5)
    assert f["occupancy_limiter"] == "shared memory" and f["limited_by_shared"] == 1.0
    assert f["stalls"][0] == ("long_scoreboard", 12.25) and f["top_stall"] == "long_scoreboard"
    assert f["time_share"] == pytest.approx(1.0)
    tie = counters.derive(rows[1], {}, inputs, 1.5)
    assert tie["occupancy_limiter"] == "registers and shared memory and block size (warps per SM)"
    assert tie["duration_ms"] is None and tie["dram_gbps"] is None        # missing counters: no figure


def test_number():
    assert ncu.number("1,234.5") == 1234.5
    assert ncu.number("n/a") is None and ncu.number("") is None and ncu.number("inf") is None


def test_kernel_filter_selects_exactly_the_names():
    value = ncu.kernel_filter(["_Z5tiledPKfPfi", "odd$name"])
    assert value == r"regex:^(_Z5tiledPKfPfi|odd\$name)$"
    pattern = re.compile(value.removeprefix("regex:"))
    assert pattern.match("_Z5tiledPKfPfi") and not pattern.match("_Z5tiledPKfPfi_more")


SASS_LOOP = """arch = sm_90
identifier = /tmp/kernel.cu
\t\tFunction : _Z1kPfi
        /*0000*/                   I2F.U32.RP R3, c[0x0][0x16c] ;
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0020*/                   I2F.RP R5, R4 ;
        /*0030*/               @P0 BRA 0x50 ;
        /*0040*/                   I2F.RP R6, R4 ;
        /*0050*/              @!P1 BRA !P2, 0x20 ;
        /*0060*/                   STG.E.64 desc[UR4][R2.64], R4 ;
        /*0070*/                   EXIT ;
        /*0080*/                   BRA 0x80;
"""


def test_build_facts_count_divisions_in_loops_and_widest_accesses_from_the_machine_code(tmp_path, monkeypatch):
    """A division between a BRA and the earlier offset it branches to is in a loop; a branch to itself is none."""
    (tmp_path / "ptxas.log").write_text("ptxas info    : Compiling entry function '_Z1kPfi' for 'sm_90'\n"
                                        "ptxas info    : Used 28 registers\n")
    monkeypatch.setattr(command.sass, "student_code", lambda build_dir: sass.parse_sass(SASS_LOOP))
    fact = command.static_facts(tmp_path)["_Z1kPfi"]
    assert (fact["div_rem"], fact["div_rem_in_loop"], fact["widest_load"], fact["widest_store"]) == (3, 2, 16, 8)


def test_build_facts_without_machine_code_cannot_profile(tmp_path, monkeypatch):
    (tmp_path / "ptxas.log").write_text("ptxas info    : Compiling entry function '_Z1kPfi' for 'sm_90'\n")
    monkeypatch.setenv("CUOBJDUMP", str(tmp_path / "missing-cuobjdump"))
    with pytest.raises(common.ProfileError) as err:
        command.static_facts(tmp_path)
    assert err.value.exit_code == common.EXIT_CANNOT and "cuobjdump -sass" in str(err.value)


def test_rule_table_validation_names_the_rule_and_key():
    good = {"id": "x", "severity": "warning", "when": [["local_share", ">", 0.1]], "message": "m",
            "handout": "01-naive-5pt.md", "section": "Hints", "source": "s"}
    assert rule_table.parse_rules({"rules": [good]}).rules[0].when == (("local_share", ">", 0.1),)
    for broken, words in ((dict(good, severity="fatal"), "severity"),
                          (dict(good, when=[["local_share", "~", 1]]), "condition"),
                          (dict(good, when=[]), "when"),
                          (dict(good, message=""), "message"),
                          (dict(good, labs="02-shared-tiling"), "labs")):
        with pytest.raises(rule_table.RulesError, match=words) as err:
            rule_table.parse_rules({"rules": [broken]})
        assert "rules[0] (x)" in str(err.value)
    with pytest.raises(rule_table.RulesError, match="twice"):
        rule_table.parse_rules({"rules": [good, good]})


def test_minor_kernels_and_demotion_lower_findings_to_info(rules):
    data = load(NCU_DATA / "01-naive-5pt--diag_uncoalesced.json")
    table = rule_table.RuleTable(rules.rules, dict(rules.settings, demote_at_target=True), rules.stall_reasons)
    data_at_target = dict(data, target_ratio=0.01)
    result = profile.analyse(data_at_target, table)
    assert result["at_target"] and result["worst"] == "info"
    assert "already reaches the lab's target" in result["findings"][0]["message"]
    minor = rule_table.RuleTable(rules.rules, dict(rules.settings, min_time_share=1.5), rules.stall_reasons)
    assert profile.analyse(data, minor)["worst"] == "info"


# ---------------------------------------------------------------- the command, with a fake ncu

FAKE_NCU = """#!{python}
# A stand-in for ncu: MODE=perm prints the driver's permission error; otherwise it writes the
# report and the bench JSON where the command line asks, and --import prints the recorded page.
import os, sys
args = sys.argv[1:]
if "--version" in args:
    print("Version 2025.3.1.0 (fake)"); sys.exit(0)
if os.environ.get("FAKE_NCU_MODE") == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
if "--import" in args:
    sys.stdout.write(open(os.environ["FAKE_NCU_CSV"]).read()); sys.exit(0)
if os.environ.get("FAKE_NCU_MODE") == "unknown" and "dram__bytes_read.sum" in " ".join(args):
    print("==ERROR== Failed to find metric dram__bytes_read.sum"); sys.exit(1)
open(args[args.index("--export") + 1] + ".ncu-rep", "w").write("report")
open(args[args.index("--json") + 1], "w").write(open(os.environ["FAKE_NCU_BENCH"]).read())
print("==PROF== Disconnected")
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """A fake ncu on PATH replaying lab 1's recorded reference, and a build directory of lab 1 (a script bench)."""
    data = load(NCU_DATA / "01-naive-5pt--reference.json")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = bin_dir / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable))
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "page.csv").write_text(data["ncu_raw_csv"])
    (tmp_path / "bench.json").write_text(json.dumps(data["bench"]))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NCU_CSV", str(tmp_path / "page.csv"))
    monkeypatch.setenv("FAKE_NCU_BENCH", str(tmp_path / "bench.json"))
    build = tmp_path / "build"
    build.mkdir()
    name = next(iter(data["static"]))
    (build / "ptxas.log").write_text(f"ptxas info    : Compiling entry function '{name}' for 'sm_90'\n"
                                     f"ptxas info    : Function properties for {name}\n"
                                     "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                                     "ptxas info    : Used 27 registers, used 0 barriers\n")
    (build / "kernel.ptx").write_text(f".visible .entry {name}(\n)\n{{\n\tld.global.nc.f32 \t%f1, [%rd1];\n"
                                      "\tst.global.f32 \t[%rd2], %f1;\n\tret;\n}\n")
    bench = build / "bench"
    bench.write_text("#!/bin/sh\necho 'usage: bench --json FILE [--no-audit]' >&2\nexit 64\n")
    bench.chmod(0o755)
    monkeypatch.setattr(command.sass, "student_code", lambda build_dir: {})     # the bench is a script
    return build


def test_without_ncu_and_without_a_gpu_nothing_is_built(monkeypatch, tmp_path):
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))                  # no libcuda.so.1: no GPU
    run = profile.profile_lab("01-naive-5pt", "reference", tmp_path / "b")
    assert run.exit_code == common.EXIT_CANNOT == 2
    assert "no GPU to run the bench on" in run.text
    assert run.result is None and not (tmp_path / "b").exists()          # nothing built for nothing


def test_counters_not_permitted_is_said_with_the_fix(fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    with pytest.raises(common.ProfileError) as err:
        ncu.run_ncu(ncu.find_ncu(), ["_Z1kv"], fake_ncu, seed=1)
    assert err.value.exit_code == common.EXIT_CANNOT
    assert "ERR_NVGPUCTRPERM" in str(err.value) and "NVreg_RestrictProfilingToAdminUsers=0" in str(err.value)


def test_unknown_metrics_are_dropped_and_the_run_retried(fake_ncu, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_NCU_MODE", "unknown")
    command, raw, bench = ncu.run_ncu(ncu.find_ncu(), ["_Z1kv"], fake_ncu, seed=1)
    assert "dram__bytes_read.sum" not in " ".join(command) and "--no-audit" in command
    assert "ncu does not know dram__bytes_read.sum" in capsys.readouterr().out
    assert bench["device"] == "NVIDIA H100 80GB HBM3" and "Kernel Name" in raw


def test_collect_and_analyse_through_a_fake_ncu(fake_ncu, rules):
    spec = labspec.load(KIT_ROOT / "labs" / "01-naive-5pt" / "lab.json")
    inputs = command.collect_inputs(spec, "reference", fake_ncu, seed=7)
    assert inputs["ncu_command"][1:3] == ["--clock-control", "none"]
    assert "--launch-count" in inputs["ncu_command"] and "per-launch-config" in inputs["ncu_command"]
    assert inputs["ncu_command"][inputs["ncu_command"].index("--seed") + 1] == "7"
    assert inputs["source_sha256"] == sha256_of(KIT_ROOT / "reference" / "01-naive-5pt" / "kernel.cu")
    result = profile.analyse(inputs, rules)
    assert result["worst"] == "info" and result["kernels"][0]["label"] == "stencil2d_naive_kernel"


def test_profile_never_changes_a_graded_figure(tmp_path, monkeypatch):
    """The profile writes its own files: report.json stays byte for byte, report.html gains the diagnosis."""
    build = tmp_path / "build"
    build.mkdir()
    report = json.loads((DATA / "html" / "report-02-shared-tiling--diag_bank_conflicts.json").read_text())
    report["build_dir"] = str(build)
    (build / "report.json").write_text(json.dumps(report))
    before = (build / "report.json").read_bytes()
    data = load(NCU_DATA / "02-shared-tiling--diag_bank_conflicts.json")
    monkeypatch.setattr(ncu, "find_ncu", lambda: "/nonexistent/ncu")
    monkeypatch.setattr(command.grading_build, "build", lambda *a, **k: type("B", (), {"ok": True})())
    monkeypatch.setattr(command, "collect_inputs", lambda *a, **k: data)
    run = profile.profile_lab("02-shared-tiling", "reference", build)
    assert run.exit_code == 0, run.text
    assert (build / "report.json").read_bytes() == before
    assert json.loads((build / "profile.json").read_text())["findings"][0]["rule"] == "bank_conflicts"
    assert 'id="findings"' in (build / "report.html").read_text()


def test_grade_py_profile_from_inputs_needs_no_gpu(tmp_path):
    out = tmp_path / "diag.json"
    run = subprocess.run([sys.executable, str(GRADE_PY), "profile", "02-shared-tiling", "--from-inputs",
                          str(NCU_DATA / "02-shared-tiling--diag_smem_occupancy.json"), "--json", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Diagnosis (ranked" in run.stdout and "shared memory limits occupancy" in run.stdout
    assert json.loads(out.read_text())["findings"][0]["rule"] == "smem_occupancy"
