"""launches.py: the launch audit's rules (issue 17), on audit records as the bench writes them."""

import pytest

from conftest import BASE_LAB_JSON, FAKE_LAB
from stencil_grader.base import labspec
from stencil_grader.grading import launches


def kernel(**changes):
    record = {"launcher": "stencil3d_sweep", "kind": "kernel", "name": "_Z6regtilePKfPfiii",
              "on_launcher_stream": True, "stream": 13, "count": 5, "grid": [4, 37, 2],
              "block": [32, 16, 1], "static_smem": 8704, "dynamic_smem": 0, "registers": 64, "ms": 0.37}
    record.update(changes)
    return record


def bench(*records, status="ok"):
    return {"nx": 512, "ny": 512, "nz": 512, "audit": {"status": status, "message": "", "calls": 5,
                                                        "lost": 0, "launches": list(records)}}


@pytest.fixture
def lab6(tmp_path):
    data = dict(BASE_LAB_JSON, api="stencil3d_sweep",
                bench=dict(BASE_LAB_JSON["bench"], nz=4),
                constraints=dict(BASE_LAB_JSON["constraints"], max_shared_planes=1))
    path = tmp_path / FAKE_LAB / "lab.json"
    path.parent.mkdir(parents=True)
    path.write_text(__import__("json").dumps(data))
    return labspec.parse(data, path)


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
    (tmp_path / "kernel.ptx").write_text(FLOAT4_PTX)
    allowed, how = launches.plane_bound(1, 512, 512, [4, 37, 2], 512, 16)
    assert allowed == int(1 * 1.75 * 4 * (512 * 512 / 148)) and 8704 <= allowed < 2 * 8192
    check = launches.planes_check(lab6, bench(kernel()), tmp_path)
    assert check.status == "pass" and "8704 bytes" in check.details[0]


def test_two_halo_free_planes_fail(lab6, tmp_path):
    """Two planes of a 128 x 16 tile without any halo: 16384 bytes, more than one plane with its halo."""
    check = launches.planes_check(lab6, bench(kernel(static_smem=16384)), tmp_path)
    assert check.status == "fail" and "16384 bytes" in check.message and "performance gets 0" in check.message


def test_three_planes_in_a_block_that_declares_more_threads_than_it_launches_fail(lab6, tmp_path):
    """__launch_bounds__(1024) but 256 threads launched, holding three planes of its 128 x 6 tile:
    the bound follows the launch (the old static check read 1024 from the PTX and let it pass)."""
    record = kernel(grid=[4, 86, 1], block=[32, 8, 1], static_smem=3 * 136 * 8 * 4)
    check = launches.planes_check(lab6, bench(record), tmp_path)
    assert check.status == "fail"


def test_dynamic_shared_memory_counts(lab6, tmp_path):
    check = launches.planes_check(lab6, bench(kernel(static_smem=0, dynamic_smem=20000)), tmp_path)
    assert check.status == "fail" and "20000 dynamic" in check.details[-1]


def test_a_grid_stride_block_cannot_claim_the_whole_plane(lab6, tmp_path):
    """A few blocks looping over many tiles: the share of the plane is capped by what the
    block's threads can hold (two rows of their widest load each)."""
    allowed, _ = launches.plane_bound(1, 512, 512, [132, 1, 1], 512, 4)
    assert allowed == int(1.75 * 4 * 512 * 2)
    record = kernel(grid=[132, 1, 1], static_smem=3 * 34 * 18 * 4)       # three 32 x 16 planes
    assert launches.planes_check(lab6, bench(record), tmp_path).status == "fail"


def test_labs_without_the_constraint_get_only_the_stream_check(tmp_path):
    spec = labspec.parse(BASE_LAB_JSON, tmp_path / FAKE_LAB / "lab.json")
    assert [c.name for c in launches.check_launches(spec, bench(kernel()), tmp_path)] == ["launch stream"]
    assert launches.check_launches(spec, None, tmp_path) == []
