"""plot.py: roofline and bar data without matplotlib; the pictures with it, False and no file without."""

import math
import sys
from dataclasses import dataclass

import pytest

from stencil_grader.base import kinds
from stencil_grader.base.cliargs import UsageError
from stencil_grader.grading import plot
from stencil_grader.instructor import pictures, roofs

#: What one cell update is worth, as grader/kinds.json declares it: 9 FLOP (2D 5-point) or 13 (3D
#: 7-point) over 8 compulsory bytes.
FIVE = kinds.get("stencil2d_sweep").launchers[0]
SEVEN = kinds.get("stencil3d_sweep").launchers[0]
H100_COPY = 2959.1      # GB/s, what lab 8's bench measured on an H100 (2026-11-23)


def test_peak_estimate_matches_the_h100_datasheet():
    # 132 SMs x 128 lanes x 2 FLOP x 1.98 GHz = 66.9 TFLOP/s (datasheet: 67)
    assert plot.peak_fp32_gflops(132, 1980) == pytest.approx(66908.16)
    assert plot.peak_fp32_gflops(108, 1410, lanes_per_sm=64) == pytest.approx(19491.84)  # A100: 19.5


def test_intensity_of_one_sweep_and_of_fused_sweeps():
    assert plot.intensity(FIVE) == 9 / 8
    assert plot.intensity(FIVE, sweeps_per_pass=8) == 9.0
    assert plot.intensity(SEVEN) == 13 / 8


def test_point_from_gbps_is_effective_bandwidth_times_flop_per_byte():
    p = plot.point_from_gbps("lab 8", 7390.7, FIVE, sweeps_per_pass=8)
    assert p.intensity == 9.0
    assert p.gflops == pytest.approx(7390.7 * 9 / 8)


def test_roofline_places_points_under_the_roof():
    pts = [plot.point_from_gbps("lab 4", 2991.0, FIVE), plot.point_from_gbps("lab 8", 7390.7, FIVE, sweeps_per_pass=8),
           plot.RooflinePoint("made-up compute-bound kernel", 100.0, 50000.0)]
    d = plot.roofline_data(pts, H100_COPY, 66908.16)
    assert d.ridge == pytest.approx(66908.16 / H100_COPY)          # about 22.6 FLOP/B
    lab4, lab8, made_up = d.points
    assert d.fraction_of_roof(lab4) == pytest.approx(2991.0 / H100_COPY)   # the ratio the grader scores
    assert d.fraction_of_roof(lab8) == pytest.approx(7390.7 / (8 * H100_COPY))
    assert d.fraction_of_roof(made_up) == pytest.approx(50000.0 / 66908.16)   # right of the ridge: under the peak
    lo, hi = d.x_range
    assert lo <= 1.125 / 2 and hi >= 2 * 100 and hi >= 2 * d.ridge
    assert math.log10(lo).is_integer() and math.log10(hi).is_integer()
    assert d.roof[0] == (lo, lo * H100_COPY) and d.roof[1] == (d.ridge, 66908.16)
    assert d.roof[2] == (hi, 66908.16)


@pytest.mark.parametrize("copy, peak, point, match", [
    (0, 1e4, plot.RooflinePoint("a", 1, 1), "copy_gbps"),
    (3000, float("nan"), plot.RooflinePoint("a", 1, 1), "peak_gflops"),
    (3000, 1e4, plot.RooflinePoint("a", 0, 1), "intensity of 'a'"),
    (3000, 1e4, plot.RooflinePoint("a", 1, -5), "gflops of 'a'"),
])
def test_bad_figures_are_refused(copy, peak, point, match):
    with pytest.raises(ValueError, match=match):
        plot.roofline_data([point], copy, peak)


@dataclass
class Row:                           # the attributes of tour.TourRow that a bar needs
    kernel: str
    ratio: float
    part: str = ""


def test_bars_refuse_a_ratio_that_is_no_fraction(tmp_path):
    with pytest.raises(ValueError, match="ratio of 'x'"):
        pictures.path_bars([("x", -1.0)], "GPU", tmp_path / "b.png")
    with pytest.raises(ValueError, match="ratio of 'y'"):
        pictures.path_bars([Row("y", float("inf"))], "GPU", tmp_path / "b.png")
    assert list(tmp_path.iterdir()) == []


def test_without_matplotlib_nothing_is_drawn(tmp_path, monkeypatch):
    """Optional pictures are left out; a command that needs them names the package (exit 2)."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # import matplotlib -> ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    pts = [plot.point_from_gbps("lab 4", 2991.0, FIVE)]
    assert plot.roofline(pts, "GPU", H100_COPY, 66908.16, tmp_path / "r.png") is False
    assert pictures.path_bars([("lab 4", 1.01)], "GPU", tmp_path / "b.png") is False
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError):                               # figures are checked all the same
        plot.roofline(pts, "GPU", -1, 66908.16, tmp_path / "r.png")
    with pytest.raises(UsageError, match="the pictures need matplotlib: install python3-matplotlib"):
        plot.pyplot("the pictures")


def test_pictures_are_png_files(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: the pictures are optional")
    pts = [plot.point_from_gbps("lab 1", 2064.0, FIVE), plot.point_from_gbps("lab 4", 2991.0, FIVE),
           plot.point_from_gbps("lab 8", 7390.7, FIVE, sweeps_per_pass=8)]
    assert plot.roofline(pts, "NVIDIA H100 80GB HBM3", H100_COPY, 66908.16, tmp_path / "r.png") is True
    assert pictures.path_bars([("lab 1", 0.69), ("lab 4", 1.01), ("lab 8", 2.50)], "NVIDIA H100 80GB HBM3",
                          tmp_path / "b.png") is True
    assert pictures.path_bars([Row("lab 1", 0.69, "2D"), Row("lab 5", 0.5, "3D")], "GPU", tmp_path / "p.png") is True
    for name in ("r.png", "b.png", "p.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lab_roofline_draws_only_what_it_can_place(monkeypatch, tmp_path):
    bench = {"output_ok": True, "gbps": 2900.0, "copy_gbps": 2970.0, "sm_count": 132, "device": "Test GPU"}
    monkeypatch.setattr(plot, "max_sm_clock_mhz", lambda: 1980.0)
    assert plot.lab_roofline(kinds.get("jacobi_residual"), bench, tmp_path / "r.png") is None    # lab 7: two kernels
    assert plot.lab_roofline(kinds.get("stencil2d_sweep"), dict(bench, output_ok=False), tmp_path / "r.png") is None
    assert plot.lab_roofline(kinds.get("stencil2d_sweep"), None, tmp_path / "r.png") is None
    monkeypatch.setattr(plot, "max_sm_clock_mhz", lambda: None)
    assert plot.lab_roofline(kinds.get("stencil3d_sweep"), bench, tmp_path / "r.png") is None
    monkeypatch.setattr(plot, "max_sm_clock_mhz", lambda: 1980.0)
    if plot.pyplot() is None:
        assert plot.lab_roofline(kinds.get("stencil3d_sweep"), bench, tmp_path / "r.png") is None
    else:
        assert plot.lab_roofline(kinds.get("stencil3d_sweep"), bench, tmp_path / "r.png") == str(tmp_path / "r.png")
        assert (tmp_path / "r.png").stat().st_size > 0


# ---------------------------------------------------------------- ceilings under the roof

def test_peak_without_fma_is_half_the_fma_peak():
    # an FMUL or an FADD is 1 FLOP per lane and clock, an FMA 2: H100 SXM 33,454 GFLOP/s
    assert roofs.peak_fp32_no_fma_gflops(132, 1980) == pytest.approx(66908.16 / 2)
    assert roofs.peak_fp32_no_fma_gflops(108, 1410, lanes_per_sm=64) == pytest.approx(19491.84 / 2)


def test_rate_ceiling_is_sms_times_rate_times_clock_over_cost_per_useful_update():
    # issue: 132 SMs x 128 thread instructions per clock x 1.98 GHz = 3.345e13 instructions/s;
    # 9 instructions per useful update (every one a useful FLOP, no FMA) gives the no-FMA peak
    issue = roofs.rate_ceiling_gflops(132, 1980, roofs.ISSUE_PER_SM_PER_CLOCK, 9.0, FIVE.flop_per_cell)
    assert issue == pytest.approx(roofs.peak_fp32_no_fma_gflops(132, 1980))
    # 14.7 instructions per useful update: 9/14.7 of it, 18.2 TB/s of effective bandwidth
    lab8 = roofs.rate_ceiling_gflops(132, 1980, roofs.ISSUE_PER_SM_PER_CLOCK, 14.7, FIVE.flop_per_cell)
    assert lab8 == pytest.approx(132 * 128 * 1.98e9 / 14.7 * 9 / 1e9)
    assert lab8 * 8 / 9 == pytest.approx(18205, rel=1e-3)
    # shared memory: 32 four-byte accesses per clock, 6 per update, R = 1.173: 9.5 TB/s effective
    tile = roofs.rate_ceiling_gflops(132, 1980, roofs.SHARED_ACCESSES_PER_SM_PER_CLOCK, 6 * 1.173, FIVE.flop_per_cell)
    assert tile * 8 / 9 == pytest.approx(132 * 32 * 1.98e9 / (6 * 1.173) * 8 / 1e9)
    assert roofs.rate_ceiling_gflops(132, 1980, 128, 9.0, SEVEN.flop_per_cell) == pytest.approx(issue * 13 / 9)
    with pytest.raises(ValueError, match="per_useful_update"):
        roofs.rate_ceiling_gflops(132, 1980, 128, 0, 9)
    with pytest.raises(ValueError, match="clock_mhz"):
        roofs.rate_ceiling_gflops(132, float("nan"), 128, 9, 9)


def test_roofline_data_keeps_ceilings_and_the_roof():
    no_fma = roofs.Ceiling("fp32 without FMA", 33454.08, "half the FMA peak")
    issue = roofs.Ceiling("issue, lab 8", 18205.0 * 9 / 8, "SMs x 128 x clock / 14.7")   # 18205 GB/s effective
    lab8 = plot.point_from_gbps("lab 8", 13631.0, FIVE, sweeps_per_pass=8)
    d = plot.roofline_data([lab8], H100_COPY, 66908.16, [no_fma, issue])
    assert d.ceilings == (no_fma, issue)                           # the caller's order, unchanged
    assert d.points == (lab8,)
    # the roof itself is unchanged by ceilings
    assert d.roof == plot.roofline_data([lab8], H100_COPY, 66908.16).roof


@pytest.mark.parametrize("ceiling, match", [
    (roofs.Ceiling("", 100.0, "derived"), "needs a label"),
    (roofs.Ceiling("x", 100.0, " "), "how it was measured or derived"),
    (roofs.Ceiling("x", 0.0, "derived"), "gflops of ceiling 'x'"),
    (roofs.Ceiling("x", float("inf"), "derived"), "gflops of ceiling 'x'"),
    (roofs.Ceiling("x", 70000.0, "derived"), "above the compute roof"),
    (("x", 100.0, "derived"), "has a label, gflops and how"),
])
def test_bad_ceilings_are_refused(ceiling, match):
    with pytest.raises(ValueError, match=match):
        plot.roofline_data([plot.RooflinePoint("a", 1, 1)], H100_COPY, 66908.16, [ceiling])


def test_a_ceiling_given_twice_is_refused():
    c = roofs.Ceiling("x", 100.0, "derived")
    with pytest.raises(ValueError, match="given twice"):
        plot.roofline_data([plot.RooflinePoint("a", 1, 1)], H100_COPY, 66908.16, [c, c])


def test_without_matplotlib_ceilings_are_still_checked(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    pts = [plot.point_from_gbps("lab 8", 13631.0, FIVE, sweeps_per_pass=8)]
    good = [roofs.Ceiling("fp32 without FMA", 33454.08, "half the FMA peak")]
    assert plot.roofline(pts, "GPU", H100_COPY, 66908.16, tmp_path / "r.png", good) is False
    with pytest.raises(ValueError, match="above the compute roof"):
        plot.roofline(pts, "GPU", H100_COPY, 66908.16, tmp_path / "r.png", [roofs.Ceiling("x", 1e6, "d")])
    assert list(tmp_path.iterdir()) == []


def test_picture_with_ceilings_is_a_png_file(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: the pictures are optional")
    pts = [plot.point_from_gbps("lab 4", 2991.0, FIVE), plot.point_from_gbps("lab 8", 13631.0, FIVE, sweeps_per_pass=8)]
    ceilings = [roofs.Ceiling("fp32 without FMA", 33454.08, "half the FMA peak: no FMA in lab 8"),
                roofs.Ceiling("issue, lab 8 reference", 18205.0 * 9 / 8,
                             "132 SMs x 128 instructions per clock x 1.98 GHz / 14.7 per useful update")]
    assert plot.roofline(pts, "NVIDIA H100 80GB HBM3", H100_COPY, 66908.16, tmp_path / "r.png", ceilings) is True
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- the recorded tours' pictures

def recorded_roofline(slug: str):
    """The roofline data of a recorded tour (handouts/data/SLUG/tour.json), as the handouts' picture draws it."""
    from stencil_grader.instructor import figures, pictures, tour
    record = figures.load_recordings().get(slug, "tour").data
    rows = tour.recorded_rows(record)
    device = record["device"]
    sm, clock = device["sm_count"], device["sm_clock_max_mhz"]
    ceilings, _ = roofs.roofline_ceilings(rows, sm, clock, pictures.recorded_parameters(device["name"]))
    points = pictures.roofline_points(rows)
    copy = record["copy_gbps"]
    return rows, plot.roofline_data(points, copy, plot.peak_fp32_gflops(sm, clock), ceilings)


def test_the_roofline_legend_quotes_the_tables_ratios():
    """Each legend quotes its table row's ratio, not one recomputed against the roof."""
    from stencil_grader.instructor import figures
    rows, data = recorded_roofline("h100")
    recs = figures.load_recordings()
    for number, (row, point) in enumerate(zip(rows, data.points), 1):
        table = figures.figure(f"h100/tour {row.id} ratio", recs).text
        assert f"{number}. {row.kernel}: {table} of copy" in plot._legend_text(number, point, data)
    lab5 = next(p for r, p in zip(rows, data.points) if r.id == "05/reference")
    assert plot._legend_text(10, lab5, data).endswith(": 0.96 of copy")


@pytest.mark.parametrize("slug", ["h100", "h200"])
def test_recorded_roofline_has_distinct_points_and_labels_that_do_not_collide(slug):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: the label-overlap check needs it")
    rows, data = recorded_roofline(slug)
    fig, ax, labels = plot.roofline_figure(data, f"test {slug}")
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        lines = [line for line in ax.get_lines() if line.get_marker() not in (None, "None", "")]
        looks = [(line.get_color(), line.get_marker()) for line in lines]
        assert len(lines) == len(rows) and len(set(line.get_color() for line in lines)) == len(rows), looks
        from matplotlib.text import Text
        words = lambda t: Text.get_window_extent(t, renderer)      # the text alone, not the leader line  # noqa
        boxes = [words(t) for t in labels]
        others = [words(t) for t in ax.texts if t not in labels]
        frame = ax.get_window_extent(renderer)
        for i, a in enumerate(boxes):
            assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1, labels[i]
            for b in boxes[i + 1:] + others:
                assert not a.overlaps(b), (labels[i].get_text(), a, b)
        for i, a in enumerate(others):
            for b in others[i + 1:]:
                assert not a.overlaps(b)
    finally:
        import matplotlib.pyplot as plt
        plt.close(fig)


def test_label_spreading_keeps_order_and_gaps():
    assert plot._spread([10, 10, 10], 5, 0, 100) == [10, 15, 20]
    out = plot._spread([99, 98, 97], 5, 0, 100)
    assert sorted(out) == out[::-1] and min(abs(a - b) for a in out for b in out if a != b) >= 5
    assert max(out) <= 100
