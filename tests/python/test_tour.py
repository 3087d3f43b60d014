"""The optimisation tour's arithmetic and the calibration rule (no GPU needed)."""

import pytest

from stencil_grader import score, tour


def _bench(ms, steps=1, gbps=1000.0, copy=2000.0):
    return {"ms_median": ms, "steps": steps, "gbps": gbps, "copy_gbps": copy, "ratio": gbps / copy,
            "device": "Test GPU"}


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


def test_render_names_device_and_every_row():
    rows = tour.tour_rows([("01", "reference", "lab 1", _bench(2.0)), ("02", "reference", "lab 2", _bench(1.0))])
    text = tour.render(rows, "Test GPU")
    assert "Test GPU" in text and "lab 1" in text and "2.00x" in text
    md = tour.render(rows, "Test GPU", markdown=True)
    assert md.count("\n|---") == 1 and "| lab 2 |" in md


@pytest.mark.parametrize("ratio, floor, target", [(0.719, 0.35, 0.68), (1.0, 0.5, 0.95), (0.2, 0.1, 0.19)])
def test_calibrated_target_rounds_down(ratio, floor, target):
    got_floor, got_target = score.calibrated_target(ratio)
    assert (got_floor, got_target) == (floor, target)
    assert got_target <= ratio and got_floor < got_target
