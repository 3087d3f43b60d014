"""A T4-slow GPU's make check stays under a minute: lab 1 swept SLOWDOWN times per call (needs a GPU)."""

import json
import subprocess
import sys
import time

import pytest

from conftest import GRADE_PY, HAVE_GPU, KIT_ROOT

#: About an H100's copy bandwidth over a T4's (2960 GB/s measured over 320 GB/s nominal).
SLOWDOWN = 10
LAB = "01-naive-5pt"


def slow_kernel() -> str:
    """Lab 1's reference whose launcher sweeps SLOWDOWN times per call (same output, SLOWDOWN times the time)."""
    source = (KIT_ROOT / "reference" / LAB / "kernel.cu").read_text()
    head = 'extern "C" void stencil2d_sweep('
    assert source.count(head) == 1
    return (source.replace(head, "static void sweep_once(") +
            f'\nextern "C" void stencil2d_sweep(const float *d_in, float *d_out, int nx, int ny,\n'
            f'                                stencil2d_coeffs c, cudaStream_t stream)\n'
            f'{{\n    for (int i = 0; i < {SLOWDOWN}; i++)\n'
            f'        sweep_once(d_in, d_out, nx, ny, c, stream);\n}}\n')


@pytest.mark.skipif(not HAVE_GPU, reason="needs a GPU: the time of a grading is measured")
def test_a_ten_times_slower_gpu_grades_a_lab_in_under_a_minute(tmp_path):
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "kernel.cu").write_text(slow_kernel())
    out = tmp_path / "report.json"
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(GRADE_PY), "lab", LAB, "--impl", str(tmp_path / "slow"),
                           "--build-dir", str(tmp_path / "build"), "--json", str(out)],
                          cwd=KIT_ROOT, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - start
    report = json.loads(out.read_text())
    assert report["correctness"]["verdict"] == "pass", done.stdout + done.stderr
    bench = report["performance"]["bench"]
    copy_probe = bench["seconds"]["copy_probe"]
    projected = wall + (SLOWDOWN - 1) * copy_probe
    print(f"{bench['device']}: make check of {LAB} with a launcher {SLOWDOWN}x slower: {wall:.1f} s "
          f"(bench {report['seconds']['bench']:.1f} s: {bench['repetitions']} timed calls of "
          f"{bench['ms_median']:.2f} ms; copy probe {copy_probe:.2f} s, x{SLOWDOWN} on a slow GPU: "
          f"{projected:.1f} s projected)")
    # SLOWDOWN sweeps per call, each at most at copy speed (1.05: the plausibility bound).
    assert bench["ratio"] < 1.05 / SLOWDOWN, "the launcher did not slow down"
    assert wall < 60 and projected < 60
