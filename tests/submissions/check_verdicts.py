#!/usr/bin/env python3
"""Grade every known submission and compare its verdict with the expected one.

    python3 tests/submissions/check_verdicts.py [--lab 01-naive-5pt] [--repeat N] [--json FILE] [NAME ...]
    python3 tests/submissions/check_verdicts.py --profile[-only] [--lab LAB] [NAME ...]

For every tests/submissions/<lab>/expected.json, of the form

    {"<submission folder>": {"verdict": "pass", "needs_gpu": true, "why": "..."}, ...}

the folder tests/submissions/<lab>/<submission folder>/ is graded by the lab
pipeline in a temporary build directory.  "verdict" is one of the grader's
verdicts (stencil_grader/score.py), or "correct": every case passes, and the
timing may give "pass" or "slow".  One line per submission, then
`N passed, N failed, N skipped`; exit status 1 on any failure.

A submission folder holds the submission's kernel.cu (one written from scratch)
or, for a mutant (another kernel of the kit with a bug put in on purpose),
kernel.patch instead: a unified diff whose `---` line names the kernel it
changes, relative to the kit's root (reference/<lab>/kernel.cu,
starter/<lab>/kernel.cu, or a known submission's whole kernel.cu), so that a fix
to that kernel reaches its mutants.  Wherever a known submission is graded,
profiled or laid out (here, --make-class, bench_class.py,
tests/slurm/gpu_check.py), its kernel.cu is the base with the patch applied by
GNU patch, exactly (every context line must match; a hunk may move with the
lines above it), in a temporary folder: source_bytes() and materialised().  A
patch that no longer applies is a failure naming the submission and its base,
never a skip.  A patch holds its bug alone, and tests/python/test_submissions.py
checks it without a GPU: it applies, every hunk sits exactly at its line of the
base, no hunk (context included) reaches into the base's leading comment block,
so that the header can be edited without breaking the mutant, and it changes no
more lines than the test gives that mutant (one bug, or one cheat, and a short
comment at it).  A cheat that is its honest twin plus a small change is kept as
a patch against the twin's kernel.cu.  tests/submissions/remake_patch.py puts
back at their lines the hunks that an edit above them moved, and turns a whole
kernel.cu into a patch against its base (after a change to the base inside a
hunk, put the bug into the new base again first: its docstring says how).

An entry may name "path": a folder of the kit (relative to its root) that holds
its kernel.cu, instead of tests/submissions/<lab>/<name>/: the textbook's kernels
live in reference/tour/, where the tour times them.

Cheats and their honest twins: an entry may name "twin": the folder of the
honest submission it imitates.  A cheat must then score at most its twin's
points (a cheat that wins once is a hole), and an entry marked
"same_as_twin": true (a correct kernel with a debug printf) must get its
twin's verdict, with a bandwidth within SAME_AS_TWIN_RATIO of its twin's (the
printf's own cost, a few percent on an H100, plus timing noise).
--repeat N grades every entry that has a twin, and every twin, N times, and
checks each run; --json FILE writes every grading's verdict, points and
ratio (the record a README figure comes from).

Class mode, where the GPU time is spent as an instructor spends it:
--make-class DIR lays the entries out as a class (DIR/<lab>__<name>/<lab>/
kernel.cu, one student per known submission, copies N times with --copies N)
for `grade.py class DIR --out OUT`; --from-class OUT then checks the verdicts
of that grading's reports (OUT/students/<student>/<lab>.json) instead of grading.

Diagnostic submissions (diag_*) name the finding `make profile` must rank first:
"profile": "<rule id of grader/profile_rules.json>".  --profile also profiles each such entry
(grade.py profile, Nsight Compute) and checks that its first finding is that rule; --profile-only
profiles without grading.  Where nothing can be profiled (no ncu, no GPU) the check is skipped.

Without a GPU an entry with "needs_gpu": true is reported as not measured
(skipped): neither passed nor failed, unless its build or static check already
gives a verdict that differs from the expected one.  Without the build tooling
(grader/lab.mk, make, nvcc, cuobjdump, Check) every entry is skipped, with the reason.

Plain Python, so it runs on a GPU machine without pytest; the pytest suite
parametrizes over collect() and calls check_entry() (tests/python/test_submissions.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

KIT_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(KIT_ROOT / "grader"))

from stencil_grader.base import labspec
from stencil_grader.base.files import read_json  # noqa: E402
from stencil_grader.base import toolkit  # noqa: E402
from stencil_grader.classes import outdir  # noqa: E402
from stencil_grader.grading import pipeline, sass, score  # noqa: E402  (needs the path above)

#: Verdicts a build and static checks settle without a GPU.
_SETTLED_WITHOUT_GPU = ("compile_error", "forbidden")
#: Expected verdicts that stand for several of the grader's.
META_VERDICTS = {"correct": ("pass", "slow")}


#: How far (relative bandwidth) a submission marked same_as_twin may land from its twin: a
#: kernel's printf costs it a little (measured on an H100, 2026-11-25: 0.641 against 0.670 of the
#: copy bandwidth, 4%), and runs differ by about 1%.
SAME_AS_TWIN_RATIO = 0.08


@dataclass
class Entry:
    lab: str
    name: str
    path: Path
    verdict: str
    needs_gpu: bool
    why: str
    twin: str | None = None
    same_as_twin: bool = False
    profile: str | None = None        # the rule id `make profile` must rank first (diag_* entries)

    @property
    def id(self) -> str:
        return f"{self.lab}/{self.name}"


@dataclass
class Outcome:
    """status: "passed", "failed" or "skipped"; verdict: what the grader said (None if not graded)."""

    status: str
    verdict: str | None
    message: str
    points: float | None = None
    ratio: float | None = None


class ExpectedError(ValueError):
    """An expected.json that is not JSON or does not follow the format above."""


#: A known submission's file, whole, or as a patch against the kernel it mutates (module docstring).
SOURCE = "kernel.cu"
PATCH = "kernel.patch"
#: Seconds GNU patch may take for one submission.
PATCH_TIMEOUT_S = 60


class PatchError(RuntimeError):
    """A known submission's kernel.patch that names no usable base or no longer applies to it;
    the message names the submission and its base."""


def patch_base(patch: Path, kit_root: Path = KIT_ROOT) -> Path:
    """The kernel a kernel.patch changes: its `--- PATH` line, PATH relative to the kit's root
    (a whole file inside the kit).  Raises PatchError naming the patch and what is wrong."""
    shown = _shown(patch, kit_root)
    try:
        lines = Path(patch).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise PatchError(f"{shown}: cannot be read ({err})") from None
    named = next((line[4:].split("\t")[0].strip() for line in lines if line.startswith("--- ")), None)
    if not named:
        raise PatchError(f"{shown}: no '--- reference/<lab>/kernel.cu' line naming the kernel it changes")
    root = Path(kit_root).resolve()
    base = (root / named).resolve()
    if Path(named).is_absolute() or root not in base.parents:
        raise PatchError(f"{shown}: its base {named!r} must be a path inside the kit, relative to its root")
    if not base.is_file():
        raise PatchError(f"{shown}: its base {named} does not exist (a base is a whole kernel.cu, "
                         "never another submission's patch)")
    return base


def source_bytes(folder: Path, kit_root: Path = KIT_ROOT) -> bytes:
    """The kernel.cu of the known submission in FOLDER: the file, or its kernel.patch applied to
    the patch's base with GNU patch (exact context, offsets allowed).  Raises PatchError when the
    folder holds both or neither, or the patch does not apply; OSError when kernel.cu cannot be read."""
    folder = Path(folder)
    whole, patch = folder / SOURCE, folder / PATCH
    if whole.is_file() and patch.is_file():
        raise PatchError(f"{_shown(folder, kit_root)} holds both {SOURCE} and {PATCH}: keep one")
    if not patch.is_file():
        if not whole.is_file():
            raise PatchError(f"{_shown(folder, kit_root)} holds neither {SOURCE} nor {PATCH}")
        return whole.read_bytes()
    base = patch_base(patch, kit_root)
    shown = f"{_shown(patch, kit_root)} (against {_shown(base, kit_root)})"
    if not shutil.which("patch"):
        raise PatchError(f"{shown}: GNU patch is not installed (Debian: apt-get install patch; "
                         "tests/install-deps.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="known-patch-") as tmp:
        out, rejects = Path(tmp) / SOURCE, Path(tmp) / "rejects"
        # -f: never ask (nor take the patch for a reversed one); -F 0: every context line must
        # match (a hunk may still move with the lines above it); -o: the base stays as it is.
        argv = ["patch", "-f", "-s", "-F", "0", "-o", str(out), "-r", str(rejects), str(base), str(patch)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=PATCH_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise PatchError(f"{shown}: GNU patch did not run: {err}") from None
        if done.returncode != 0 or not out.is_file():
            said = " ".join((done.stdout + done.stderr).split()).split(" -- saving rejects")[0]
            failed = [line for line in (rejects.read_text(errors="replace") if rejects.is_file() else "")
                      .splitlines() if line.startswith("@@ ")]
            raise PatchError(f"{shown} no longer applies ({said[:300]}"
                             + (f"; the hunks at {', '.join(failed[:4])}" if failed else "")
                             + "): remake it from the mutant it should be (tests/submissions/check_verdicts.py)")
        return out.read_bytes()


@contextmanager
def materialised(entry: "Entry", kit_root: Path = KIT_ROOT) -> Iterator[Path]:
    """A folder holding the entry's kernel.cu for a build: the entry's own folder when the file is
    whole, else a temporary folder with the patched file (removed afterwards).  Raises PatchError."""
    if not (Path(entry.path) / PATCH).is_file():
        source_bytes(entry.path, kit_root)            # refuses a folder holding both, or neither
        yield Path(entry.path)
        return
    data = source_bytes(entry.path, kit_root)
    with tempfile.TemporaryDirectory(prefix=f"known-{entry.lab}-") as tmp:
        (Path(tmp) / SOURCE).write_bytes(data)
        yield Path(tmp)


def _shown(path: Path, kit_root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path(kit_root).resolve()))
    except ValueError:
        return str(path)


def collect(kit_root: Path = KIT_ROOT, lab: str | None = None) -> list[Entry]:
    """Every entry of every tests/submissions/<lab>/expected.json (sorted); raises ExpectedError."""
    entries = []
    for expected in sorted((Path(kit_root) / "tests" / "submissions").glob("*/expected.json")):
        lab_name = expected.parent.name
        if lab and lab_name != lab:
            continue
        table = read_json(expected, ExpectedError)
        if not isinstance(table, dict):
            raise ExpectedError(f"{expected}: must be an object of submission folder -> expectation")
        for name, item in sorted(table.items()):
            allowed = score.VERDICTS + tuple(META_VERDICTS)
            if not isinstance(item, dict) or item.get("verdict") not in allowed \
                    or not isinstance(item.get("needs_gpu"), bool):
                raise ExpectedError(f"{expected}: {name} must be {{\"verdict\": one of "
                                    f"{', '.join(allowed)}, \"needs_gpu\": true|false, "
                                    f"\"why\": text}}, got {json.dumps(item)}")
            twin = item.get("twin")
            if twin is not None and twin not in table:
                raise ExpectedError(f"{expected}: {name} names twin {twin!r}, which is not an entry there")
            if item.get("profile") is not None and not isinstance(item["profile"], str):
                raise ExpectedError(f"{expected}: {name}: \"profile\" must be a rule id of "
                                    f"grader/profile_rules.json, got {json.dumps(item['profile'])}")
            # "path": a folder elsewhere in the kit (the textbook's kernels live in reference/tour/,
            # where the tour times them); else the entry's own folder here
            folder = Path(kit_root) / item["path"] if "path" in item else expected.parent / name
            entries.append(Entry(lab_name, name, folder, item["verdict"],
                                 item["needs_gpu"], str(item.get("why", "")), twin,
                                 bool(item.get("same_as_twin", False)), item.get("profile")))
    return entries


def tooling_missing(kit_root: Path = KIT_ROOT) -> str | None:
    """Why real lab builds cannot run here (None when they can)."""
    if not (Path(kit_root) / "grader" / "lab.mk").is_file():
        return "grader/lab.mk does not exist yet"
    if not shutil.which("make"):
        return "make is not installed"
    if not toolkit.find_nvcc():
        return f"nvcc not found: {toolkit.why_no_nvcc()}"
    if not sass.cuobjdump():
        return "cuobjdump not found (the lab's rules read the machine code with it; it ships with the toolkit)"
    try:
        found = subprocess.run(["pkg-config", "--exists", "check"], timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        found = False
    if not found:
        return "the Check library is not installed (pkg-config check)"
    return None


def check_entry(entry: Entry, kit_root: Path = KIT_ROOT, check_tooling: bool = True) -> Outcome:
    """Grade one submission and compare its verdict with the expected one.

    check_tooling: skip (with the reason) when tooling_missing() says real builds cannot run.
    """
    try:
        source_bytes(entry.path, kit_root)        # a patch that no longer applies fails, tooling or not
    except (PatchError, OSError) as err:
        return Outcome("failed", None, str(err))
    missing = tooling_missing(kit_root) if check_tooling else None
    if missing:
        return Outcome("skipped", None, f"build tooling missing: {missing}")
    lab_dir = Path(kit_root) / "labs" / entry.lab
    if not (lab_dir / "lab.json").is_file():
        return Outcome("failed", None, f"no lab {entry.lab} (labs/{entry.lab}/lab.json)")
    with tempfile.TemporaryDirectory(prefix=f"verdict-{entry.lab}-") as tmp, \
            materialised(entry, kit_root) as folder:
        run = pipeline.grade_lab(lab_dir, str(folder), Path(tmp) / "build")
    got = run.score.verdict
    points, ratio = run.score.points, run.score.ratio
    matched = got in META_VERDICTS.get(entry.verdict, (entry.verdict,))
    detail = f"verdict {got}, expected {entry.verdict}; {points:.2f} points" + \
        (f", ratio {ratio:.3f}" if ratio is not None else "")
    no_gpu = bool(run.not_measured and run.not_measured.startswith("no GPU"))
    if no_gpu and entry.needs_gpu and not (got in _SETTLED_WITHOUT_GPU and not matched):
        return Outcome("skipped", got, f"not measured ({run.not_measured}); {detail}")
    if matched:
        return Outcome("passed", got, detail, points, ratio)
    messages = [run.score.correctness.message, run.score.performance.message] + run.score.messages
    said = " ".join("; ".join(m for m in messages if m).split())      # one line
    return Outcome("failed", got, f"{detail} ({entry.why}): {said[:400]}", points, ratio)


def check_profile(entry: Entry, kit_root: Path = KIT_ROOT) -> Outcome:
    """--profile: profile the submission (grade.py profile, in a temporary build directory) and
    compare the first finding's rule with the entry's "profile"; skipped, with the reason, where
    nothing can be profiled (no ncu, no GPU, counters not permitted)."""
    from stencil_grader.student import profile
    from stencil_grader.student.profile.common import EXIT_CANNOT, EXIT_PROFILED

    try:
        with tempfile.TemporaryDirectory(prefix=f"profile-{entry.lab}-") as tmp, \
                materialised(entry, kit_root) as folder:
            run = profile.profile_lab(Path(kit_root) / "labs" / entry.lab, str(folder), Path(tmp) / "build")
    except PatchError as err:
        return Outcome("failed", None, str(err))
    if run.exit_code == EXIT_CANNOT:
        return Outcome("skipped", None, "not profiled: " + " ".join(run.text.split())[:300])
    findings = (run.result or {}).get("findings") or []
    first = findings[0]["rule"] if findings else None
    ranked = ", ".join(f"{f['rule']} ({f['severity']})" for f in findings[:4]) or "none"
    detail = f"first finding {first}, expected {entry.profile}; ranked: {ranked}; {run.seconds:.0f} s"
    if run.exit_code == EXIT_PROFILED and first == entry.profile:
        return Outcome("passed", None, detail)
    return Outcome("failed", None, detail if run.exit_code == EXIT_PROFILED else " ".join(run.text.split())[:400])


def against_twin(entry: Entry, mine: Outcome, twin: Outcome) -> Outcome:
    """A cheat's outcome judged against its honest twin's (the module docstring's rule)."""
    if mine.status != "passed" or twin.status != "passed":
        return mine
    if entry.same_as_twin:
        if mine.ratio is not None and twin.ratio:
            close = abs(mine.ratio / twin.ratio - 1) <= SAME_AS_TWIN_RATIO
        else:
            close = mine.points == twin.points
        close = close and mine.verdict == twin.verdict
        word = "passed" if close else "failed"
        return Outcome(word, mine.verdict, f"{mine.message}; twin {entry.twin}: {twin.verdict}, "
                       f"{twin.points:.2f} points ({'the same' if close else 'NOT the same'})",
                       mine.points, mine.ratio)
    if mine.points > twin.points:
        return Outcome("failed", mine.verdict, f"{mine.message}; BEATS its honest twin {entry.twin} "
                       f"({twin.points:.2f} points): a hole", mine.points, mine.ratio)
    return Outcome("passed", mine.verdict, f"{mine.message}; twin {entry.twin}: {twin.points:.2f} points",
                   mine.points, mine.ratio)


def student_name(entry: Entry, copy: int = 0) -> str:
    """The student folder of an entry in a class laid out by --make-class."""
    return f"{entry.lab}__{entry.name}" + (f"__{copy}" if copy else "")


def make_class(entries: list[Entry], folder: Path, copies: int = 1, kit_root: Path = KIT_ROOT) -> int:
    """Lay the entries out as a class of students, each kernel.cu whole (patches applied);
    returns how many submission-labs.  Raises PatchError."""
    count = 0
    for entry in entries:
        data = source_bytes(entry.path, kit_root)
        for copy in range(copies):
            target = Path(folder) / student_name(entry, copy) / entry.lab
            target.mkdir(parents=True, exist_ok=True)
            (target / SOURCE).write_bytes(data)
            count += 1
    return count


def from_report(entry: Entry, report: dict) -> Outcome:
    """An entry's outcome from a class grading's report of it."""
    got = report.get("verdict")
    points = report.get("points")
    ratio = (report.get("performance") or {}).get("ratio")
    detail = f"verdict {got}, expected {entry.verdict}; {points:.2f} points" + \
        (f", ratio {ratio:.3f}" if ratio is not None else "")
    if got in score.NOT_GRADED and entry.needs_gpu:
        return Outcome("skipped", got, f"not measured; {detail}")
    matched = got in META_VERDICTS.get(entry.verdict, (entry.verdict,))
    return Outcome("passed" if matched else "failed", got,
                   detail if matched else f"{detail} ({entry.why}): {' '.join(report.get('messages', []))[:300]}",
                   points, ratio)


def main(argv: list[str] | None = None, kit_root: Path = KIT_ROOT, check_tooling: bool = True) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", help="only this lab's submissions")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="grade the cheats that have a twin, and the twins, N times each")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every grading's figures here")
    parser.add_argument("--make-class", type=Path, metavar="DIR",
                        help="lay the entries out as a class for grade.py class, and stop")
    parser.add_argument("--copies", type=int, default=1, metavar="N", help="with --make-class: N copies each")
    parser.add_argument("--from-class", type=Path, metavar="OUT",
                        help="check the reports of `grade.py class` in OUT instead of grading")
    parser.add_argument("--profile", action="store_true",
                        help="also profile the entries that name a \"profile\" finding and check it comes first")
    parser.add_argument("--profile-only", action="store_true", help="like --profile, without grading")
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these submission folders")
    args = parser.parse_args(argv)
    try:
        entries = collect(kit_root, args.lab)
    except ExpectedError as err:
        print(f"check_verdicts.py: {err}", file=sys.stderr)
        return 2
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    words = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
    chosen = [e for e in entries if not args.names or e.name in args.names or
              any(e.name == x.twin for x in entries if x.name in args.names and x.lab == e.lab)]
    if args.make_class:
        try:
            count = make_class(chosen, args.make_class, max(1, args.copies), kit_root)
        except PatchError as err:
            print(f"check_verdicts.py: {err}", file=sys.stderr)
            return 1
        print(f"{count} submission-lab(s) laid out as a class in {args.make_class}")
        return 0
    if args.from_class:
        return _check_class(chosen, args.from_class, args.json)
    twins = {(e.lab, e.twin) for e in chosen if e.twin}
    record = []
    for run_number in range(1, max(1, args.repeat) + 1):
        done: dict[tuple[str, str], Outcome] = {}
        for entry in sorted(chosen, key=lambda e: (e.lab, e.twin is not None, e.name)):   # twins first
            if run_number > 1 and not entry.twin and (entry.lab, entry.name) not in twins:
                continue
            if (args.profile or args.profile_only) and entry.profile and run_number == 1:
                found = check_profile(entry, kit_root)
                counts[found.status] += 1
                print(f"{words[found.status]}  {entry.id + ' (profile)':<56} {found.message}", flush=True)
            if args.profile_only:
                continue
            try:
                outcome = check_entry(entry, kit_root, check_tooling)
            except labspec.LabSpecError as err:
                outcome = Outcome("failed", None, str(err))
            done[(entry.lab, entry.name)] = outcome
            twin = done.get((entry.lab, entry.twin)) if entry.twin else None
            if twin is not None:
                outcome = against_twin(entry, outcome, twin)
            counts[outcome.status] += 1
            record.append({"run": run_number, "lab": entry.lab, "name": entry.name, "status": outcome.status,
                           "verdict": outcome.verdict, "points": outcome.points, "ratio": outcome.ratio})
            tag = f" (run {run_number})" if args.repeat > 1 else ""
            print(f"{words[outcome.status]}  {entry.id + tag:<56} {outcome.message}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0



def _check_class(entries: list[Entry], out: Path, json_path: Path | None) -> int:
    """--from-class: every copy of every entry, judged from its report, twins compared per copy."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    words = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
    record = []
    folder = outdir.students_dir(Path(out))
    students = sorted(p.name for p in folder.iterdir() if p.is_dir() and "__" in p.name) if folder.is_dir() else []
    for entry in sorted(entries, key=lambda e: (e.lab, e.twin is not None, e.name)):
        base = student_name(entry)
        for student in [s for s in students if s == base or s.startswith(base + "__") and s[len(base) + 2:].isdigit()]:
            path = outdir.report_path(Path(out), student, entry.lab)
            if not path.is_file():
                outcome = Outcome("failed", None, f"no report {path}")
            else:
                outcome = from_report(entry, json.loads(path.read_text()))
                if entry.twin:
                    copy = student[len(base):]
                    twin_path = outdir.report_path(Path(out), f"{entry.lab}__{entry.twin}" + copy, entry.lab)
                    if twin_path.is_file():
                        twin = next(e for e in entries + collect() if e.lab == entry.lab and e.name == entry.twin)
                        outcome = against_twin(entry, outcome, from_report(twin, json.loads(twin_path.read_text())))
            counts[outcome.status] += 1
            record.append({"student": student, "lab": entry.lab, "name": entry.name, "status": outcome.status,
                           "verdict": outcome.verdict, "points": outcome.points, "ratio": outcome.ratio})
            print(f"{words[outcome.status]}  {student:<56} {outcome.message}", flush=True)
    if json_path:
        json_path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
