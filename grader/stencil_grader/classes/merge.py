"""The last step of a class grading: the class files, rebuilt from every report in OUT.

    class_files(out, lab_order, ...) -> ClassResult

writes, from every OUT/students/<student>/<lab>.json (outdir.read_reports), whichever run
wrote it (this one, an earlier one, a batch task):

    class.csv                          student, one column per lab graded in OUT, total
    gradings.csv                       one row per report: verdict, points, the GPU (index,
                                       UUID, name) and host that graded it, stage seconds
    gradescope/<lab>/<student>/, gradebook/    the course sites' files (gradebook.py):
                                       Gradescope's per lab and student, Canvas's and Moodle's
    class.html                         (classhtml.py, when present) the class as a web page
    summary.txt                        what OUT holds, what this run did, every failure and
                                       every lab without a grade, each with its one-line reason

and returns the same summary for the console, which therefore agrees with the files.  A
name that a spreadsheet would take for a formula is written after a "'" in every CSV file
(outdir.sheet_cell); class.html and summary.txt show it as written.

Nothing measured is no grade (outdir.is_grade).  A lab whose verdict is "not_measured" (no
GPU), "kit_error" (the machine lacks the Check library, ...), "pending" or "grader_error"
shows that word in class.csv and class.html instead of points, its student's total stays
empty, no gradebook holds a number for it (a Gradescope file written before, from a grade,
stays as it is), and the command says so loudly and exits 1: zeros that only mean "no GPU
here" or "the node died" must never be uploaded as grades.  A "missing" lab shows
"missing" and adds nothing to the total; the gradebooks leave it out, unless
missing_as_zero counts a required lab as 0 there; a near miss (outdir.is_near_miss) shows
"near miss", is listed apart in the summary, and is never a 0.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..grading import score
from . import gradebook, leaderboard, outdir
from .outdir import GRADER_ERROR, MISSING
from .submissions import shown

#: Characters of a reason in summary.txt at most (the reports hold the whole message).
REASON_WIDTH = 300
#: Verdicts that are grades without being failures.
NOT_FAILURES = ("pass", "slow")


@dataclass
class Grading:
    """One (student, lab) as a summary sees it: its verdict, points and one-line reason.
    gpu: the GPU that ran its GPU stages ({"index", "uuid", "name", "host"}), when one did."""

    student: str
    lab: str
    verdict: str
    points: float
    max_points: float
    seconds: float = 0.0
    gpu: dict | None = None
    message: str = ""

    @property
    def graded(self) -> bool:
        """False when the verdict is no grade (score.NOT_GRADED): its 0 points mean nothing."""
        return self.verdict not in score.NOT_GRADED

    @property
    def missing(self) -> bool:
        return self.verdict == MISSING

    @classmethod
    def from_report(cls, student: str, data: dict) -> "Grading":
        return cls(student, data.get("lab", ""), data.get("verdict", GRADER_ERROR), float(data.get("points") or 0.0),
                   float(data.get("max_points") or 0.0), float((data.get("seconds") or {}).get("total", 0.0)),
                   gpu_of(data), outdir.reason(data))


def gpu_of(data: dict) -> dict | None:
    """The GPU a report's GPU stages ran on: {"index", "uuid", "name", "host"} (index and uuid
    from the pool that handed it out, when one did), or None when no GPU ran them."""
    section = data.get("gpu") or {}
    assigned = section.get("assigned") or {}
    device = section.get("device") or {}
    name = assigned.get("name") or device.get("name") or device.get("device")
    if not name and not assigned:
        return None
    return {"index": assigned.get("index"), "uuid": assigned.get("uuid", ""), "name": name or "",
            "host": (data.get("class") or {}).get("host", "")}


@dataclass
class ClassResult:
    """What a class grading did and what OUT holds now: this run's gradings (in the plan's
    order), the summary lines (also in OUT/summary.txt), the lines that must be shouted
    (stderr, and at the end of summary.txt), and grade.py's exit status: 0 when every
    report in OUT is a grade or "missing" and this run measured what it graded, else 1."""

    gradings: list[Grading]
    summary: list[str]
    alarm: list[str]
    exit_status: int


#: What class.csv shows for a near miss (outdir.is_near_miss) instead of "missing".
NEAR_MISS_CELL = "near miss"


def cell(report: dict | None) -> str:
    """A class.csv cell: the points of a grade, the verdict of anything else ("near miss" for a
    missing lab submitted under another name), "" for no report."""
    if report is None:
        return ""
    if outdir.is_near_miss(report):
        return NEAR_MISS_CELL
    return f"{float(report.get('points') or 0.0):.2f}" if outdir.is_grade(report) else str(report.get("verdict"))


def graded_labs(table: dict[str, dict[str, dict]], lab_order: list[str]) -> list[str]:
    """The labs of lab_order that OUT holds a report of, in that order."""
    return [lab for lab in lab_order if any(lab in labs for labs in table.values())]


def write_csv(out: Path, table: dict[str, dict[str, dict]], lab_order: list[str]) -> Path:
    """OUT/class.csv: a row per student of OUT, a cell per lab (cell), the total (outdir.total)."""
    labs = graded_labs(table, lab_order)
    text = io.StringIO()
    writer = csv.writer(text)           # RFC 4180: CRLF, and a name holding CR or LF quoted
    writer.writerow(["student"] + labs + ["total"])
    for student, found in table.items():
        sum_ = outdir.total(list(found.values()))
        writer.writerow([outdir.sheet_cell(student)] + [cell(found.get(lab)) for lab in labs]
                        + ["" if sum_ is None else f"{sum_:.2f}"])
    return outdir.write_atomic(out / "class.csv", text.getvalue())


GRADINGS_COLUMNS = ("student", "lab", "verdict", "points", "max_points", "gpu_index", "gpu_uuid", "gpu_name",
                    "host", "backend", "run", "job", "graded_at", "build_s", "static_s", "gpu_wait_s", "cases_s",
                    "bench_s", "total_s", "message")


def write_gradings_csv(out: Path, table: dict[str, dict[str, dict]]) -> Path:
    """OUT/gradings.csv, one row per report in OUT (GRADINGS_COLUMNS): its verdict and points
    (empty when the verdict is no grade), which GPU (nvidia-smi index on its host, UUID, name)
    and host graded it, by which back end, and the seconds of each stage (report["seconds"]:
    build, static, gpu_wait, cases, bench, total)."""
    text = io.StringIO()
    writer = csv.writer(text)           # RFC 4180: CRLF, and a name holding CR or LF quoted
    writer.writerow(GRADINGS_COLUMNS)
    for student, found in table.items():
        for lab, data in found.items():
            gpu = gpu_of(data) or {}
            mark = data.get("class") or {}
            secs = data.get("seconds") or {}
            writer.writerow([outdir.sheet_cell(student), lab, data["verdict"],
                             cell(data) if outdir.is_grade(data) else "",
                             f"{float(data.get('max_points') or 0):g}",
                             "" if gpu.get("index") is None else gpu["index"], gpu.get("uuid", ""),
                             gpu.get("name", ""), mark.get("host", ""), mark.get("backend", ""), mark.get("run", ""),
                             mark.get("job") or "", mark.get("graded_at", "")]
                            + ["" if secs.get(k) is None else f"{secs[k]:.2f}"
                               for k in ("build", "static", "gpu_wait", "cases", "bench", "total")]
                            + [outdir.sheet_cell(outdir.reason(data)[:REASON_WIDTH])])
    return outdir.write_atomic(out / "gradings.csv", text.getvalue())


def write_class_html(out: Path, table: dict[str, dict[str, dict]], lab_order: list[str]) -> Path | None:
    """OUT/class.html from classhtml.py, when that module is part of this kit (it is optional)."""
    try:
        from .classhtml import write_class_html as write_html
    except ModuleNotFoundError as err:
        if err.name and err.name.endswith("classhtml"):
            return None
        raise
    return write_html(out, graded_labs(table, lab_order), table)


def mixed_models(table: dict[str, dict[str, dict]]) -> dict[str, int]:
    """GPU name -> graded labs, over every report in OUT, when more than one model graded."""
    names = Counter((gpu_of(d) or {}).get("name") for found in table.values() for d in found.values()
                    if outdir.is_grade(d))
    names.pop(None, None)
    names.pop("", None)
    return dict(names) if len(names) > 1 else {}


# ------------------------------------------------------------------------------- summary

def _counts(verdicts) -> str:
    return ", ".join(f"{n} {v}" for v, n in sorted(Counter(verdicts).items())) or "none"


def _listed(gradings: list[Grading], verdict: bool = True) -> list[str]:
    """One line per grading: `  student/lab: verdict: reason` (names and reasons as printed)."""
    return [f"  {shown(g.student)}/{g.lab}: " + (f"{g.verdict}: " if verdict else "")
            + shown(g.message[:REASON_WIDTH]) for g in gradings]


def summarize(out: Path, table: dict[str, dict[str, dict]], saved: list[outdir.Saved], kept: int,
              notes: list[str], missing_as_zero: bool) -> ClassResult:
    """The class summary: what OUT holds (module docstring: what is no grade), what this run did."""
    everything = [Grading.from_report(s, r) for s, found in table.items() for r in found.values()]
    this_run = [Grading.from_report(s.student, s.report) for s in saved]
    lines = [f"the class in {out}: {len(table)} student(s), {len(everything)} lab report(s): "
             f"{_counts(g.verdict for g in everything)}",
             f"this run: {len(this_run)} grading(s): {_counts(g.verdict for g in this_run)}"
             + (f"; {kept} lab(s) kept, final already (--regrade grades them again)" if kept else "")]
    lines.append(f"class table: {out / 'class.csv'}; per grading (GPU, host, seconds): {out / 'gradings.csv'}")
    lines += [shown(n) for n in notes]
    failed = [g for g in everything if g.graded and not g.missing and g.verdict not in NOT_FAILURES]
    if failed:
        lines.append(f"{len(failed)} lab(s) failed, with the reason:")
        lines += _listed(failed)
    near = [g for g in everything if g.missing and g.message.startswith(outdir.NEAR_MISS)]
    missing = [g for g in everything if g.missing and g not in near]
    if near:
        lines.append(f"{len(near)} lab(s) submitted under another name (a near miss), shown as '{NEAR_MISS_CELL}' in "
                     "class.csv and never counted as 0 (grade.py import --accept takes the file, or put it in "
                     "place as kernel.cu):")
        lines += _listed(near, verdict=False)
    if missing:
        counted = ("counted as 0 in the gradebook files, but for a bonus lab (--missing-as-zero)" if missing_as_zero
                   else "left out of the gradebook files (--missing-as-zero counts them as 0)")
        lines.append(f"{len(missing)} lab(s) never submitted, shown as 'missing' in class.csv and {counted}:")
        lines += _listed(missing, verdict=False)
    errors = [g for g in everything if g.verdict == GRADER_ERROR]
    if errors:
        lines.append(f"{len(errors)} grading(s) failed to produce a report (verdict {GRADER_ERROR}; grade again "
                     "to complete them):")
        lines += _listed(errors, verdict=False)
    ungraded = [g for g in everything if not g.graded and g.verdict != GRADER_ERROR]
    if ungraded:
        lines.append(f"{len(ungraded)} lab(s) not measured ({', '.join(sorted({g.verdict for g in ungraded}))}): "
                     "no grade, shown as such in class.csv:")
        lines += _listed(ungraded)
    stood = [s for s in saved if s.kept]
    if stood:
        lines.append(f"{len(stood)} grading(s) of this run measured nothing, and the earlier grade stays (what "
                     f"this run got is in students/<student>/<lab>{outdir.ATTEMPT}.json):")
        lines += _listed([Grading.from_report(s.student, s.report) for s in stood])
    alarm = []
    if ungraded:
        alarm += [f"NOTHING WAS MEASURED for {len(ungraded)} of {len(everything)} lab(s) in {out} "
                  f"({', '.join(sorted({g.verdict for g in ungraded}))}): no GPU, or a broken machine.",
                  "Their 0 points are NOT grades: class.csv shows the verdict instead of points, and no "
                  "gradebook file holds a number for them.",
                  "Grade again on a machine with a GPU (the reports say what was missing)."]
    models = mixed_models(table)
    if models:
        alarm.append("WARNING: this class was graded on GPUs of different models: "
                     + ", ".join(f"{name} ({n} lab(s))" for name, n in sorted(models.items()))
                     + ". Scores compare within one model (copy bandwidth is measured in each run, but "
                       "targets are per model): grade the class on one model, or check gradings.csv.")
    status = 1 if errors or ungraded or stood else 0
    outdir.write_atomic(out / "summary.txt", "\n".join(lines + alarm) + "\n")
    return ClassResult(this_run, lines, alarm, status)


def class_files(out: Path, lab_order: list[str], missing_as_zero: bool = False, notes: list[str] | None = None,
                saved: list[outdir.Saved] | None = None, kept: int = 0,
                lab_facts: dict[str, dict] | None = None) -> ClassResult:
    """Write every class file from every report in OUT (module docstring) and return the summary.

    lab_order: every lab of the kit, in order; notes: lines for the summary (what was skipped
    in the submissions, the back end's notes); saved: what this run graded (outdir.save's
    answers, in the plan's order); kept: how many labs the plan kept (final already);
    lab_facts: for the gradebooks (gradebook.write_all).  The Gradescope files carry the
    leaderboard entries (leaderboard.gradescope_entries) of the students the class roster opts
    in under a pseudonym, and no leaderboard at all when nobody is opted in."""
    out = Path(out)
    outdir.sweep_temporaries(out)
    table = outdir.read_reports(out, lab_order)
    write_csv(out, table, lab_order)
    write_gradings_csv(out, table)
    names, _ = leaderboard.pseudonyms(leaderboard.roster_of(out))
    entries = leaderboard.gradescope_entries(table, names) if names else None
    all_notes = list(notes or []) + gradebook.write_all(out, table, lab_facts, missing_as_zero, entries)
    try:
        page = write_class_html(out, table, lab_order)
        if page:
            all_notes.append(f"class page: {page}")
    except Exception as err:          # the page is a convenience: never lose the grading over it
        all_notes.append(f"could not write the class page (classhtml.py): {type(err).__name__}: {err}")
    return summarize(out, table, list(saved or []), kept, all_notes, missing_as_zero)
