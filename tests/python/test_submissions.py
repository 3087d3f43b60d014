"""Known submissions get expected.json's verdicts (real build and GPU, else skipped with the reason); each
mutant's kernel.patch applies to its base and holds its bug alone; check_verdicts.py and remake_patch.py."""

import hashlib
import json
import re
import sys

import pytest

from conftest import GOOD_KERNEL, KIT_ROOT

sys.path.insert(0, str(KIT_ROOT / "tests" / "submissions"))
import check_verdicts  # noqa: E402  (needs the path above)
import remake_patch  # noqa: E402

ENTRIES = check_verdicts.collect()


def test_expected_files_parse():
    for entry in ENTRIES:
        assert entry.verdict and isinstance(entry.needs_gpu, bool)
    if not ENTRIES:
        pytest.skip("no tests/submissions/*/expected.json entries yet")


MUTANTS = [e for e in ENTRIES if (e.path / check_verdicts.PATCH).is_file()]


#: The most lines (removed plus added) each mutant's kernel.patch may change: one idea per mutant,
#: the bug (or the cheat) and at most a short comment at it.  A new mutant states its own here.
MAX_CHANGED_LINES = {
    # the starter with its / and % moved into inline PTX that a reader of kernel.ptx's text misses
    "03-boundary-neat/ptx_two_per_line": 16,              # two PTX helpers, their comment, six uses
    "03-boundary-neat/ptx_brace_in_comment": 16,
    "03-boundary-neat/ptx_label_prefix": 16,
    # a reference, or a known-good design, with one bug put in
    "01-naive-5pt/before_main_launch": 16,                 # a spinning kernel and the static object that launches it
    "02-shared-tiling/halo_off_by_one": 5,                  # the bottom halo row's index, and its comment
    "02-shared-tiling/missing_syncthreads": 5,              # the barrier and its comment
    "04-max-smem/odd_steps_wrong_buffer": 2,                # return d_b
    "05-z-coarsening/missing_syncthreads": 2,
    "05-z-coarsening/rotation_off_by_one": 3,               # the rotation's temporary
    "05-z-coarsening/z_halo_missing": 2,                    # z <= ze becomes z < ze
    "06-register-tiling/missing_syncthreads": 2,
    "06-register-tiling/rotation_off_by_one": 2,            # the ring slot of plane z-1
    "06-register-tiling/z_halo_missing": 3,                 # the window's first plane
    "06-register-tiling/two_planes_double_buffered": 5,     # a second plane, its pick, one barrier less
    "07-reduction-residual/boundary_counted": 13,           # every cell summed, ghost neighbours as 0
    "07-reduction-residual/jacobi_in_place": 26,            # the Jacobi kernel and its launch, in place
    "08-temporal-blocking/fma_contracted": 6,               # the rounded update as a plain expression
    "08-temporal-blocking/halo_one_short": 13,              # halo(ks) = ks - 1 where the halo is used
    "08-temporal-blocking/missing_barrier": 2,
    "08-temporal-blocking/skips_sweeps": 1,
    # a cheat: its honest twin plus the cheat
    "02-shared-tiling/cache_cheat": 30,                     # the kept answer and its replay
    "02-shared-tiling/printf_debug": 3,                     # the printf
    "02-shared-tiling/split_stream_legacy": 23,             # the decoy, and the sweep on stream 0
    "02-shared-tiling/split_stream_per_thread": 23,         # the decoy, and the sweep on cudaStreamPerThread
    "02-shared-tiling/split_stream_ptds": 33,               # the decoy, the _ptsz entry point and the sweep through it
    "04-max-smem/fixed_point_24": 2,                        # STORE_FIXED 1
    "06-register-tiling/three_planes_declared_1024": 6,     # a smaller tile, 1024 threads declared
    "07-reduction-residual/atomic_above_bench_size": 27,    # atomics above the Check grids
    # an attack on the machine-code rules or the audit: its base plus the attack
    "02-shared-tiling/audit_table_filled": 26,              # lab 1's kernel, 255 sets and the sweep on the first call
    "02-shared-tiling/graph_launch": 14,                    # the sweep as a graph's node
    "02-shared-tiling/lazy_after_cases": 5,                 # a call counter, and no sweep after the cases' calls
    "05-z-coarsening/ptx_forged_entry": 12,                 # the forged .entry in a comment, dynamic smem
    "06-register-tiling/audit_table_filled": 20,            # the filler, 256 grids on the first call
    "07-reduction-residual/atomic_rounded_to_float": 16,    # atomicAdd(double), rounded to float
    "07-reduction-residual/host_sum_unnamed_copy": 14,      # copies with cudaMemcpyDefault, the host sum
    # a known-good design, renamed into a forbidden one
    "01-naive-5pt/extern_c_named_step": 5,                  # the kernel named step, and its comment
}


def _leading_comment_lines(lines: list[str]) -> int:
    """How many lines a C file's leading comment block (comments and blank lines above the code) takes."""
    count, inside = 0, False
    for line in lines:
        text = line.strip()
        if inside:
            inside = "*/" not in text
        elif text.startswith("/*"):
            inside = "*/" not in text[2:]
        elif text and not text.startswith("//"):
            break
        count += 1
    return count


def _hunks(patch_text: str) -> list[tuple[int, list[str], int]]:
    """A unified diff's hunks: (its first line in the base, the base's lines it holds, lines removed or added)."""
    hunks, lines, i = [], patch_text.splitlines(), 0
    while i < len(lines):
        head = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@", lines[i])
        i += 1
        if not head:
            continue
        old_left, new_left = int(head.group(2) or 1), int(head.group(3) or 1)
        old, changed = [], 0
        while (old_left or new_left) and i < len(lines):
            tag, body = lines[i][:1], lines[i][1:]
            i += 1
            if tag in " -":
                old.append(body)
                old_left -= 1
            if tag in " +":
                new_left -= 1
            changed += tag in "-+"
        hunks.append((int(head.group(1)), old, changed))
    return hunks


def bug_alone_problems(patch, base, most: int) -> list[str]:
    """Why PATCH does not hold its bug alone against BASE: a hunk off its line or in the header, over MOST lines."""
    base_lines = base.read_text().splitlines()
    header = _leading_comment_lines(base_lines)
    hunks = _hunks(patch.read_text())
    problems = [] if hunks else ["no hunk"]
    for start, old, _ in hunks:
        if old != base_lines[start - 1:start - 1 + len(old)]:
            problems.append(f"the hunk at line {start} does not match the base there (an edit above it "
                            f"moved it, or one inside it changed it): tests/submissions/remake_patch.py")
        if start <= header:
            problems.append(f"the hunk at line {start} reaches into the base's leading comment block "
                            f"(lines 1-{header}): put the bug, and its comment, in the code below it")
    changed = sum(count for *_, count in hunks)
    if changed > most:
        problems.append(f"{changed} lines changed, more than the {most} its one idea is given")
    return problems


@pytest.mark.parametrize("entry", MUTANTS, ids=[e.id for e in MUTANTS])
def test_every_mutant_patch_applies_to_its_whole_base_and_holds_its_bug_alone(entry):
    """A fix to a base reaches its mutants; its header can change without breaking one; a mutant is one idea."""
    patch = entry.path / check_verdicts.PATCH
    base = check_verdicts.patch_base(patch)
    assert check_verdicts.source_bytes(entry.path) != base.read_bytes(), f"{entry.id}: the patch changes nothing"
    assert not (entry.path / check_verdicts.SOURCE).exists()
    assert not (base.parent / check_verdicts.PATCH).exists(), f"{entry.id}: a base must be a whole file"
    assert entry.id in MAX_CHANGED_LINES, f"{entry.id}: state in MAX_CHANGED_LINES how many lines its patch may change"
    problems = bug_alone_problems(patch, base, MAX_CHANGED_LINES[entry.id])
    assert not problems, f"{entry.id}: " + "; ".join(problems)


def test_every_bound_names_a_mutant():
    assert sorted(MAX_CHANGED_LINES) == sorted(e.id for e in MUTANTS)


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
        "cheat": ("forbidden", False, "// CALLS=cudaMemcpy: a copy to the host, which the object links\n"),
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

#: The fake reference: a leading comment block of 20 lines, three lines of code, the kernel.
PADDED = "// line\n" * 20 + "".join(f"#define PAD{i} {i}\n" for i in range(3)) + GOOD_KERNEL + "// end\n" * 20


def _mutant(kit, name: str, base_text: str, change) -> tuple:
    """(folder holding only kernel.patch of change(base_text), base path, mutant text), by remake_patch.py."""
    base = kit.root / "reference" / "01-fake-5pt" / "kernel.cu"
    base.parent.mkdir(parents=True, exist_ok=True)
    base.write_text(base_text)
    folder = kit.root / "tests" / "submissions" / "01-fake-5pt" / name
    folder.mkdir(parents=True)
    mutant = change(base_text)
    (folder / "kernel.cu").write_text(mutant)
    said = remake_patch.remake(folder, base, kit.root)
    assert said.endswith(hashlib.sha256(mutant.encode()).hexdigest()) and not (folder / "kernel.cu").exists()
    return folder, base, mutant


@pytest.fixture
def mutants(fake_kit):
    """A fake kit whose expected.json has one mutant of the reference, graded incorrect."""
    _mutant(fake_kit, "wrong", PADDED, lambda t: t.replace("/* ... */", "/* ... */ // WRONG"))
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


def test_a_patch_holds_its_bug_alone_until_its_base_moves_then_is_remade(mutants):
    (entry,) = check_verdicts.collect(mutants.root)
    patch, base = entry.path / "kernel.patch", mutants.root / "reference" / "01-fake-5pt" / "kernel.cu"
    assert bug_alone_problems(patch, base, 2) == []               # one line out, one in
    assert bug_alone_problems(patch, base, 1) == ["2 lines changed, more than the 1 its one idea is given"]
    made = check_verdicts.source_bytes(entry.path, mutants.root)
    base.write_text("// a header grown by a line\n" + base.read_text())
    (problem,) = bug_alone_problems(patch, base, 2)                # still applies, one line lower
    assert problem.startswith("the hunk at line 22 does not match the base there") and "remake_patch.py" in problem
    assert check_verdicts.source_bytes(entry.path, mutants.root) == b"// a header grown by a line\n" + made
    assert "against reference/01-fake-5pt/kernel.cu" in remake_patch.remake(entry.path, kit_root=mutants.root)
    assert bug_alone_problems(patch, base, 2) == []
    assert check_verdicts.source_bytes(entry.path, mutants.root) == b"// a header grown by a line\n" + made


def test_a_patch_that_edits_the_base_header_is_refused(fake_kit):
    folder, base, _ = _mutant(fake_kit, "in_header", PADDED, lambda t: t.replace("// line\n", "// LINE\n", 1))
    (problem,) = bug_alone_problems(folder / "kernel.patch", base, 2)
    assert problem == ("the hunk at line 1 reaches into the base's leading comment block (lines 1-20): "
                       "put the bug, and its comment, in the code below it")
    folder, base, _ = _mutant(fake_kit, "under_header", PADDED, lambda t: t.replace("#define PAD0 0", "#define PAD0 1"))
    assert "leading comment block" in bug_alone_problems(folder / "kernel.patch", base, 2)[0]   # its context


def test_remake_patch_keeps_a_whole_file_it_cannot_give_back(fake_kit):
    base = fake_kit.root / "reference" / "01-fake-5pt" / "kernel.cu"
    base.parent.mkdir(parents=True)
    base.write_text(PADDED)
    folder = fake_kit.root / "tests" / "submissions" / "01-fake-5pt" / "same"
    folder.mkdir(parents=True)
    (folder / "kernel.cu").write_text(PADDED)
    with pytest.raises(check_verdicts.PatchError, match="is reference/01-fake-5pt/kernel.cu unchanged"):
        remake_patch.remake(folder, base, fake_kit.root)
    assert sorted(p.name for p in folder.iterdir()) == ["kernel.cu"]


def test_a_whole_kernel_is_read_as_it_is(known):
    entry = next(e for e in check_verdicts.collect(known.root) if e.name == "good")
    with check_verdicts.materialised(entry, known.root) as folder:
        assert folder == entry.path
    assert check_verdicts.source_bytes(entry.path) == (entry.path / "kernel.cu").read_bytes()
