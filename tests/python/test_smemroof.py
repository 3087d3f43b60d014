"""The shared-memory roof microbenchmark (grader/harness/smem_roof.cu, instructor/roofs.py): it builds, what
it prints becomes a valid record, and lab 8's roofline reads the record back (no GPU needed; the run itself is a
GPU's: make smem-roof)."""

import json
import stat
import subprocess

import pytest

from stencil_grader.base.files import write_json
from stencil_grader.base import toolkit
from stencil_grader.base.cliargs import UsageError
from stencil_grader.grading import sass
from stencil_grader.instructor import records, roofs

PRINTED = {"device": "Fake GPU 80GB", "cc": "9.0", "sm_count": 132, "block": 256, "loads_per_round": 8,
           "accesses": [{"bytes": 4, "blocks_per_sm": 8, "bytes_per_clock_per_sm": 120.5, "lowest_sm": 118.0,
                         "clock_mhz": 1755, "ms": 21.3},
                        {"bytes": 16, "blocks_per_sm": 4, "bytes_per_clock_per_sm": 126.9, "lowest_sm": 125.1,
                         "clock_mhz": 1755, "ms": 20.2}]}


def fake_program(tmp_path, body):
    path = tmp_path / "smem_roof"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_what_the_program_prints_is_a_valid_record_that_the_roofline_reads_back(tmp_path):
    got = roofs.measure_smem_roof(fake_program(tmp_path, f"cat <<'END'\n{json.dumps(PRINTED)}\nEND\n"))
    record = roofs.smem_roof_record(got, "a test")
    path = write_json(tmp_path / "data" / "fake" / "smem-roof.json", record)
    assert records.validate_record(json.loads(path.read_text()), path) == []
    assert [r["id"] for r in record["rows"]] == ["4B", "16B"]
    assert roofs.recorded_bytes_per_clock("fake", data_dir=tmp_path / "data") == 120.5
    assert roofs.recorded_bytes_per_clock("fake", 16, data_dir=tmp_path / "data") == 126.9
    assert roofs.recorded_bytes_per_clock("other", data_dir=tmp_path / "data") is None


@pytest.mark.parametrize("body, said", [
    ("echo 'smem_roof: no CUDA GPU is visible (cudaGetDeviceCount)' >&2; exit 2\n", "no CUDA GPU is visible"),
    ("echo not json\n", "printed no JSON"),
])
def test_a_failing_run_says_why(tmp_path, body, said):
    with pytest.raises(UsageError, match=said):
        roofs.measure_smem_roof(fake_program(tmp_path, body))


def test_a_run_that_hangs_is_stopped_and_said(tmp_path):
    with pytest.raises(UsageError, match="did not run to its end"):
        roofs.measure_smem_roof(fake_program(tmp_path, "sleep 30\n"), timeout_s=0.5)


@pytest.mark.skipif(toolkit.find_nvcc() is None, reason="no nvcc (the CUDA toolkit) here")
def test_the_microbenchmark_builds_and_makes_every_load(tmp_path):
    """Built for sm_90: its machine code holds the 4-byte and the 16-byte shared loads it exists to time."""
    binary = roofs.build_smem_roof("9.0", out_dir=tmp_path)
    tool = sass.cuobjdump()
    if not tool:
        pytest.skip("no cuobjdump to read the machine code")
    code = subprocess.run([tool, "-sass", str(binary)], capture_output=True, text=True, check=True).stdout
    assert code.count("LDS.128") >= 8 and code.count("LDS ") >= 8
