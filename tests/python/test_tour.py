"""The optimisation tour's arithmetic and the calibration rule (no GPU needed)."""

import pytest

from stencil_grader.grading import score
from stencil_grader.tools import tour


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


def test_each_part_has_its_own_speedups_and_table():
    rows = (tour.tour_rows([("01", "reference", "lab 1", _bench(2.0)), ("02", "reference", "lab 2", _bench(1.0))],
                           "2D, 16 x 8 grid")
            + tour.tour_rows([("05", "naive", "naive 3D", _bench(3.0)), ("05", "reference", "lab 5", _bench(1.5))],
                             "3D, 8 x 8 x 8 grid"))
    assert [r.part for r in rows] == ["2D, 16 x 8 grid"] * 2 + ["3D, 8 x 8 x 8 grid"] * 2
    assert rows[2].step_speedup is None and rows[2].cumulative_speedup == 1.0   # not over lab 2's row
    assert rows[3].cumulative_speedup == pytest.approx(2.0)
    md = tour.render(rows, "Test GPU", markdown=True)
    assert md.count("\n|---") == 2 and "**3D, 8 x 8 x 8 grid**" in md and "first row of each part" in md
    text = tour.render(rows, "Test GPU")
    assert text.index("2D, 16 x 8 grid:") < text.index("lab 2") < text.index("3D, 8 x 8 x 8 grid:")


def test_run_tour_skips_3d_rows_this_kit_lacks(monkeypatch):
    timed = []

    def fake_measure(lab, impl, seed=None):
        timed.append((lab, impl))
        return dict(_bench(1.0), nx=8, ny=8, nz=8 if lab >= "05" else 1, scaled_down=False)

    missing = tour.TOUR_ROWS_3D[-1][:2]
    monkeypatch.setattr(tour, "measure", fake_measure)
    monkeypatch.setattr(tour, "available", lambda lab, impl: (lab, impl) != missing)
    text = tour.run_tour()
    assert timed == [r[:2] for r in tour.TOUR_ROWS] + [r[:2] for r in tour.TOUR_ROWS_3D if r[:2] != missing]
    assert "3D, 8 x 8 x 8 grid:" in text and tour.TOUR_ROWS_3D[-1][2] not in text


def test_3d_rows_build_in_the_tour_directory():
    lab, impl, _ = tour.TOUR_ROWS_3D[0]
    assert tour.available(lab, impl) and tour.available("05-z-coarsening", "reference")
    assert not tour.available("05-z-coarsening", "tests/submissions/05-z-coarsening/no_such_submission")
    assert tour._build_dir(lab, impl) == tour.KIT_ROOT / "build" / "tour" / lab / "naive_3d"


@pytest.mark.parametrize("ratio, floor, target", [(0.719, 0.35, 0.68), (1.0, 0.5, 0.95), (0.2, 0.1, 0.19)])
def test_calibrated_target_rounds_down(ratio, floor, target):
    got_floor, got_target = score.calibrated_target(ratio)
    assert (got_floor, got_target) == (floor, target)
    assert got_target <= ratio and got_floor < got_target


def test_roofline_places_each_row_at_its_intensity():
    rows = tour.tour_rows([("04-max-smem", "reference", "lab 4", _bench(8.0, steps=8, gbps=3000.0)),
                           ("08-temporal-blocking", "reference", "lab 8", _bench(2.0, steps=8, gbps=7200.0))],
                          "2D, 4 x 4 grid")
    rows += tour.tour_rows([("05-z-coarsening", "reference", "lab 5", _bench(1.0, gbps=2800.0))], "3D, 4 x 4 x 4 grid")
    points = {p.label: p for p in tour.roofline_points(rows)}
    assert points["lab 4"].intensity == pytest.approx(9 / 8)           # 9 FLOP per 8 compulsory bytes
    assert points["lab 8"].intensity == pytest.approx(9 * 8 / 8)       # 8 sweeps per pass over DRAM
    assert points["lab 5"].intensity == pytest.approx(13 / 8)          # the 3D 7-point update
    assert points["lab 8"].gflops == pytest.approx(7200.0 * 9 / 8)     # useful GFLOP/s from effective GB/s


def test_draw_says_why_nothing_was_drawn(monkeypatch, tmp_path):
    rows = tour.tour_rows([("01-naive-5pt", "reference", "lab 1", _bench(1.0))], "2D")
    monkeypatch.setattr(tour.plot, "path_bars", lambda *a: False)
    assert tour.draw(rows, "Test GPU", 132, tmp_path / "p.png") == ["(no plots: matplotlib is not installed)"]
    monkeypatch.setattr(tour.plot, "path_bars", lambda *a: True)
    monkeypatch.setattr(tour.plot, "max_sm_clock_mhz", lambda: None)
    said = tour.draw(rows, "Test GPU", 132, tmp_path / "p.png")
    assert said[0].startswith("path: ") and "no roofline" in said[1]


def test_run_tour_with_nothing_to_time_is_an_error(monkeypatch):
    monkeypatch.setattr(tour, "available", lambda lab, impl: False)
    with pytest.raises(tour.TourError, match="nothing to time"):
        tour.run_tour()
