"""launches.py: the launch audit's rules on audit records and nvcc's machine code (data/program.sass)."""

import pytest

from conftest import BASE_LAB_JSON, DATA, FAKE_LAB, fake_spec
from stencil_grader.base import labspec
from stencil_grader.grading import launches, sass

PROGRAM = sass.parse_sass((DATA / "program.sass").read_text(), "/tmp/data/harness")   # where it was built
CODE = launches.Code(PROGRAM[90], "sm_90")
FLOAT4 = "_Z11float4_loadPK6float4Pf"


def kernel(**changes):
    record = {"launcher": "stencil3d_sweep", "kind": "kernel", "name": FLOAT4,
              "on_launcher_stream": True, "stream": 13, "count": 5, "grid": [4, 37, 2],
              "block": [32, 16, 1], "static_smem": 8704, "dynamic_smem": 0, "registers": 64, "ms": 0.37}
    record.update(changes)
    return record


def bench(*records, status="ok"):
    return {"nx": 512, "ny": 512, "nz": 512, "audit": {"status": status, "message": "", "calls": 5,
                                                        "lost": 0, "launches": list(records)}}


LAB6_TILE = {"halo": 1, "smallest_tile": [32, 6], "row_padding": 4, "rule": "One plane of the tile."}


def spec(tmp_path, **constraints):
    return fake_spec(tmp_path, api="stencil3d_sweep", bench__nz=4,
                     **{f"constraints__{key}": value for key, value in constraints.items()})


@pytest.fixture
def lab6(tmp_path):
    return spec(tmp_path, shared_memory=True, shared_tile=LAB6_TILE, max_shared_planes=1)


def test_every_operation_on_the_launchers_stream_passes():
    assert launches.stream_check(bench(kernel())).status == "pass"


@pytest.mark.parametrize("stream", [7, 14])        # the legacy default stream, a per-thread one
def test_an_operation_on_another_stream_fails_naming_it(stream):
    check = launches.stream_check(bench(kernel(), kernel(on_launcher_stream=False, stream=stream,
                                                         name="_Z4realPKfPf")))
    assert check.status == "fail" and check.severity == "constraint"
    assert f"kernel real ran on stream {stream}" in check.details[0]


def test_a_memset_on_the_legacy_stream_counts_too():
    memset = {"launcher": "stencil3d_sweep", "kind": "memset", "name": "memset", "stream": 7,
              "on_launcher_stream": False, "count": 1, "bytes": 4096, "ms": 0.01}
    assert launches.stream_check(bench(kernel(), memset)).status == "fail"


def test_no_audit_is_not_verified_never_passed():
    check = launches.stream_check(bench(status="unavailable"))
    assert check.status == "skipped" and check.message.startswith("not verified")


def test_the_lab_6_reference_as_launched_fits_one_plane(lab6, tmp_path):
    """Lab 6's reference as launched (8704 bytes, float4 loads) is one plane of its tile with halo."""
    allowed, how = launches.plane_bound(1, 1.75, 512, 512, [4, 37, 2], 512, 16)
    assert allowed == int(1 * 1.75 * 4 * (512 * 512 / 148)) and 8704 <= allowed < 2 * 8192
    check = launches.planes_check(lab6, bench(kernel()), CODE)
    assert check.status == "pass" and "8704 bytes" in check.details[0]


def test_the_plane_factor_is_the_smallest_tile_of_lab_json():
    """(32 + 2 halo + 2 x 4 padding) x (6 + 2 halo) / (32 x 6): lab 6's declaration."""
    spec6 = labspec.load(labspec.KIT_ROOT / "labs" / "06-register-tiling" / "lab.json")
    assert spec6.constraints.shared_tile.plane_factor == 1.75


@pytest.mark.parametrize("record, in_message, in_last_detail", [
    (kernel(static_smem=16384), "16384 bytes", ""),                  # two 128 x 16 planes without any halo
    # three planes of a 128 x 6 tile: the bound follows the 256 threads launched, not __launch_bounds__(1024)
    (kernel(grid=[4, 86, 1], block=[32, 8, 1], static_smem=3 * 136 * 8 * 4), "", ""),
    (kernel(static_smem=0, dynamic_smem=20000), "", "20000 dynamic"),    # dynamic shared memory counts
    # a grid-stride block's share is capped at two rows of its widest load per thread: three 32 x 16 planes
    (kernel(name="_Z5plainPKfPfi", grid=[132, 1, 1], static_smem=3 * 34 * 18 * 4), "", ""),
], ids=["two_planes_no_halo", "three_planes_fewer_threads", "dynamic", "grid_stride"])
def test_more_than_the_planes_allowed_fails_and_costs_the_performance_points(lab6, record, in_message, in_last_detail):
    check = launches.planes_check(lab6, bench(record), CODE)
    assert check.status == "fail" and "performance gets 0" in check.message and in_message in check.message
    assert in_last_detail in check.details[-1]


def test_a_grid_stride_blocks_share_is_two_rows_of_its_widest_load_per_thread():
    allowed, _ = launches.plane_bound(1, 1.75, 512, 512, [132, 1, 1], 512, 4)
    assert allowed == int(1.75 * 4 * 512 * 2)


@pytest.fixture
def disassembled(monkeypatch):
    """check_launches reads program.sass as the bench program's machine code."""
    monkeypatch.setattr(sass, "student_code", lambda build_dir, cc=None, program="bench": PROGRAM)


def test_labs_without_the_constraints_get_only_the_stream_and_host_checks(tmp_path, disassembled):
    plain = labspec.parse(BASE_LAB_JSON, tmp_path / FAKE_LAB / "lab.json")
    assert [c.name for c in launches.check_launches(plain, dict(bench(kernel()), cc="9.0"), tmp_path)] == [
        "launch stream", "host memory"]
    assert launches.check_launches(plain, None, tmp_path) == []



# ---------------------------------------------------------------- the shared tile

TILE_READ, WEIGHTS, WRITE_ONLY, PLAIN = ("_Z9tile_readPKfPfi", "_Z12weights_onlyPKfPfiS0_",
                                         "_Z15tile_write_onlyPKfPfi", "_Z5plainPKfPfi")


def launched(name, smem, grid=(32, 32, 1), block=(16, 16, 1)):
    """A 2D kernel of a 512 x 512 grid as the audit records it."""
    return kernel(launcher="stencil2d_sweep", name=name, grid=list(grid), block=list(block), static_smem=smem)


@pytest.fixture
def lab2(tmp_path):
    return spec(tmp_path, shared_memory=True,
                shared_tile={"halo": 1, "rule": "Stage the block's input tile and read it."})


def tile(spec_, *records):
    return launches.tile_check(spec_, dict(bench(*records), nz=1), CODE)


def test_a_tile_with_its_halo_read_back_passes(lab2):
    check = tile(lab2, launched(TILE_READ, 18 * 18 * 4))
    assert check.status == "pass", check.message
    assert "1280 = 4 bytes x (256 cells + a halo of 1" in check.details[0]


def test_weights_only_fail_saying_what_the_rule_measures(lab2):
    check = tile(lab2, launched(WEIGHTS, 20, grid=(1024, 1, 1), block=(256, 1, 1)))
    assert check.status == "fail" and check.severity == "constraint"
    assert "kernel weights_only uses 20 bytes of shared memory per block, less than the 1280 bytes" in check.message
    assert "on every kernel your launcher starts" in check.message and "Stage the block's input tile" in check.message


def test_a_tile_written_and_never_read_fails_the_rule(lab2):
    check = tile(lab2, launched(WRITE_ONLY, 18 * 18 * 4))
    assert check.status == "fail" and "never reads shared memory (no LDS in its machine code)" in check.message


def test_a_decoy_never_launched_counts_for_nothing(lab2):
    """The launched kernel has no shared memory; tile_read has a tile and never ran."""
    check = tile(lab2, launched(PLAIN, 0))
    assert check.status == "fail" and "kernel plain uses 0 bytes" in check.message
    assert any("kernel tile_read uses shared memory but was never launched" in d for d in check.details)


def test_a_launched_decoy_beside_a_kernel_without_shared_memory_fails(lab2):
    check = tile(lab2, launched(TILE_READ, 18 * 18 * 4), launched(PLAIN, 0))
    assert check.status == "fail" and "kernel plain uses 0 bytes" in check.message


def test_a_kernel_the_machine_code_lacks_cannot_pass(lab2):
    """A kernel the driver loaded from elsewhere (cuModuleLoadData), or a name forged in text."""
    check = tile(lab2, launched("_Z7missingv", 4096))
    assert check.status == "fail" and "is not in the machine code of kernel.cu (sm_90)" in check.message


def test_a_kernel_two_elfs_of_one_architecture_define_cannot_pass(lab2):
    """Two ELFs of one architecture defining a kernel: which one ran cannot be told, so it fails."""
    text = (DATA / "program.sass").read_text()
    body = text[text.index(f"Function : {TILE_READ}"):]
    forged = "Fatbin elf code:\narch = sm_90\n\t\t" + body[:body.index("Function :", 12)].replace(TILE_READ, PLAIN)
    code = launches.Code(sass.parse_sass(text + forged, "/tmp/data/harness")[90], "sm_90")
    check = launches.tile_check(lab2, dict(bench(launched(PLAIN, 4096)), nz=1), code)
    assert check.status == "fail" and "is not in the machine code of kernel.cu once (sm_90)" in check.message


def test_the_tile_rule_needs_the_audit(lab2):
    check = launches.tile_check(lab2, dict(bench(status="unavailable"), nz=1), CODE)
    assert check.status == "skipped" and check.message.startswith("not verified")


@pytest.mark.parametrize("what, halo, nx, ny, grid, block, load, smem, ok", [
    # the references as they launch at the bench size (grid, block, widest load, static shared memory)
    ("lab 2 reference: 64 x 32 tile, 66 x 34", 1, 16384, 8192, [256, 256, 1], [64, 4, 1], 4, 8976, True),
    ("lab 4 reference: row buffers of a 512-cell strip", 1, 16384, 8192, [32, 2048, 1], [128, 1, 1], 16, 4160, True),
    ("lab 5 reference: three 136 x 18 planes", 1, 512, 512, [4, 32, 16], [32, 8, 1], 16, 29376, True),
    ("lab 6 reference: one 136 x 16 plane", 1, 512, 512, [4, 37, 16], [32, 16, 1], 16, 8704, True),
    ("lab 6 textbook: 32 x 32 input-mapped plane", 1, 512, 512, [18, 18, 17], [32, 32, 1], 4, 4096, True),
    ("lab 8 reference: a cp.async ring", 0, 16384, 8192, [4736, 1, 1], [64, 1, 1], 16, 4096, True),
    ("own cells only, no halo", 1, 16384, 8192, [128, 4096, 1], [128, 2, 1], 4, 1024, False),
    ("five weights", 1, 16384, 8192, [128, 4096, 1], [128, 2, 1], 4, 20, False),
])
def test_tile_bound_on_the_kits_designs(what, halo, nx, ny, grid, block, load, smem, ok):
    needed, how = launches.tile_bound(halo, nx, ny, grid, block[0] * block[1] * block[2], load)
    assert (smem >= needed) == ok, f"{what}: {smem} bytes against {needed} ({how})"


# ---------------------------------------------------------------- grid storage

FIXED, HALF = "_Z17fixed_point_storePKfPhi", "_Z10half_storePKfP6__halfi"


@pytest.fixture
def stored(tmp_path):
    return spec(tmp_path, grid_storage={"type": "fp32", "rule": "Grids are fp32 between sweeps."})


def test_byte_stores_of_a_launched_kernel_fail_naming_the_instruction(stored):
    check = launches.storage_check(stored, bench(launched(FIXED, 0)), CODE)
    assert check.status == "fail" and check.severity == "constraint"
    assert "fixed_point_store, sm_90 offset 0x0130: STG.E.U8" in check.message
    assert "Grids are fp32 between sweeps." in check.message


def test_half_precision_fails_on_its_conversion_and_its_16_bit_store(stored):
    check = launches.storage_check(stored, bench(launched(HALF, 0)), CODE)
    assert check.status == "fail"
    assert [d.split(": ")[-1] for d in check.details] == ["F2FP.F16.F32.PACK_AB", "STG.E.U16"]


def test_float_kernels_pass_and_unlaunched_ones_do_not_count(stored):
    assert launches.storage_check(stored, bench(launched(TILE_READ, 1296)), CODE).status == "pass"


def test_without_the_audit_every_kernel_of_the_machine_code_is_read(stored):
    check = launches.storage_check(stored, bench(status="unavailable"), CODE)
    assert check.status == "fail" and "the launch audit did not run" in check.message


# ---------------------------------------------------------------- floating-point atomics (lab 7)

def residual(name, **changes):
    return kernel(launcher="residual_norm2", name=name, **changes)


def deterministic(*records):
    return dict(bench(*records), launchers=[{"name": "residual_norm2", "repeats": 3},
                                            {"name": "jacobi_sweep", "repeats": 3}])


def test_double_and_float_atomics_of_a_deterministic_launcher_fail():
    """Float or double atomics fail determinism on the machine code, even when repeated calls agree."""
    check = launches.atomics_check(deterministic(residual("_Z13float_atomicsPKfPdPf")), CODE)
    assert check.status == "fail" and check.severity == "constraint"
    assert [d.split(": ")[-1] for d in check.details] == ["REDG.E.ADD.F64.RN.STRONG.GPU",
                                                          "REDG.E.ADD.F32.FTZ.RN.STRONG.GPU"]


def test_a_compare_and_swap_loop_adding_doubles_fails():
    check = launches.atomics_check(deterministic(residual("_Z7cas_addPKfPd")), CODE)
    assert check.status == "fail" and "ATOMG.E.CAS.64" in check.message


def test_an_integer_ticket_passes_and_labs_without_determinism_have_no_rule():
    assert launches.atomics_check(deterministic(residual("_Z14integer_ticketPKfPf")), CODE).status == "pass"
    assert launches.atomics_check(bench(residual("_Z13float_atomicsPKfPdPf")), CODE) is None


def test_atomics_on_the_sm_80_code_read_as_red():
    check = launches.atomics_check(deterministic(residual("_Z13float_atomicsPKfPdPf")),
                                   launches.Code(PROGRAM[80], "sm_80"))
    assert "RED.E.ADD.F64.RN.STRONG.GPU" in check.message


# ---------------------------------------------------------------- host memory, at run time

def copy(src, dst, kind="memcpy"):
    return {"launcher": "residual_norm2", "kind": kind, "name": kind, "on_launcher_stream": True, "stream": 13,
            "count": 1, "bytes": 8192, "src_memory": src, "dst_memory": dst, "ms": 0.01}


@pytest.mark.parametrize("src, dst", [("device", "pageable"), ("device", "pinned"), ("managed", "device"),
                                      ("device", "unknown"), ("pageable", "pageable")])
def test_a_copy_reaching_host_memory_fails_whatever_the_source_names(src, dst):
    check = launches.host_memory_check(bench(copy(src, dst)))
    assert check.status == "fail" and check.severity == "constraint"
    assert f"from {src} to {dst} memory" in check.message


def test_device_copies_and_sets_pass():
    records = [copy("device", "device"), copy("device_static", "array"), copy("device", "device", "memset")]
    assert launches.host_memory_check(bench(*records)).status == "pass"


def test_a_set_of_host_memory_fails():
    assert launches.host_memory_check(bench(copy("pinned", "pinned", "memset"))).status == "fail"


# ---------------------------------------------------------------- the audit fails closed

def test_a_lost_record_fails_every_rule_the_audit_feeds(tmp_path, disassembled):
    """A flooded audit table loses the kernel's record: every rule it feeds fails."""
    lab = spec(tmp_path, shared_memory=True, shared_tile={"halo": 1, "rule": "A tile."},
               grid_storage={"type": "fp32", "rule": "fp32."})
    data = dict(bench(launched(TILE_READ, 18 * 18 * 4)), cc="9.0", nz=1)
    assert all(c.status == "pass" for c in launches.check_launches(lab, data, tmp_path))
    data["audit"]["lost"] = 1
    checks = launches.check_launches(lab, data, tmp_path)
    assert [c.name for c in checks] == ["launch stream", "host memory", "shared tile", "grid storage"]
    assert all(c.status == "fail" and c.message.startswith("the audit could not see every launch") for c in checks)


def test_the_code_of_another_architecture_is_not_verified(tmp_path, disassembled):
    """A GPU whose architecture the program holds no machine code for ran PTX the driver compiled."""
    lab = spec(tmp_path, shared_memory=True, shared_tile=LAB6_TILE, max_shared_planes=1)
    checks = launches.check_launches(lab, dict(bench(kernel()), cc="10.0"), tmp_path)
    assert {c.name: c.status for c in checks} == {"launch stream": "pass", "host memory": "pass",
                                                  "shared tile": "skipped", "max shared planes": "skipped"}
    assert "no machine code of kernel.cu for sm_100" in checks[2].message


def test_a_kernel_loaded_on_sm_86_runs_the_sm_80_code():
    assert sass.for_device(PROGRAM, "8.6")[1] == "sm_80" and sass.for_device(PROGRAM, "9.0")[1] == "sm_90"
