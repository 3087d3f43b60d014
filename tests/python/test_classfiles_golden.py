"""Every class file, byte for byte against golden/classfiles.json (STENCIL_GOLDEN_WRITE=1 rewrites it)."""

import copy
import hashlib
import io
import json
import os
import zipfile
from pathlib import Path

from stencil_grader.base.files import write_json
from stencil_grader import KIT_ROOT
from stencil_grader.classes import classfiles, gsautograder, importers, outdir, plan, resume
from stencil_grader.classes.importers.roster import Roster
from test_import import NEEDS_YAML, make_zip

GOLDEN = Path(__file__).resolve().parent / "golden" / "classfiles.json"
RECORDED = Path(__file__).resolve().parent / "data" / "html" / "class" / "students"
LAB, BONUS = "01-naive-5pt", "08-temporal-blocking"
KERNEL = b"__global__ void k() {}\n"
GRADED_AT = "2026-11-20T10:00:00+00:00"
#: Who opted in to the leaderboard (each graded pass: their Gradescope files carry the entries).
PSEUDONYMS = {"garcíajosé (1001)": 'Fast, "Quick"', "Zoë O'Brien (4702)": "=Zed"}


def recorded(student: str, lab: str) -> dict:
    return json.loads((RECORDED / student / f"{lab}.json").read_text())


def variants() -> list[dict]:
    """One report of every kind the class files tell apart, from the recorded reports."""
    passed, slow, wrong, missing = (recorded("alice", LAB), recorded("bob", LAB), recorded("frank", LAB),
                                    recorded("frank", "02-shared-tiling"))
    not_measured = dict(copy.deepcopy(passed), verdict="not_measured", points=0.0, final=False,
                        messages=["not measured: no GPU on this machine"])
    grader_error = dict(copy.deepcopy(missing), verdict="grader_error", final=False,
                        messages=["the grading process was killed by SIGKILL"])
    near = dict(copy.deepcopy(missing), messages=["near miss: found Kernel.cu: the file must be named kernel.cu"])
    compile_error = dict(copy.deepcopy(missing), verdict="compile_error", final=True,
                         messages=["kernel.cu is 2000000 bytes, over the 1 MiB limit"])
    return [passed, slow, wrong, missing, not_measured, near, grader_error, compile_error]


def stamp(report: dict, student: str, lab: str, facts: dict, i: int) -> dict:
    report = copy.deepcopy(report)
    report.update(lab=lab, student=student, title=facts[lab]["title"], max_points=facts[lab]["points"],
                  bonus=facts[lab]["bonus"])
    report["class"] = {"source_sha256": hashlib.sha256(KERNEL).hexdigest(), "kit_version": "golden", "lab_sha256": "0" * 64,
                       "backend": "local", "run": "local", "job": None, "host": f"node{i % 3}", "graded_at": GRADED_AT}
    return report


def make_class(tmp: Path) -> Path:
    """The class folder: Canvas, Moodle and Gradescope exports imported, a leaderboard column added."""
    into = tmp / "class"
    exports = [
        ("canvas", LAB, {"garcíajosé_1001_5001_kernel.cu": KERNEL, "smithjohn_LATE_1003_5003_kernel.cu": KERNEL,
                         "nogpu_1005_5005_kernel.cu": KERNEL, "lee_1006_5006_Kernel.cu": KERNEL}),
        ("canvas", BONUS, {"garcíajosé_1001_6001_kernel.cu": KERNEL}),
        ("moodle", LAB, {"=HYPERLINK(x) Evil_4701_assignsubmission_file/kernel.cu": KERNEL,
                         "Zoë O'Brien_4702_assignsubmission_file/kernel.cu": KERNEL,
                         "Bo Nogpu_4703_assignsubmission_file/kernel.cu": KERNEL}),
        ("gradescope", LAB, {
            "assignment_1_export/submission_metadata.yml":
                "submission_1:\n  :submitters:\n  - :name: \"Doe, Jane\\nSecond line\"\n    :sid: '111'\n"
                "    :email: jane@example.edu\n"
                "submission_2:\n  :submitters:\n  - :name: \"José `id` O'Neil \\\"Q\\\"\"\n    :sid: '333'\n"
                "    :email: CY@example.edu\n"
                "submission_3:\n  :submitters:\n  - :name: Di Pair\n    :sid: '444'\n    :email: di@example.edu\n"
                "  - :name: Ed Pair\n    :sid: '555'\n    :email: ed@example.edu\n",
            "assignment_1_export/submission_1/kernel.cu": KERNEL,
            "assignment_1_export/submission_2/kernel.cu": KERNEL,
            "assignment_1_export/submission_3/kernel.cu": KERNEL}),
    ]
    for i, (site, lab, members) in enumerate(exports):
        export = make_zip(tmp / f"{site}-{i}.zip", members)
        importers.import_export(site, export, lab, into, kit_root=KIT_ROOT, say=lambda line: None)
    roster = Roster.load(into / "roster.csv")
    roster.columns.append("leaderboard")
    for folder, name in PSEUDONYMS.items():
        roster.rows[folder]["leaderboard"] = name
    roster.save()
    (into / "loose student, unlisted\nsecond line" / LAB).mkdir(parents=True)      # in no roster
    return into


def write_out(subs: Path, out: Path, missing_as_zero: bool) -> classfiles.ClassResult:
    """OUT: a report of each (student folder, lab) laid out as a grading leaves it, then the class files."""
    facts = plan.lab_facts(plan.select_labs(None, KIT_ROOT))
    outdir.claim(out, subs)
    kinds = variants()
    folders = sorted(p.name for p in subs.iterdir() if p.is_dir())
    saved = []
    for i, folder in enumerate(folders):
        labs = [LAB] + ([BONUS] if i % 2 == 0 else [])
        for lab in labs:
            kind = kinds[0] if folder in PSEUDONYMS else kinds[(i + (lab == BONUS)) % len(kinds)]
            report = stamp(kind, folder, lab, facts, i)
            write_json(outdir.report_path(out, folder, lab), report)
            saved.append(resume.Saved(folder, lab, report, report if i == 3 else None))
    return classfiles.class_files(out, list(facts), missing_as_zero, ["a note of the back end"], saved, 2, facts)


def digests(tmp: Path, roots: list[Path]) -> dict[str, str]:
    """{path under tmp: sha256} of every file but the HTML pages, normalised (module docstring)."""
    found = {}
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".html"):
            data = path.read_bytes()
            if path.name == outdir.MANIFEST:
                data = json.dumps(dict(json.loads(data), created="-"), indent=2).encode()
            if path.suffix == ".zip":
                with zipfile.ZipFile(io.BytesIO(data)) as z:
                    members = {n: z.read(n) for n in sorted(z.namelist())}
                if "index.json" in members:
                    members["index.json"] = json.dumps(dict(json.loads(members["index.json"]), made_at="-")).encode()
                data = b"".join(n.encode() + b"\0" + v + b"\0" for n, v in members.items())
            data = data.replace(str(tmp).encode(), b"<TMP>")
            found[path.relative_to(tmp).as_posix()] = hashlib.sha256(data).hexdigest()
    return found


def result_text(tmp: Path, result: classfiles.ClassResult) -> str:
    lines = [line for line in result.summary + result.alarm if not line.startswith(("class page:", "could not write"))]
    return "\n".join(lines + [f"exit {result.exit_status}"]).replace(str(tmp), "<TMP>")


@NEEDS_YAML
def test_the_class_files_are_byte_identical_to_the_golden_digests(tmp_path):
    subs = make_class(tmp_path)
    results = {}
    for name, zero in (("out", False), ("out-zero", True)):
        results[name] = result_text(tmp_path, write_out(subs, tmp_path / name, zero))
    gsautograder.build(tmp_path / "out", LAB)
    found = digests(tmp_path, [subs, tmp_path / "out", tmp_path / "out-zero"])
    found.update({f"result:{k}": hashlib.sha256(v.encode()).hexdigest() for k, v in results.items()})
    # what the fixture must exercise, or the digests pin nothing
    assert any("Doe, Jane_Second line" in k for k in found) and any("gradebook/moodle" in k for k in found)
    assert any(k.endswith("autograder.zip") for k in found) and any("leaderboard" in k or "canvas.csv" in k
                                                                    for k in found)
    if os.environ.get("STENCIL_GOLDEN_WRITE"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps({"files": found, "results": results}, indent=1, ensure_ascii=False) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert results == golden["results"]
    assert found == golden["files"]
