"""Lab 7's `make solve` without a GPU: a fake bench replays recorded `bench --solve` output (data/README.md)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from stencil_grader import cli
from stencil_grader.base import protocol
from stencil_grader.student import solve

DATA = Path(__file__).resolve().parent / "data"
FIXTURE = DATA / "solve_n17.json"
NAN_FIXTURE = DATA / "solve_nan.json"


def _fake_bench(build_dir: Path, stdout_file: Path | None = None, exit_code: int = 0,
                stderr: str = "", printf: str = "") -> Path:
    """BUILD_DIR/bench: stdout_file's text on the channel for --solve (a printf on stdout), stderr, exit_code."""
    build_dir.mkdir(parents=True, exist_ok=True)
    bench = build_dir / "bench"
    bench.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "assert sys.argv[1] == '--solve', sys.argv\n"
        "channel = os.fdopen(int(os.environ['STENCIL_CHANNEL_FD']), 'w')\n"
        f"sys.stdout.write({printf!r})\n"
        f"text = open({str(stdout_file)!r}).read() if {stdout_file is not None!r} else ''\n"
        "channel.write(text)\n"
        f"sys.stderr.write({stderr!r})\n"
        f"sys.exit({exit_code})\n")
    bench.chmod(0o755)
    return bench


@pytest.fixture
def data() -> dict:
    return solve.parse(FIXTURE.read_text())


def test_fixture_parses_with_one_residual_per_sweep(data):
    assert data["n"] == 17 and data["h"] == pytest.approx(1 / 16)
    assert len(data["residual"]) == data["sweeps"] + 1
    assert data["rate_expected"] == pytest.approx(math.cos(math.pi / 16))


def test_measured_rate_is_cos_pi_h(data):
    rate, last = solve.measured_rate(data["residual"])
    assert 20 <= last <= data["sweeps"]
    assert rate == pytest.approx(math.cos(math.pi / 16), rel=1e-3)


def test_measured_rate_leaves_out_the_rounding_floor():
    rate = 0.9
    residual = [max(rate ** k, 1e-6) for k in range(300)]      # geometric, then flat at 1e-6
    value, last = solve.measured_rate(residual)
    assert value == pytest.approx(rate, rel=1e-9)
    assert residual[last] > 100 * 1e-6 and last < 100


def test_measured_rate_needs_two_finite_sweeps():
    assert solve.measured_rate([5.0]) is None
    assert solve.measured_rate([math.nan, 1.0]) is None


def test_sweeps_needed_grow_as_one_over_h_squared():
    # ln R / ln cos(pi h) ~ 2 ln(1/R) / (pi h)^2: quadrupled when h is halved
    k1 = solve.sweeps_for(1e-5, math.cos(math.pi / 32))
    k2 = solve.sweeps_for(1e-5, math.cos(math.pi / 64))
    assert k2 / k1 == pytest.approx(4.0, rel=2e-3)
    assert k1 == pytest.approx(2 * math.log(1e5) / (math.pi / 32) ** 2, rel=3e-3)
    assert solve.sweeps_for(1e-5, 1.0) == math.inf


@pytest.mark.parametrize("sweeps, every", [(0, 1), (7, 1), (10, 1), (11, 2), (594, 100), (2389, 500)])
def test_default_every_gives_about_ten_rows(sweeps, every):
    assert solve.default_every(sweeps) == every


def test_history_has_every_kth_sweep_and_the_last():
    rows = solve.history([8.0, 4.0, 2.0, 1.0, 0.5], 3)
    assert [k for k, _, _ in rows] == [0, 3, 4]
    assert rows[1][1:] == (1.0, 0.125)


def test_summary_states_the_figures(data):
    text = solve.summary(data)
    assert f"converged: the residual 2-norm fell by 1e-05 in {data['sweeps']} sweeps" in text
    assert f"cos(pi h) = {math.cos(math.pi / 16):.6f}" in text
    assert "max |u - u*|" in text and f"{data['discretisation_error']:.3e}" in text
    assert "O(1/h^2)" in text
    rows = [line for line in text.splitlines() if line.strip() and line.split()[0].isdigit()]
    assert rows[0].split()[0] == "0" and rows[-1].split()[0] == str(data["sweeps"])
    assert 5 <= len(rows) <= 12


def test_summary_explains_a_stop_at_the_floor(data):
    stalled = dict(data, converged=False)
    assert "stopped after" in solve.summary(stalled) and "floor" in solve.summary(stalled)


def test_null_from_the_bench_is_read_as_nan_and_reported():
    data = solve.parse(NAN_FIXTURE.read_text())
    assert math.isnan(data["residual"][0])
    text = solve.summary(data)
    assert "not a number" in text and "NaN" in text
    mixed = solve.parse('{"n": 5, "h": 0.25, "sweeps": 1, "converged": false, "reduction": 1e-05, '
                        '"rate_expected": 0.7, "rate_measured": null, "max_error": null, '
                        '"discretisation_error": 0.05, "residual": [null, 2.5]}')
    assert math.isnan(mixed["max_error"]) and math.isnan(mixed["rate_measured"])
    assert math.isnan(mixed["residual"][0]) and mixed["residual"][1] == 2.5


@pytest.mark.parametrize("text, why", [
    ("not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"n": 5}', "lacks key 'h'"),
    ('{"n": 5, "h": 0.25, "sweeps": 2, "converged": true, "reduction": 1e-05, "rate_expected": 0.7, '
     '"max_error": 0.1, "discretisation_error": 0.05, "residual": [1.0]}', "1 residuals for 2 sweeps"),
])
def test_parse_rejects_what_is_not_the_solvers_json(text, why):
    with pytest.raises(solve.SolveError, match=why):
        solve.parse(text)


def test_no_gpu_is_a_clear_failure(tmp_path):
    _fake_bench(tmp_path, exit_code=2, stderr="no CUDA-capable GPU: CUDA driver version is insufficient\n")
    result = solve.solve(tmp_path)
    assert result.exit_code == 1
    assert "needs a GPU" in result.text and "no CUDA-capable GPU" in result.text


@pytest.mark.parametrize("code, why", [(3, "CUDA error"), (64, "refused"), (-9, "signal 9")])
def test_other_bench_failures(tmp_path, code, why):
    if code < 0:
        bench = tmp_path / "bench"
        tmp_path.mkdir(exist_ok=True)
        bench.write_text("#!/bin/sh\nkill -9 $$\n")
        bench.chmod(0o755)
    else:
        _fake_bench(tmp_path, exit_code=code, stderr="boom\n")
    result = solve.solve(tmp_path)
    assert result.exit_code == 1 and why in result.text


def test_missing_build_says_so(tmp_path):
    result = solve.solve(tmp_path)
    assert result.exit_code == 1 and "make build" in result.text


def test_nan_residual_exits_non_zero(tmp_path):
    _fake_bench(tmp_path, NAN_FIXTURE)
    result = solve.solve(tmp_path)
    assert result.exit_code == 1 and "not a number" in result.text


def test_cli_solve_prints_and_plots(tmp_path, capsys):
    _fake_bench(tmp_path / "build", FIXTURE)
    plot = tmp_path / "conv.png"
    assert cli.main(["solve", str(tmp_path / "build"), "--n", "17", "--every", "100", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "converged" in out and "\n       100  " in out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in out and not plot.exists()
    else:
        assert f"plot: {plot}" in out and plot.stat().st_size > 1000


def test_plot_goes_to_build_dir_by_default(tmp_path):
    pytest.importorskip("matplotlib")
    _fake_bench(tmp_path, FIXTURE)
    result = solve.solve(tmp_path)
    assert result.exit_code == 0 and (tmp_path / "solve.png").is_file()


@pytest.mark.parametrize("argv, why", [
    (["--reduction", "2"], "--reduction"),
    (["--every", "0"], "--every"),
])
def test_cli_usage_errors(tmp_path, capsys, argv, why):
    assert cli.main(["solve", str(tmp_path), *argv]) == cli.EXIT_USAGE
    assert why in capsys.readouterr().err


def test_fixture_is_the_benchs_format():
    # the keys the bench writes (grader/harness/kinds/jacobi_residual.c, solve_main), each through protocol.h
    keys = set(json.loads(FIXTURE.read_text()))
    assert set(protocol.SOLVE_KEYS) <= keys and "rate_measured" in keys
    source = (Path(__file__).resolve().parents[2] / "grader" / "harness" / "kinds" / "jacobi_residual.c").read_text()
    assert all(f"KEY_solve_{key}" in source for key in protocol.SOLVE_KEYS)


def test_a_long_history_arrives_whole_and_printf_does_not_matter(tmp_path):
    """A solve history of hundreds of KiB arrives whole on the channel; a kernel's printf changes nothing."""
    data = json.loads(FIXTURE.read_text())
    sweeps = 40000
    data.update(sweeps=sweeps, residual=[data["residual"][0] * 0.9999 ** k for k in range(sweeps + 1)])
    big = tmp_path / "big.json"
    big.write_text(json.dumps(data))
    assert big.stat().st_size > 256 * 1024
    _fake_bench(tmp_path / "build", big, printf="debug: sweep 1\n" * 1000)
    got = solve.run_solver(tmp_path / "build" / "bench", n=129)
    assert got["sweeps"] == sweeps and len(got["residual"]) == sweeps + 1
