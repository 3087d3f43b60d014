"""`make profile --no-counters` on inputs recorded on an H100 (data/nocounters/): what PTX, ptxas and the audit show."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, GRADE_PY, KIT_ROOT
from stencil_grader.grading import sass
from stencil_grader.student import profile
from stencil_grader.student.profile import access, command, nocounters
from stencil_grader.student.profile import rules as rule_table

FIXTURES = sorted((DATA / "nocounters").glob("*--*.json"))
#: The counters rules whose defects the PTX cannot show (the submission gets nothing above info).
NEEDS_COUNTERS = {"dram_excess", "redundant_loads"}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def expected_first(stem: str) -> str | None:
    """The mode-ptx rule a fixture's first finding must be; None: nothing above info."""
    lab, impl = stem.split("--")
    if impl == "starter":
        return "div_rem_ptx"                           # lab 3's modulo baseline
    wanted = json.loads((KIT_ROOT / "tests" / "submissions" / lab / "expected.json").read_text()).get(impl, {})
    counters_rule = wanted.get("profile")
    return None if counters_rule in (None, *NEEDS_COUNTERS) else f"{counters_rule}_ptx"


@pytest.fixture(scope="module")
def rules():
    return rule_table.load_rules()


def test_the_fixtures_cover_every_reference_and_diagnostic_submission():
    names = {p.stem for p in FIXTURES}
    labs = sorted(p.name for p in (KIT_ROOT / "labs").iterdir() if (p / "lab.json").is_file())
    assert {f"{lab}--reference" for lab in labs} <= names
    diags = {f"{p.parent.name}--{p.name}" for p in (KIT_ROOT / "tests" / "submissions").glob("*/diag_*")}
    assert diags <= names
    for path in FIXTURES:
        data = load(path)
        assert data["mode"] == "ptx" and data["device"] == "NVIDIA H100 80GB HBM3", path.name    # the former name
        assert data["bench"]["audit"]["status"] == "ok" and data["limits"]["threads_per_sm"] == 2048


@pytest.mark.parametrize("path", [p for p in FIXTURES if p.stem.endswith("--reference")], ids=lambda p: p.stem)
def test_every_reference_is_clean_without_counters(path, rules):
    result = profile.analyse(load(path), rules)
    assert result["mode"] == "code" and result["kernels"]          # recorded as "ptx", the mode's former name
    above = [f"{f['rule']}: {f['message']}" for f in result["findings"] if f["severity"] != "info"]
    assert not above, f"{path.stem}: {above}"


@pytest.mark.parametrize("path", [p for p in FIXTURES if not p.stem.endswith("--reference")], ids=lambda p: p.stem)
def test_each_diagnostic_submission_gets_its_defect_or_nothing_it_cannot_see(path, rules):
    result = profile.analyse(load(path), rules)
    first = expected_first(path.stem)
    ranked = [f["rule"] for f in result["findings"] if f["severity"] != "info"]
    if first is None:
        assert ranked == [], f"{path.stem}: needs the counters, yet {ranked}"
    else:
        assert ranked and ranked[0] == first, f"{path.stem}: {ranked}"


def test_the_two_classic_defects_say_what_the_ptx_shows(rules):
    coalescing = profile.analyse(load(DATA / "nocounters" / "01-naive-5pt--diag_uncoalesced.json"), rules)
    f = coalescing["findings"][0]
    assert f["severity"] == "critical" and "parameter 3 (such as a row length) apart in a global load" in f["message"]
    assert "32 sectors of 32 bytes where 4 would do" in f["message"] and f["section"] == \
        "Coalescing and the thread-to-data mapping"
    banks = profile.analyse(load(DATA / "nocounters" / "02-shared-tiling--diag_bank_conflicts.json"), rules)
    f = banks["findings"][0]
    assert "128 bytes apart in a shared-memory store" in f["message"] and "32-way bank conflict" in f["message"]


def test_every_code_mode_defect_rule_has_a_diagnostic_submission(rules):
    firsts = {expected_first(p.stem) for p in FIXTURES} - {None}
    defects = {r.id for r in rules.rules if r.mode == "code" and r.severity != "info"}
    assert defects <= firsts, sorted(defects - firsts)
    assert {"uncoalesced_ptx", "bank_conflicts_ptx"} <= firsts


def test_a_rule_of_mode_ptx_is_read_as_mode_code():
    rule = {"id": "old", "severity": "warning", "when": [["registers", ">", 1]], "message": "m", "handout": "h",
            "section": "s", "source": "x", "mode": "ptx"}
    assert rule_table.parse_rules({"rules": [rule]}).rules[0].mode == "code"


def test_code_mode_rules_use_figures_the_mode_derives(rules):
    known = set()
    for path in FIXTURES:
        for k in profile.analyse(load(path), rules)["kernels"]:
            known |= set(k["figures"])
    for rule in (r for r in rules.rules if r.mode == "code"):
        for name, _, _ in rule.when:
            assert name in known, f"{rule.id}: {name}"
        handout = KIT_ROOT / "handouts" / rule.handout
        assert handout.is_file() and f"# {rule.section}" in handout.read_text(), rule.id


def test_grade_py_says_which_mode_from_inputs(tmp_path):
    out = tmp_path / "diag.json"
    run = subprocess.run([sys.executable, str(GRADE_PY), "profile", "02-shared-tiling", "--from-inputs",
                          str(DATA / "nocounters" / "02-shared-tiling--diag_bank_conflicts.json"), "--json", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "without counters (asked for" in run.stdout.splitlines()[0]
    assert "mode code: what the kit sees without counters" in run.stdout
    assert json.loads(out.read_text())["mode"] == "code"


# ---------------------------------------------------------------- the pieces

PTX = """
.visible .entry _Z1kPKfPfi(
	.param .u64 _Z1kPKfPfi_param_0,
	.param .u64 _Z1kPKfPfi_param_1,
	.param .u32 _Z1kPKfPfi_param_2
)
{
	.shared .align 4 .b8 tile[4096];
	ld.param.u64 	%rd1, [_Z1kPKfPfi_param_0];
	ld.param.u32 	%r1, [_Z1kPKfPfi_param_2];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r2, %tid.x;
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mad.lo.s32 	%r5, %r3, %r4, %r2;
	mul.wide.s32 	%rd3, %r5, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.f32 	%f1, [%rd4];
	mul.lo.s32 	%r6, %r5, %r1;
	mul.wide.s32 	%rd5, %r6, 4;
	add.s64 	%rd6, %rd2, %rd5;
	ld.global.f32 	%f2, [%rd6+4];
	mov.u32 	%r7, tile;
	shl.b32 	%r8, %r2, 7;
	add.s32 	%r9, %r7, %r8;
	st.shared.f32 	[%r9], %f1;
	mov.u32 	%r10, %r5;
$L__BB0_1:
	mul.wide.s32 	%rd7, %r10, 16;
	add.s64 	%rd8, %rd2, %rd7;
	ld.global.v4.f32 	{%f3, %f4, %f5, %f6}, [%rd8];
	mov.u32 	%r11, %nctaid.x;
	mad.lo.s32 	%r10, %r11, %r4, %r10;
	setp.lt.s32 	%p1, %r10, %r1;
	@%p1 bra 	$L__BB0_1;
	rem.s32 	%r12, %r2, %r1;
	mul.wide.s32 	%rd9, %r12, 4;
	add.s64 	%rd10, %rd2, %rd9;
	ld.global.f32 	%f7, [%rd10];
	ret;
}
"""


def test_strides_follow_the_registers_through_a_grid_stride_loop():
    (accesses,) = access.kernel_accesses(access.parse_ptx(PTX)).values()
    shown = [(a["space"], a["op"], a["width"], access.stride_bytes(a["stride_x"], [128, 1, 1], [64, 1, 1]))
             for a in accesses]
    assert shown == [("global", "load", 4, 4),                # in[i]: coalesced
                     ("global", "load", 4, "runtime"),        # in[i * n]: n floats apart
                     ("shared", "store", 4, 128),             # tile[tid * 32]
                     ("global", "load", 16, 16),              # float4 at i, i += gridDim * blockDim
                     ("global", "load", 4, None)]             # in[tid % n]: not followed


def test_sectors_and_bank_ways_of_a_warp():
    assert access.global_sectors(access.lane_offsets(4, 0, 128), 4) == 4
    assert access.global_sectors(access.lane_offsets(16, 0, 128), 16) == 16
    assert access.global_sectors(access.lane_offsets(128, 0, 128), 4) == 32
    assert access.global_sectors(access.lane_offsets(4, 64, 16), 4) == 4      # 16 x 2 lanes, two rows
    assert access.shared_wavefronts(access.lane_offsets(4, 0, 128), 4) == (1, 1)
    assert access.shared_wavefronts(access.lane_offsets(128, 0, 128), 4) == (32, 1)
    assert access.shared_wavefronts(access.lane_offsets(132, 0, 128), 4) == (1, 1)   # padded by one float
    assert access.shared_wavefronts(access.lane_offsets(8, 0, 128), 4) == (2, 1)
    assert access.shared_wavefronts(access.lane_offsets(16, 0, 128), 16) == (4, 4)   # float4: 4 phases


def test_occupancy_follows_the_calculator():
    h100 = {"threads_per_sm": 2048, "smem_per_sm": 233472, "registers_per_sm": 65536, "blocks_per_sm": 32,
            "smem_reserved_per_block": 1024}
    assert nocounters.occupancy(256, 32, 0, h100) == (100.0, ["block size (warps per SM)", "registers"])
    assert nocounters.occupancy(64, 32, 48 * 1024, h100) == (12.5, ["shared memory"])
    occ, limit = nocounters.occupancy(256, 128, 0, h100)
    assert occ == 25.0 and limit == ["registers"]


FAKE_NCU_LOCKED = """#!{python}
import sys
if "--version" in sys.argv:
    print("Version 2025.3.1.0 (fake)"); sys.exit(0)
print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
sys.exit(1)
"""


def test_locked_counters_are_said_in_one_line_then_diagnosed_without(tmp_path, monkeypatch, rules):
    data = load(DATA / "nocounters" / "01-naive-5pt--diag_uncoalesced.json")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").write_text(FAKE_NCU_LOCKED.format(python=sys.executable))
    (bin_dir / "ncu").chmod(0o755 | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    build = tmp_path / "build"
    build.mkdir()
    name = next(iter(data["static"]))
    (build / "ptxas.log").write_text(f"ptxas info    : Compiling entry function '{name}' for 'sm_90'\n"
                                     "ptxas info    : Used 28 registers\n")
    bench = build / "bench"
    bench.write_text("#!/bin/sh\necho 'usage: bench --json FILE [--no-audit]' >&2\nexit 64\n")
    bench.chmod(0o755)
    monkeypatch.setattr(sass, "student_code", lambda build_dir: {})      # the bench is a script
    monkeypatch.setattr(command.grading_build, "build", lambda *a, **k: type("B", (), {"ok": True})())
    asked = []
    monkeypatch.setattr(nocounters, "collect", lambda spec, impl, b, seed, static, why: asked.append(why) or data)
    run = profile.profile_lab("01-naive-5pt", "reference", build)
    assert run.exit_code == 0, run.text
    first = run.text.splitlines()[0]
    assert first.startswith("grade.py profile: Nsight Compute may not read this GPU's counters (ERR_NVGPUCTRPERM): "
                            "the diagnosis below comes without counters")
    assert asked == ["Nsight Compute may not read this GPU's counters (ERR_NVGPUCTRPERM)"]
    assert run.result["mode"] == "code" and run.result["findings"][0]["rule"] == "uncoalesced_ptx"
    assert json.loads((build / "profile.json").read_text())["mode"] == "code"


def test_the_environment_forces_the_mode(monkeypatch):
    assert not nocounters.forced({})
    assert nocounters.forced({"STENCIL_PROFILE_COUNTERS": "off"}) and nocounters.forced({"STENCIL_PROFILE_COUNTERS": "0"})
    assert not nocounters.forced({"STENCIL_PROFILE_COUNTERS": "on"})
