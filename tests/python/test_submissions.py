"""Known submissions (tests/submissions/<lab>/expected.json) get their expected verdicts.

The real entries need the real lab build (grader/lab.mk, nvcc, Check) and, most of them, a GPU:
without one they are skipped with the reason, never reported as passed.  The fake-kit tests
below check check_verdicts.py itself.
"""

import json
import sys

import pytest

from conftest import GOOD_KERNEL, KIT_ROOT

sys.path.insert(0, str(KIT_ROOT / "tests" / "submissions"))
import check_verdicts  # noqa: E402  (needs the path above)

ENTRIES = check_verdicts.collect()


def test_expected_files_parse():
    for entry in ENTRIES:
        assert entry.verdict and isinstance(entry.needs_gpu, bool)
    if not ENTRIES:
        pytest.skip("no tests/submissions/*/expected.json entries yet")


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_submission_gets_expected_verdict(entry):
    missing = check_verdicts.tooling_missing()
    if missing:
        pytest.skip(f"needs the real lab build: {missing}")
    outcome = check_verdicts.check_entry(entry)
    if outcome.status == "skipped":
        pytest.skip(f"needs a GPU: {outcome.message}")
    assert outcome.status == "passed", outcome.message


# ---------------------------------------------------------------- check_verdicts.py itself

@pytest.fixture
def known(fake_kit):
    """A fake kit with tests/submissions/01-fake-5pt/expected.json."""
    folder = fake_kit.root / "tests" / "submissions" / "01-fake-5pt"
    table = {
        "good": ("pass", True, ""),
        "broken": ("compile_error", False, "COMPILE_ERROR\n"),
        "cheat": ("forbidden", False, "void f() { cudaMemcpy(0, 0, 0, cudaMemcpyDeviceToHost); }\n"),
        "claims-pass-but-wrong": ("pass", True, "// WRONG\n"),
        "no-gpu-here": ("pass", True, "// NO_GPU\n"),
        "no-gpu-but-broken": ("pass", True, "// NO_GPU\nCOMPILE_ERROR\n"),
    }
    for name, (_, _, extra) in table.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "kernel.cu").write_text(GOOD_KERNEL + extra)
    (folder / "expected.json").write_text(json.dumps(
        {name: {"verdict": v, "needs_gpu": g, "why": f"{name} case"} for name, (v, g, _) in table.items()}))
    return fake_kit


def test_verdict_comparison(known):
    entries = {e.name: e for e in check_verdicts.collect(known.root)}
    status = {name: check_verdicts.check_entry(e, known.root, check_tooling=False).status
              for name, e in entries.items()}
    assert status == {"good": "passed", "broken": "passed", "cheat": "passed",
                      "claims-pass-but-wrong": "failed",
                      "no-gpu-here": "skipped",           # not measured: neither passed nor failed
                      "no-gpu-but-broken": "failed"}      # a compile error needs no GPU to be seen


def test_main_prints_one_line_each_and_the_counts(known, capsys):
    code = check_verdicts.main([], kit_root=known.root, check_tooling=False)
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert len(lines) == 7 and lines[-1] == "3 passed, 2 failed, 1 skipped"
    assert any(line.startswith("FAIL  01-fake-5pt/claims-pass-but-wrong") and "verdict incorrect, expected pass"
               in line for line in lines)
    assert any(line.startswith("SKIP  01-fake-5pt/no-gpu-here") and "not measured" in line for line in lines)


def test_bad_expected_file(known):
    path = known.root / "tests" / "submissions" / "01-fake-5pt" / "expected.json"
    path.write_text(json.dumps({"good": {"verdict": "great", "needs_gpu": True}}))
    with pytest.raises(check_verdicts.ExpectedError, match="good must be"):
        check_verdicts.collect(known.root)


def test_missing_tooling_is_a_skip_with_the_reason(tmp_path):
    assert "grader/lab.mk" in check_verdicts.tooling_missing(tmp_path)
    entry = check_verdicts.Entry("01-x", "a", tmp_path, "pass", False, "")
    outcome = check_verdicts.check_entry(entry, tmp_path)
    assert outcome.status == "skipped" and "build tooling missing" in outcome.message
