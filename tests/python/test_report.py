"""report.py and gradescope.py: Gradescope's file, the student's view, colour rules, replay line; cli `all` summary."""

import io
import json
import shlex

import pytest

from conftest import GOOD_KERNEL
from stencil_grader import cli
from stencil_grader.base import labspec
from stencil_grader.grading import gradescope, pipeline, report


def graded(fake_kit, tmp_path, text=GOOD_KERNEL, name="s"):
    folder = fake_kit.submission(name, text)
    run = pipeline.grade_lab(fake_kit.lab_dir, str(folder), tmp_path / "build" / name)
    return report.to_dict(run)


def test_gradescope_tests_sum_to_the_points(fake_kit, tmp_path):
    """results.json in Gradescope's documented format, no key the spec does not name; tests sum to the points."""
    data = graded(fake_kit, tmp_path, GOOD_KERNEL + "// WRONG\n")
    results = gradescope.results(data)
    assert results["score"] == 40 and "max_score" not in results and "leaderboard" not in results
    assert set(results) <= {"score", "execution_time", "output", "visibility", "stdout_visibility", "extra_data",
                            "tests", "leaderboard"}
    assert results["extra_data"] == {"lab": "01-fake-5pt", "verdict": "incorrect", "max_points": 100, "bonus": False}
    names = [t["name"] for t in results["tests"]]
    assert names == ["build and static checks", "correctness: basic", "correctness: edges", "performance"]
    assert all(set(t) == {"name", "score", "max_score", "output", "visibility"} and t["visibility"] == "visible"
               for t in results["tests"])
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(40)
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(100)
    basic = results["tests"][1]
    assert (basic["score"], basic["max_score"]) == (20, 40)
    assert basic["output"] == "pass: nx=1 ny=1\nfail: nx=33 ny=9: 2 mismatches; first at (x=3, y=4): got 1 want 2"
    assert "seed 777" in results["tests"][0]["output"]
    # what the student reads names no path of the instructor's: the kit's own command instead
    text = json.dumps(results)
    assert str(tmp_path) not in text and str(fake_kit.root) not in text
    assert "cd labs/01-fake-5pt && make check SEED=777" in results["tests"][0]["output"]
    board = [{"name": "GB/s", "value": 2550.0}, {"name": "ms", "value": 0.002, "order": "asc"}]
    assert gradescope.results(data, board)["leaderboard"] == board
    with pytest.raises(ValueError, match="leaderboard entry"):
        gradescope.results(data, [{"name": "GB/s", "value": 1, "order": "up"}])


def test_the_student_view_of_a_report_has_no_instructor_path(fake_kit, tmp_path):
    data = graded(fake_kit, tmp_path, GOOD_KERNEL + "// WRONG\n")
    assert str(tmp_path) in json.dumps(data)                     # the instructor's record keeps them
    view = report.student_view(data)
    assert str(tmp_path) not in json.dumps(view) and str(fake_kit.root) not in json.dumps(view)
    assert (view["source"], view["impl"], view["build_dir"]) == ("kernel.cu", "submission", None)
    assert view["replay"] == "cd labs/01-fake-5pt && make check SEED=777"
    assert report.student_view(dict(data, impl="reference"))["source"] == data["source"]


def test_gradescope_for_a_run_that_did_not_measure(fake_kit, tmp_path):
    data = graded(fake_kit, tmp_path, GOOD_KERNEL + "// NO_GPU\n")
    tests = gradescope.tests(data)
    assert [t["name"] for t in tests][-2:] == ["correctness", "performance"]
    assert "not measured: no GPU" in tests[-2]["output"]
    assert sum(t["score"] for t in tests) == 0


def test_split_rounds_to_the_total():
    parts = gradescope._split(33.33, [1, 1, 1])
    assert sum(parts) == pytest.approx(33.33) and len(parts) == 3


class FakeTty(io.StringIO):
    def isatty(self):
        return True


def test_colour_only_on_a_tty_without_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert report.use_colour(FakeTty()) is True
    assert report.use_colour(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert report.use_colour(FakeTty()) is False
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert report.use_colour(FakeTty()) is False


def test_the_text_report_seed_first_sandbox_and_colour_on_request(fake_kit, tmp_path):
    data = graded(fake_kit, tmp_path)
    plain = report.render_text(data, colour=False)
    assert "\033[" not in plain and "verdict      pass" in plain
    assert "\033[32mpass\033[0m" in report.render_text(data, colour=True)
    lines = report.render_text(data).splitlines()
    assert lines[0].startswith(f"seed: {data['seed']} (replay: cd ")
    (box,) = [line for line in lines if line.strip().startswith("sandbox")]
    assert "on: " in box and "directory" in box
    assert report.sandbox_line({}) is None
    line = report.sandbox_line({"user": "off: the grader is not root", "directory": "on: own",
                                "network": "off: a network namespace needs root"})
    assert line == "on: directory; off: user (the grader is not root); network (a network namespace needs root)"


def test_replay_commands_name_impl_unless_starter_and_are_quoted_for_the_shell():
    base = {"lab_dir": "labs/01-naive-5pt", "seed": 12}
    assert report.replay_command(dict(base, impl="starter")) == "cd labs/01-naive-5pt && make check SEED=12"
    assert report.replay_command(dict(base, impl="reference")).endswith("SEED=12 IMPL=reference")
    odd = "/class/o'brien $(touch PWNED) `id`"
    assert shlex.split(report.replay_command(dict(base, impl=odd))) == [
        "python3", "grader/grade.py", "lab", "labs/01-naive-5pt", "--impl", odd, "--seed", "12"]
    assert report.replay_command(dict(base, impl="/class/ann")) == \
        "cd labs/01-naive-5pt && make check SEED=12 IMPL=/class/ann"
    assert shlex.split(report.replay_command(dict(base, lab_dir="/my kit/labs/01", impl="starter"))) == [
        "cd", "/my kit/labs/01", "&&", "make", "check", "SEED=12"]


def test_all_grades_every_lab_and_summarises(fake_kit, tmp_path, monkeypatch, capsys):
    second = fake_kit.root / "labs" / "02-fake-tiled"
    second.mkdir()
    for item in ("Makefile", "fake"):
        (second / item).symlink_to(fake_kit.lab_dir / item)
    data = json.loads((fake_kit.lab_dir / "lab.json").read_text())
    data.update(lab="02-fake-tiled", number=2)
    (second / "lab.json").write_text(json.dumps(data))
    subs = tmp_path / "subs"
    for lab, text in (("01-fake-5pt", GOOD_KERNEL), ("02-fake-tiled", GOOD_KERNEL + "// RATIO=0.5\n")):
        (subs / lab).mkdir(parents=True)
        (subs / lab / "kernel.cu").write_text(text)
    monkeypatch.setattr(labspec, "discover_labs", lambda *a: [fake_kit.lab_dir, second])
    monkeypatch.setattr(pipeline, "default_build_dir", lambda lab, impl: tmp_path / "build" / lab)
    code = cli.main(["all", "--impl", str(subs)])
    out = capsys.readouterr().out
    assert code == 1                                            # lab 2 is slow
    summary = out[out.index("Summary"):]
    assert "01-fake-5pt" in summary and "pass" in summary and "100.00/100" in summary
    assert "02-fake-tiled" in summary and "slow" in summary and "0.500" in summary
    assert (tmp_path / "build" / "02-fake-tiled" / "report.json").is_file()


def test_two_launchers_each_get_a_line(fake_kit, tmp_path):
    data = graded(fake_kit, tmp_path)
    data["performance"]["bench"]["launchers"] = [
        {"name": "residual_norm2", "gbps": 2800.0, "ratio": 0.94, "ms_median": 0.383},
        {"name": "jacobi_sweep", "gbps": 3030.0, "ratio": 1.02, "ms_median": 0.531}]
    text = report.render_text(data)
    assert "residual_norm2: 2800.0 GB/s, ratio 0.940, median 0.383 ms" in text
    assert "jacobi_sweep: 3030.0 GB/s, ratio 1.020, median 0.531 ms" in text
    data["performance"]["bench"]["launchers"] = data["performance"]["bench"]["launchers"][:1]
    assert "residual_norm2:" not in report.render_text(data)        # one launcher: the sum says it all


def test_the_report_says_which_target_table_graded_and_what_it_means(fake_kit, tmp_path):
    own = graded(fake_kit, tmp_path, name="own")["performance"]["target"]
    assert own["generic"] is False and own["meaning"].startswith("targets calibrated on this GPU model")
    fake_kit.set_lab_json(targets={"generic": {"floor": 0.3, "target": 0.6}})       # no table for the fake GPU
    data = graded(fake_kit, tmp_path, name="generic")
    target = data["performance"]["target"]
    assert target["generic"] is True and target["table"] == "generic"
    assert "has no targets of its own, so the generic ones graded it" in target["meaning"]
    assert "what this means: " in report.render_text(data, colour=False)
