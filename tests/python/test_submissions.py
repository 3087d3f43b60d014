"""Known submissions (tests/submissions/<lab>/expected.json) get their expected verdicts.

The real entries need the real lab build (grader/lab.mk, nvcc, Check) and, most of them, a GPU:
without one they are skipped with the reason, never reported as passed.  Every mutant's
kernel.patch must apply to its base here and now, GPU or not.  The fake-kit tests below check
check_verdicts.py itself.
"""

import hashlib
import json
import subprocess
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


MUTANTS = [e for e in ENTRIES if (e.path / check_verdicts.PATCH).is_file()]


@pytest.mark.parametrize("entry", MUTANTS, ids=[e.id for e in MUTANTS])
def test_every_mutant_patch_applies_to_its_base(entry):
    """A fix to a reference (or the starter, or a known-good submission) reaches its mutants; a
    change inside a hunk fails here, naming the mutant and its base, until the patch is remade."""
    base = check_verdicts.patch_base(entry.path / check_verdicts.PATCH)
    made = check_verdicts.source_bytes(entry.path)
    assert made != base.read_bytes(), f"{entry.id}: the patch changes nothing of {base}"
    assert not (entry.path / check_verdicts.SOURCE).exists()
    assert not (base.parent / check_verdicts.PATCH).exists(), f"{entry.id}: a base must be a whole file"


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
    (tmp_path / "kernel.cu").write_text(GOOD_KERNEL)
    entry = check_verdicts.Entry("01-x", "a", tmp_path, "pass", False, "")
    outcome = check_verdicts.check_entry(entry, tmp_path)
    assert outcome.status == "skipped" and "build tooling missing" in outcome.message


# ---------------------------------------------------------------- mutants kept as patches

def _mutant(kit, name: str, base_text: str, change) -> tuple:
    """A reference kernel.cu in the fake kit and a submission folder holding only kernel.patch,
    made with diff -u from change(base_text); returns (folder, base path, the mutant's text)."""
    base = kit.root / "reference" / "01-fake-5pt" / "kernel.cu"
    base.parent.mkdir(parents=True, exist_ok=True)
    base.write_text(base_text)
    folder = kit.root / "tests" / "submissions" / "01-fake-5pt" / name
    folder.mkdir(parents=True)
    mutant = change(base_text)
    (folder / "kernel.cu").write_text(mutant)
    diff = subprocess.run(["diff", "-u", "--label", "reference/01-fake-5pt/kernel.cu", "--label",
                           f"tests/submissions/01-fake-5pt/{name}/kernel.cu", str(base), str(folder / "kernel.cu")],
                          capture_output=True, text=True)
    (folder / "kernel.patch").write_text(diff.stdout)
    (folder / "kernel.cu").unlink()
    return folder, base, mutant


@pytest.fixture
def mutants(fake_kit):
    """A fake kit whose expected.json has one mutant of the reference, graded incorrect."""
    padded = "// line\n" * 20 + GOOD_KERNEL + "// end\n" * 20
    _mutant(fake_kit, "wrong", padded, lambda t: t.replace("/* ... */", "/* ... */ // WRONG"))
    (fake_kit.root / "tests" / "submissions" / "01-fake-5pt" / "expected.json").write_text(json.dumps(
        {"wrong": {"verdict": "incorrect", "needs_gpu": True, "why": "a mutant"}}))
    return fake_kit


def test_a_mutant_is_graded_as_its_patched_file(mutants, tmp_path):
    (entry,) = check_verdicts.collect(mutants.root)
    made = check_verdicts.source_bytes(entry.path, mutants.root)
    assert b"// WRONG" in made and made.count(b"// line") == 20
    outcome = check_verdicts.check_entry(entry, mutants.root, check_tooling=False)
    assert outcome.status == "passed" and outcome.verdict == "incorrect"     # the fake check saw WRONG
    assert sorted(p.name for p in entry.path.iterdir()) == ["kernel.patch"]   # nothing left behind
    count = check_verdicts.make_class([entry], tmp_path / "class", copies=2, kit_root=mutants.root)
    laid = tmp_path / "class" / "01-fake-5pt__wrong__1" / "01-fake-5pt" / "kernel.cu"
    assert count == 2 and laid.read_bytes() == made


def test_a_fix_to_the_base_reaches_the_mutant(mutants):
    (entry,) = check_verdicts.collect(mutants.root)
    base = mutants.root / "reference" / "01-fake-5pt" / "kernel.cu"
    base.write_text("// a fix above the hunk\n" * 3 + base.read_text().replace("// end", "// END"))
    made = check_verdicts.source_bytes(entry.path, mutants.root).decode()
    assert made.startswith("// a fix above the hunk\n") and "// WRONG" in made and "// END" in made


def test_a_patch_that_no_longer_applies_fails_naming_mutant_and_base(mutants):
    (entry,) = check_verdicts.collect(mutants.root)
    base = mutants.root / "reference" / "01-fake-5pt" / "kernel.cu"
    base.write_text(base.read_text().replace('"stencil_lab.h"', '"stencil_lab.h"  /* fixed */'))  # in the hunk
    for tooling in (False, True):        # failed, not skipped, even where nothing can be built
        outcome = check_verdicts.check_entry(entry, mutants.root, check_tooling=tooling)
        assert outcome.status == "failed", outcome
        assert "tests/submissions/01-fake-5pt/wrong/kernel.patch (against " \
               "reference/01-fake-5pt/kernel.cu) no longer applies" in outcome.message
    assert check_verdicts.main(["--make-class", str(mutants.root / "class")], kit_root=mutants.root) == 1
    assert sorted(p.name for p in entry.path.iterdir()) == ["kernel.patch"]


def test_a_patch_names_a_whole_file_inside_the_kit(mutants):
    (entry,) = check_verdicts.collect(mutants.root)
    patch = entry.path / "kernel.patch"
    text = patch.read_text()
    for named, why in (("../../outside.cu", "must be a path inside the kit"),
                       ("/etc/passwd", "must be a path inside the kit"),
                       ("reference/01-fake-5pt/missing.cu", "does not exist")):
        patch.write_text(text.replace("--- reference/01-fake-5pt/kernel.cu", f"--- {named}", 1))
        with pytest.raises(check_verdicts.PatchError, match=why):
            check_verdicts.source_bytes(entry.path, mutants.root)
    patch.write_text(text)
    (entry.path / "kernel.cu").write_text(GOOD_KERNEL)
    outcome = check_verdicts.check_entry(entry, mutants.root, check_tooling=False)
    assert outcome.status == "failed" and "holds both kernel.cu and kernel.patch" in outcome.message


def test_a_whole_kernel_is_read_as_it_is(known):
    entry = next(e for e in check_verdicts.collect(known.root) if e.name == "good")
    with check_verdicts.materialised(entry, known.root) as folder:
        assert folder == entry.path
    assert hashlib.sha256(check_verdicts.source_bytes(entry.path)).hexdigest() == \
        hashlib.sha256((entry.path / "kernel.cu").read_bytes()).hexdigest()
