"""lab.json: a good file loads; each kind of bad file is refused with a message naming
the file, the key, what was found and what is allowed."""

import json
import re

import pytest

from conftest import BASE_LAB_JSON, FAKE_LAB, KIT_ROOT, lab_json
from stencil_grader.base import files, labspec


def write(tmp_path, data, folder=FAKE_LAB):
    path = tmp_path / folder / "lab.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_every_lab_json_of_the_kit_loads():
    labs = labspec.discover_labs(KIT_ROOT)
    assert labs, "the kit has no labs/*/lab.json"
    for lab_dir in labs:
        spec = labspec.load(lab_dir / "lab.json")
        assert spec.lab == lab_dir.name
        assert "generic" in spec.targets


def test_lab_01_reads_as_written():
    spec = labspec.load(KIT_ROOT / "labs" / "01-naive-5pt" / "lab.json")
    assert (spec.lab, spec.number, spec.api, spec.boundary) == ("01-naive-5pt", 1, "stencil2d_sweep",
                                                                "dirichlet")
    assert spec.tolerance == labspec.Tolerance(1e-5, 1e-6)
    assert spec.check.suite_timeout_s == 240
    assert (spec.bench.nx, spec.bench.ny, spec.bench.nz) == (16384, 8192, 1)
    assert spec.points.total == 100
    assert spec.constraints.max_shared_planes is None


def test_good_fake_file_loads(tmp_path):
    spec = labspec.load(write(tmp_path, BASE_LAB_JSON))
    assert spec.targets["Fake GPU 80GB"].calibrated == "test table"
    assert spec.lab_dir == tmp_path / FAKE_LAB


def test_target_lookup_exact_name_then_generic(tmp_path):
    spec = labspec.load(write(tmp_path, BASE_LAB_JSON))
    exact = spec.target_for("Fake GPU 80GB")
    assert (exact.table, exact.target.floor) == ("Fake GPU 80GB", 0.40)
    other = spec.target_for("NVIDIA L4")
    assert other.table == "generic" and "no table for NVIDIA L4" in other.note
    assert spec.target_for("fake gpu 80gb").table == "generic"   # exact names only
    assert spec.target_for(None).table == "generic"


# Each bad file: (changes, a regular expression the message must match after the file name).
BAD = [
    ({"targets__generic__floor": 0.9},
     r"targets\.generic\.floor must be a number in \[0, 1\) below target, got 0\.9$"),
    ({"targets__generic__floor": -0.1}, r"targets\.generic\.floor must be .*got -0\.1"),
    ({"targets__generic__target": 1.2}, r"targets\.generic\.target must be a number in \(0, 1\.05\], got 1\.2"),
    ({"targets__generic__floor": "0.3"}, r"targets\.generic\.floor must be .*got \"0\.3\""),
    ({"targets__generic": KeyError}, r"targets\.generic is missing .*keys present: Fake GPU 80GB"),
    ({"targets__generic__speed": 1}, r"targets\.generic\.speed is not a known key \(allowed: floor, target, calibrated, reference_ratio\)"),
    ({"targets__generic__reference_ratio": 2.0}, r"targets\.generic\.reference_ratio must be the reference's ratio, a number in \(0, 1\.05\]"),
    ({"targets__generic__calibrated": 5}, r"targets\.generic\.calibrated must be a string"),
    ({"api": "stencil2d_sweeps"}, r"api must be one of stencil2d_sweep, stencil2d_periodic_sweep, "
                                  r"stencil2d_run, stencil3d_sweep, jacobi_residual, got \"stencil2d_sweeps\""),
    ({"boundary": "periodic"}, r"boundary is not a known key"),
    ({"tolerance__rtol": -1}, r"tolerance\.rtol must be a number >= 0, got -1"),
    ({"tolerance": KeyError}, r"^tolerance is missing \(an object with keys rtol, atol\)"),
    ({"tolerance__atol": KeyError}, r"tolerance\.atol is missing"),
    ({"check__case_timeout_s": 0}, r"check\.case_timeout_s must be a number of seconds > 0, got 0"),
    ({"check__suite_timeout_s": 1}, r"check\.suite_timeout_s must be a number of seconds >= "
                                    r"check\.case_timeout_s \(2\), got 1"),
    ({"bench__nz": 4}, r"bench\.nz must be 1 for the 2D kind stencil2d_sweep, got 4"),
    ({"bench__steps": 8}, r"bench\.steps must be 1 for api stencil2d_sweep \(one sweep per call\), got 8"),
    ({"bench__nx": 1.5}, r"bench\.nx must be an integer >= 1, got 1\.5"),
    ({"bench__repetitions": True}, r"bench\.repetitions must be an integer >= 1, got true"),
    ({"constraints__no_div_rem": 1}, r"constraints\.no_div_rem must be true or false, got 1"),
    ({"constraints__forbidden_calls": "printf"}, r"constraints\.forbidden_calls must be a list of C identifiers"),
    ({"constraints__forbidden_calls": ["ok", "not ok"]}, r"constraints\.forbidden_calls\[1\] must be a C identifier, got \"not ok\""),
    ({"constraints__max_shared_planes": 0}, r"constraints\.max_shared_planes must be an integer >= 1"),
    ({"constraints__shared_memory": KeyError}, r"constraints\.shared_memory is missing"),
    ({"points__performance": -5}, r"points\.performance must be a number >= 0, got -5"),
    ({"points": {"correctness": 0, "performance": 0}}, r"points must be correctness and performance points with a sum > 0"),
    ({"number": 2}, r"number must be the integer 1 \(the lab name's digits\), got 2"),
    ({"lab": "lab one"}, r"lab must be a name \"NN-slug\""),
    ({"lab": "01-other-lab"}, r"lab must be the name of the folder holding lab.json \(\"01-fake-5pt\"\)"),
    ({"title": ""}, r"title must be a non-empty string"),
    ({"colour": "blue"}, r"colour is not a known key \(allowed: lab, number, title"),
    ({"title": KeyError}, r"^title is missing"),
]


@pytest.mark.parametrize("changes, pattern", BAD, ids=[str(c) for c, _ in BAD])
def test_bad_file_names_file_key_found_and_allowed(tmp_path, changes, pattern):
    path = write(tmp_path, lab_json(**changes))
    with pytest.raises(labspec.LabSpecError) as err:
        labspec.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: "), message
    assert re.search(pattern, message[len(f"{path}: "):]), message


def test_not_json_gives_line_and_column(tmp_path):
    path = write(tmp_path, '{"lab": "01-fake-5pt",\n  "number": 1,,}')
    with pytest.raises(labspec.LabSpecError, match=r"not valid JSON: .* at line 2 column"):
        labspec.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(labspec.LabSpecError, match=r"lab\.json: cannot read"):
        labspec.load(tmp_path / "nowhere" / "lab.json")


def test_top_level_not_an_object(tmp_path):
    with pytest.raises(labspec.LabSpecError, match=r"the top level must be an object, got \[1, 2\]"):
        labspec.load(write(tmp_path, [1, 2]))


def test_api_specific_rules(tmp_path):
    periodic = lab_json(api="stencil2d_periodic_sweep")
    assert labspec.load(write(tmp_path, periodic)).boundary == "periodic"     # the kind's fact
    lab7 = lab_json(api="jacobi_residual")
    with pytest.raises(labspec.LabSpecError, match=r"tolerance\.residual_rtol is missing"):
        labspec.load(write(tmp_path, lab7))
    lab7["tolerance"].update(residual_rtol=1e-5, residual_atol_per_term=2e-3, rate_rtol=1e-3)
    assert dict(labspec.load(write(tmp_path, lab7)).tolerance.extra) == {
        "residual_rtol": 1e-5, "residual_atol_per_term": 2e-3, "rate_rtol": 1e-3}
    run = lab_json(api="stencil2d_run", bench__steps=8)
    assert labspec.load(write(tmp_path, run)).bench.steps == 8
    three_d = lab_json(api="stencil3d_sweep", bench__nz=256)
    assert labspec.load(write(tmp_path, three_d)).bench.nz == 256
    planes = lab_json(constraints__max_shared_planes=1)
    with pytest.raises(labspec.LabSpecError, match=r"max_shared_planes needs the smallest tile"):
        labspec.load(write(tmp_path, planes))
    planes = lab_json(constraints__max_shared_planes=1, constraints__shared_memory=True,
                     constraints__shared_tile={"halo": 1, "smallest_tile": [32, 6], "row_padding": 4,
                                               "rule": "One plane."})
    constraints = labspec.load(write(tmp_path, planes)).constraints
    assert constraints.max_shared_planes == 1
    assert constraints.shared_tile.plane_factor == (32 + 2 + 8) * (6 + 2) / (32 * 6) == 1.75


@pytest.mark.parametrize("change, words", [
    ({"constraints__shared_tile": {"halo": 1, "rule": "x"}}, r"shared_memory must be true when shared_tile"),
    ({"constraints__shared_memory": True, "constraints__shared_tile": {"halo": -1, "rule": "x"}},
     r"shared_tile\.halo must be an integer >= 0"),
    ({"constraints__shared_memory": True, "constraints__shared_tile": {"halo": 1, "rule": " "}},
     r"shared_tile\.rule must be a sentence"),
    ({"constraints__shared_memory": True, "constraints__shared_tile": {"halo": 1, "rule": "x",
                                                                       "smallest_tile": [32]}},
     r"smallest_tile must be \[width, height\]"),
    ({"constraints__grid_storage": {"type": "fp16", "rule": "x"}}, r"grid_storage\.type must be one of fp32"),
    ({"constraints__grid_storage": {"type": "fp32"}}, r"grid_storage\.rule is missing"),
])
def test_constraint_objects_are_validated(tmp_path, change, words):
    with pytest.raises(labspec.LabSpecError, match=words):
        labspec.load(write(tmp_path, lab_json(**change)))


def test_a_lab_that_teaches_shared_memory_gets_the_default_tile():
    spec = labspec.load(KIT_ROOT / "labs" / "02-shared-tiling" / "lab.json")
    assert spec.constraints.shared_tile.halo == 1 and "input tile" in spec.constraints.shared_tile.rule
    assert spec.constraints.grid_storage.type == "fp32"


def test_kit_paths_are_shown_relative_to_the_kit():
    path = KIT_ROOT / "labs" / "01-naive-5pt" / "lab.json"
    assert files.display_path(path) == "labs/01-naive-5pt/lab.json"


# Fused sweeps (lab 8): bench.max_fused_sweeps = K raises the plausibility bound to K x 1.05.

def fused(k, **more):
    return lab_json(api="stencil2d_run", bench__steps=16, bench__max_fused_sweeps=k, **more)


def test_max_fused_sweeps_defaults_to_one_and_the_bound_to_1_05(tmp_path):
    spec = labspec.load(write(tmp_path, BASE_LAB_JSON))
    assert spec.bench.max_fused_sweeps == 1
    assert spec.max_plausible_ratio == labspec.MAX_PLAUSIBLE_RATIO == 1.05


def test_lab_08_bound_is_k_times_copy():
    spec = labspec.load(KIT_ROOT / "labs" / "08-temporal-blocking" / "lab.json")
    assert spec.api == "stencil2d_run" and spec.bench.steps == 16
    assert spec.bench.max_fused_sweeps == spec.bench.steps      # the largest K: every sweep in one pass
    assert spec.max_plausible_ratio == pytest.approx(16 * 1.05)
    assert spec.tolerance == labspec.Tolerance(0.0, 0.0)        # bit for bit
    assert all(t.target > 1.05 for t in spec.targets.values())  # allowed by the key alone


def test_targets_above_1_05_need_fused_sweeps(tmp_path):
    spec = labspec.load(write(tmp_path, fused(8, targets__generic__target=2.4, targets__generic__floor=1.2)))
    assert spec.max_plausible_ratio == pytest.approx(8.4)
    assert spec.targets["generic"] == labspec.Target(1.2, 2.4)
    with pytest.raises(labspec.LabSpecError, match=r"targets\.generic\.target must be a number in "
                                                   r"\(0, 1\.05\], got 2\.4"):
        labspec.load(write(tmp_path, lab_json(targets__generic__target=2.4)))


@pytest.mark.parametrize("data, pattern", [
    (fused(0), r"bench\.max_fused_sweeps must be an integer in \[1, bench\.steps = 16\] .*got 0$"),
    (fused(17), r"bench\.max_fused_sweeps must be an integer in \[1, bench\.steps = 16\] .*got 17$"),
    (fused(2.5), r"bench\.max_fused_sweeps must be an integer .*got 2\.5$"),
    (lab_json(bench__max_fused_sweeps=2), r"bench\.max_fused_sweeps must be an integer in "
                                         r"\[1, bench\.steps = 1\]"),
    (fused(2, targets__generic__target=2.2), r"targets\.generic\.target must be a number in \(0, 2\.1\], "
                                             r"got 2\.2$"),
    (fused(2, targets__generic__target=2.0, targets__generic__floor=2.0),
     r"targets\.generic\.floor must be a number in \[0, 2\) below target, got 2\.0$"),
])
def test_bad_max_fused_sweeps(tmp_path, data, pattern):
    with pytest.raises(labspec.LabSpecError, match=pattern):
        labspec.load(write(tmp_path, data))


# targets_policy (a bonus lab, lab 8): the same floor and target on every GPU, with the rule in words;
# every targets entry must hold them, so no table contradicts the rule.

def policy(**more):
    kw = {"targets__generic__floor": 1.0, "targets__generic__target": 1.2, "targets__Fake GPU 80GB": KeyError,
          "targets_policy": {"floor": 1.0, "target": 1.2, "why": "bonus lab: past the copy wall"}}
    kw.update(more)
    return fused(16, **kw)


def test_targets_policy_is_optional_and_read(tmp_path):
    assert labspec.load(write(tmp_path, BASE_LAB_JSON)).targets_policy is None
    spec = labspec.load(write(tmp_path, policy()))
    assert spec.targets_policy == labspec.TargetsPolicy(1.0, 1.2, "bonus lab: past the copy wall")
    agreeing = policy(**{"targets__Fake GPU 80GB": {"floor": 1.0, "target": 1.2, "calibrated": "policy"}})
    assert labspec.load(write(tmp_path, agreeing)).target_for("Fake GPU 80GB").target.target == 1.2


def test_lab_08_states_its_policy():
    spec = labspec.load(KIT_ROOT / "labs" / "08-temporal-blocking" / "lab.json")
    rule = spec.targets_policy
    assert rule is not None and rule.why
    assert rule.floor == 1.0                     # the copy wall that labs 2 to 4 reach
    assert 1.05 < rule.target <= spec.max_plausible_ratio
    assert all((t.floor, t.target) == (rule.floor, rule.target) for t in spec.targets.values())


@pytest.mark.parametrize("data, pattern", [
    (policy(targets_policy={"floor": 1.0, "target": 1.2}), r"targets_policy\.why is missing$"),
    (policy(targets_policy={"floor": 1.0, "target": 1.2, "why": " "}),
     r"targets_policy\.why must be a non-empty string"),
    (policy(targets_policy={"floor": 1.3, "target": 1.2, "why": "x"}),
     r"targets_policy\.floor must be a number in \[0, 16\) below target, got 1\.3$"),
    (policy(targets_policy={"floor": 1.0, "target": 20, "why": "x"}),
     r"targets_policy\.target must be a number in \(0, 16\.8\], got 20$"),
    (policy(targets_policy={"floor": 1.0, "target": 1.2, "why": "x", "k": 2}),
     r"targets_policy\.k is not a known key \(allowed: floor, target, why\)"),
    (policy(targets_policy=[1.0, 1.2]), r"targets_policy must be an object with keys floor, target, why"),
    (policy(targets__generic__target=1.4),
     r"targets\.generic must be floor 1 and target 1\.2, as targets_policy says, got \{\"floor\": 1\.0, \"target\": 1\.4\}$"),
    (policy(**{"targets__Fake GPU 80GB": {"floor": 1.24, "target": 2.37}}),
     r"targets\.Fake GPU 80GB must be floor 1 and target 1\.2, as targets_policy says"),
])
def test_bad_targets_policy(tmp_path, data, pattern):
    with pytest.raises(labspec.LabSpecError, match=pattern):
        labspec.load(write(tmp_path, data))
