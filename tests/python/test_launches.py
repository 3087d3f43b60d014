"""launches.py: the launch audit's rules (issues 17 and 27), on audit records as the bench writes
them and PTX compiled by nvcc (tests/python/data/kernels_tile.ptx)."""

import json
import shutil
import subprocess

import pytest

from conftest import BASE_LAB_JSON, DATA, FAKE_LAB
from stencil_grader.base import labspec
from stencil_grader.grading import launches, ptx


def kernel(**changes):
    record = {"launcher": "stencil3d_sweep", "kind": "kernel", "name": "_Z6regtilePKfPfiii",
              "on_launcher_stream": True, "stream": 13, "count": 5, "grid": [4, 37, 2],
              "block": [32, 16, 1], "static_smem": 8704, "dynamic_smem": 0, "registers": 64, "ms": 0.37}
    record.update(changes)
    return record


def bench(*records, status="ok"):
    return {"nx": 512, "ny": 512, "nz": 512, "audit": {"status": status, "message": "", "calls": 5,
                                                        "lost": 0, "launches": list(records)}}


LAB6_TILE = {"halo": 1, "smallest_tile": [32, 6], "row_padding": 4, "rule": "One plane of the tile."}


def spec(tmp_path, **constraints):
    data = dict(BASE_LAB_JSON, api="stencil3d_sweep", bench=dict(BASE_LAB_JSON["bench"], nz=4),
                constraints=dict(BASE_LAB_JSON["constraints"], **constraints))
    path = tmp_path / FAKE_LAB / "lab.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return labspec.parse(data, path)


@pytest.fixture
def lab6(tmp_path):
    return spec(tmp_path, shared_memory=True, shared_tile=LAB6_TILE, max_shared_planes=1)


def module_of(text):
    return ptx.parse_ptx(text)


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


FLOAT4_PTX = """.version 9.0
.target sm_90
.address_size 64
.visible .entry _Z6regtilePKfPfiii(
\t.param .u64 p0
)
.maxntid 512, 1, 1
{
\t.reg .f32 \t%f<5>;
\t.reg .b64 \t%rd<2>;
\tld.global.nc.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd1];
\tret;
}
"""


def test_the_lab_6_reference_as_launched_fits_one_plane(lab6, tmp_path):
    """4 x 37 blocks of 32 x 16 threads, float4 loads (the PTX says), 8704 bytes: one plane of a
    128 x 14 tile with its halo rows and padded halo columns."""
    allowed, how = launches.plane_bound(1, 1.75, 512, 512, [4, 37, 2], 512, 16)
    assert allowed == int(1 * 1.75 * 4 * (512 * 512 / 148)) and 8704 <= allowed < 2 * 8192
    check = launches.planes_check(lab6, bench(kernel()), module_of(FLOAT4_PTX))
    assert check.status == "pass" and "8704 bytes" in check.details[0]


def test_the_plane_factor_is_the_smallest_tile_of_lab_json():
    """(32 + 2 halo + 2 x 4 padding) x (6 + 2 halo) / (32 x 6): lab 6's declaration."""
    spec6 = labspec.load(labspec.KIT_ROOT / "labs" / "06-register-tiling" / "lab.json")
    assert spec6.constraints.shared_tile.plane_factor == 1.75


def test_two_halo_free_planes_fail(lab6, tmp_path):
    """Two planes of a 128 x 16 tile without any halo: 16384 bytes, more than one plane with its halo."""
    check = launches.planes_check(lab6, bench(kernel(static_smem=16384)), module_of(FLOAT4_PTX))
    assert check.status == "fail" and "16384 bytes" in check.message and "performance gets 0" in check.message


def test_three_planes_in_a_block_that_declares_more_threads_than_it_launches_fail(lab6, tmp_path):
    """__launch_bounds__(1024) but 256 threads launched, holding three planes of its 128 x 6 tile:
    the bound follows the launch (the old static check read 1024 from the PTX and let it pass)."""
    record = kernel(grid=[4, 86, 1], block=[32, 8, 1], static_smem=3 * 136 * 8 * 4)
    check = launches.planes_check(lab6, bench(record), module_of(FLOAT4_PTX))
    assert check.status == "fail"


def test_dynamic_shared_memory_counts(lab6, tmp_path):
    check = launches.planes_check(lab6, bench(kernel(static_smem=0, dynamic_smem=20000)), None)
    assert check.status == "fail" and "20000 dynamic" in check.details[-1]


def test_a_grid_stride_block_cannot_claim_the_whole_plane(lab6, tmp_path):
    """A few blocks looping over many tiles: the share of the plane is capped by what the
    block's threads can hold (two rows of their widest load each)."""
    allowed, _ = launches.plane_bound(1, 1.75, 512, 512, [132, 1, 1], 512, 4)
    assert allowed == int(1.75 * 4 * 512 * 2)
    record = kernel(grid=[132, 1, 1], static_smem=3 * 34 * 18 * 4)       # three 32 x 16 planes
    assert launches.planes_check(lab6, bench(record), None).status == "fail"


def test_labs_without_the_constraints_get_only_the_stream_check(tmp_path):
    plain = labspec.parse(BASE_LAB_JSON, tmp_path / FAKE_LAB / "lab.json")
    assert [c.name for c in launches.check_launches(plain, bench(kernel()), tmp_path)] == ["launch stream"]
    assert launches.check_launches(plain, None, tmp_path) == []



# ---------------------------------------------------------------- the shared tile (issue 27)

TILE_PTX = (DATA / "kernels_tile.ptx").read_text()
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
    return launches.tile_check(spec_, dict(bench(*records), nz=1), module_of(TILE_PTX))


def test_a_tile_with_its_halo_read_back_passes(lab2):
    check = tile(lab2, launched(TILE_READ, 18 * 18 * 4))
    assert check.status == "pass", check.message
    assert "1280 = 4 bytes x (256 cells + a halo of 1" in check.details[0]


def test_weights_only_fail_saying_what_the_rule_measures(lab2):
    check = tile(lab2, launched(WEIGHTS, 20, grid=(1024, 1, 1), block=(256, 1, 1)))
    assert check.status == "fail" and check.severity == "constraint"
    assert "kernel weights_only uses 20 bytes of shared memory per block, less than the 1280 bytes" in check.message
    assert "on every kernel your launcher starts" in check.message and "Stage the block's input tile" in check.message


def test_a_tile_written_and_never_read_fails():
    module = module_of(TILE_PTX)
    assert ptx.reads_shared(module.function(TILE_READ), module)
    assert not ptx.reads_shared(module.function(WRITE_ONLY), module)


def test_a_tile_written_and_never_read_fails_the_rule(lab2):
    check = tile(lab2, launched(WRITE_ONLY, 18 * 18 * 4))
    assert check.status == "fail" and "never reads shared memory (no ld.shared in its PTX)" in check.message


def test_a_decoy_never_launched_counts_for_nothing(lab2):
    """The launched kernel has no shared memory; the PTX's tile_read declares a tile and never ran."""
    check = tile(lab2, launched(PLAIN, 0))
    assert check.status == "fail" and "kernel plain uses 0 bytes" in check.message
    assert any("kernel tile_read declares shared memory but was never launched" in d for d in check.details)


def test_a_launched_decoy_beside_a_kernel_without_shared_memory_fails(lab2):
    check = tile(lab2, launched(TILE_READ, 18 * 18 * 4), launched(PLAIN, 0))
    assert check.status == "fail" and "kernel plain uses 0 bytes" in check.message


def test_a_kernel_the_ptx_lacks_cannot_pass(lab2):
    assert tile(lab2, launched("_Z7missingv", 4096)).status == "fail"


def test_the_tile_rule_needs_the_audit(lab2):
    check = launches.tile_check(lab2, dict(bench(status="unavailable"), nz=1), module_of(TILE_PTX))
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


# ---------------------------------------------------------------- grid storage (issue 27)

FIXED, HALF = "_Z17fixed_point_storePKfPhi", "_Z10half_storePKfP6__halfi"


@pytest.fixture
def stored(tmp_path):
    return spec(tmp_path, grid_storage={"type": "fp32", "rule": "Grids are fp32 between sweeps."})


def test_byte_stores_of_a_launched_kernel_fail_naming_the_line(stored):
    check = launches.storage_check(stored, bench(launched(FIXED, 0)), module_of(TILE_PTX))
    assert check.status == "fail" and check.severity == "constraint"
    assert "kernels_tile.cu line 51" in check.message and "st.global.u8" in check.message
    assert "Grids are fp32 between sweeps." in check.message


def test_half_precision_fails_on_its_conversion_and_its_16_bit_store(stored):
    check = launches.storage_check(stored, bench(launched(HALF, 0)), module_of(TILE_PTX))
    assert check.status == "fail"
    assert any("cvt.rn.f16.f32" in d and "kernels_tile.cu line 58" in d for d in check.details)
    assert any("st.global.u16" in d for d in check.details)


def test_float_kernels_pass_and_unlaunched_ones_do_not_count(stored):
    assert launches.storage_check(stored, bench(launched(TILE_READ, 1296)), module_of(TILE_PTX)).status == "pass"


def test_without_the_audit_every_kernel_of_the_ptx_is_read(stored):
    check = launches.storage_check(stored, bench(status="unavailable"), module_of(TILE_PTX))
    assert check.status == "fail" and "the launch audit did not run" in check.message


def _nvcc():
    return shutil.which("nvcc") or next((p for p in ["/usr/local/cuda/bin/nvcc"] if ptx.Path(p).is_file()), None)


@pytest.mark.skipif(not _nvcc(), reason="nvcc not installed")
def test_the_fixture_reads_as_this_nvccs_ptx_does(tmp_path):
    """kernels_tile.ptx was made by nvcc 13.0; the PTX this machine's nvcc makes of the same source
    gives the same findings (ld.shared, narrow accesses), so the parsers follow the real format."""
    out = tmp_path / "k.ptx"
    subprocess.run([_nvcc(), "-ptx", "-lineinfo", "-arch=compute_75", str(DATA / "kernels_tile.cu"), "-o", str(out)],
                   check=True, capture_output=True, timeout=120)
    fresh, recorded = module_of(out.read_text()), module_of(TILE_PTX)
    for m in (fresh, recorded):
        findings = {f.name: (ptx.reads_shared(f, m), [i for i, _, _ in ptx.narrow_accesses(f, m)])
                    for f in m.functions if f.kind == "entry"}
        assert findings[TILE_READ] == (True, []) and findings[WEIGHTS][0] and not findings[WRITE_ONLY][0]
        assert findings[FIXED][1] == ["st.global.u8"] * 3 and "cvt.rn.f16.f32" in findings[HALF][1]
