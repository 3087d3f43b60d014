"""The class files, each a function of the class table (grader/README.md, section 9, "The class files" and "The
gradebooks"), written by class_files.  Every name a student controls goes into a CSV cell through sheet_cell."""

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..base.files import write_atomic, write_json
from ..grading import gradescope, score
from . import classhtml, grades, outdir, plan
from .classtable import NEAR_MISS_CELL, ClassTable, book_cell, class_cell, gpu_of, load
from .importers import SITES, common
from .importers.roster import Roster, is_group
from .resume import Saved
from .submissions import ROSTER, sheet_cell, shown

#: Characters of a reason in summary.txt at most (the reports hold the whole message).
REASON_WIDTH = 300
GRADINGS_COLUMNS = ("student", "lab", "verdict", "points", "max_points", "gpu_index", "gpu_uuid", "gpu_name",
                    "host", "backend", "run", "job", "graded_at", "build_s", "static_s", "gpu_wait_s", "cases_s",
                    "bench_s", "total_s", "message")


def class_csv(t: ClassTable) -> str:
    """class.csv: a row per student of OUT, a cell per lab (class_cell), the total (grades.total)."""
    rows = [["student"] + t.labs + ["total"]]
    for student, found in t.reports.items():
        sum_ = grades.total(list(found.values()))
        rows.append([sheet_cell(student)] + [class_cell(found.get(lab)) for lab in t.labs]
                    + ["" if sum_ is None else f"{sum_:.2f}"])
    return common.csv_text(rows)


def gradings_csv(t: ClassTable) -> str:
    """gradings.csv, a row per report (GRADINGS_COLUMNS): points (empty: no grade), GPU, host, back end, seconds."""
    rows = [GRADINGS_COLUMNS]
    for student, found in t.reports.items():
        for lab, data in found.items():
            gpu, mark, secs = gpu_of(data) or {}, data.get("class") or {}, data.get("seconds") or {}
            rows.append([sheet_cell(student), lab, data["verdict"], class_cell(data) if score.is_grade(data) else "",
                         f"{float(data.get('max_points') or 0):g}",
                         "" if gpu.get("index") is None else gpu["index"], gpu.get("uuid", ""), gpu.get("name", ""),
                         mark.get("host", ""), mark.get("backend", ""), mark.get("run", ""), mark.get("job") or "",
                         mark.get("graded_at", "")]
                        + ["" if secs.get(k) is None else f"{secs[k]:.2f}"
                           for k in ("build", "static", "gpu_wait", "cases", "bench", "total")]
                        + [sheet_cell(grades.reason(data)[:REASON_WIDTH])])
    return common.csv_text(rows)


def gradescope_files(t: ClassTable) -> dict[tuple[str, str], dict | None]:
    """{(lab, student): results.json's data, or None: remove it}; no grade leaves its file as it was (module docs)."""
    files = {}
    for student, labs in t.reports.items():
        for lab, report in labs.items():
            bonus, verdict = t.bonus(lab), report.get("verdict")
            if verdict not in score.NOT_GRADED:
                files[(lab, student)] = None if verdict == score.MISSING and (
                    bonus or not t.missing_as_zero or grades.is_near_miss(report)) else gradescope.results(
                    dict(report, bonus=bonus), (t.leaderboard or {}).get((student, lab)))
    return files


def site_gradebooks(t: ClassTable, present: set[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """({file under OUT/gradebook/: text}, notes) per course site; present: (lab, student) of OUT's Gradescope files."""
    roster: Roster | None = t.roster
    if roster is None:
        return {}, [t.roster_note] if t.roster_note else []
    labs = [lab for lab in t.facts if any(lab in found for found in t.reports.values())]
    facts = {lab: t.facts[lab] for lab in labs}

    def graded_in(folder: str, row: dict, lab: str) -> str:
        return row.get(f"{lab} group") or folder

    def report(folder: str, row: dict, lab: str) -> dict | None:
        return t.reports.get(graded_in(folder, row, lab), {}).get(lab)

    def results(folder: str, row: dict, lab: str) -> str:
        student = graded_in(folder, row, lab)
        path = outdir.gradescope_path(t.out, lab, student)
        return path.relative_to(t.out).as_posix() if (lab, student) in present else ""

    notes, by_site, accounted = [], {}, set()
    for folder, row in sorted(roster.rows.items()):
        if is_group(row):
            accounted.add(folder)
            continue
        homes = {graded_in(folder, row, lab) for lab in labs}
        if row.get("site_id") and homes & set(t.reports):
            by_site.setdefault(row.get("site"), []).append((folder, row))
            accounted |= homes
    unknown = sorted(set(t.reports) - accounted - set(roster.rows))
    if unknown:
        notes.append(f"{len(unknown)} student folder(s) have no row in {ROSTER}, so no course-site gradebook line: "
                     + ", ".join(map(shown, unknown)))
    books: dict[str, str] = {}
    for site, module in SITES.items():
        if by_site.get(site):
            book = common.Book(labs, facts, by_site[site], report, results,
                               lambda f, r, lab: book_cell(report(f, r, lab), t.missing_as_zero,
                                                           facts[lab].get("bonus")))
            files, more = module.gradebook(book)
            books.update(files)
            notes += more
    if books:
        notes.append(f"course-site gradebooks: {t.out / outdir.GRADEBOOK}/ ({', '.join(books)})")
    return books, notes


class Grading(NamedTuple):
    """One (student, lab) as a summary sees it: its verdict, points and one-line reason."""
    student: str
    lab: str
    verdict: str
    points: float
    message: str

    @property
    def graded(self) -> bool:
        """False when the verdict is no grade (score.NOT_GRADED): its 0 points mean nothing."""
        return self.verdict not in score.NOT_GRADED

    @classmethod
    def of(cls, student: str, data: dict) -> "Grading":
        return cls(student, data.get("lab", ""), data.get("verdict", score.GRADER_ERROR),
                   float(data.get("points") or 0.0), grades.reason(data))


@dataclass
class ClassResult:
    """This run's gradings, the summary (OUT/summary.txt), the alarm (stderr), the exit status (0: all measured)."""
    gradings: list[Grading]
    summary: list[str]
    alarm: list[str]
    exit_status: int


def _counts(verdicts) -> str:
    return ", ".join(f"{n} {v}" for v, n in sorted(Counter(verdicts).items())) or "none"


def _listed(gradings: list[Grading], verdict: bool = True) -> list[str]:
    """One line per grading: `  student/lab: verdict: reason` (names and reasons as printed)."""
    return [f"  {shown(g.student)}/{g.lab}: " + (f"{g.verdict}: " if verdict else "")
            + shown(g.message[:REASON_WIDTH]) for g in gradings]


def summarize(t: ClassTable, saved: list[Saved], kept: int, notes: list[str]) -> ClassResult:
    """The class summary: what OUT holds (what is no grade, loudly), what this run did."""
    out = t.out
    everything = [Grading.of(s, r) for s, found in t.reports.items() for r in found.values()]
    this_run = [Grading.of(s.student, s.report) for s in saved]
    lines = [f"the class in {out}: {len(t.reports)} student(s), {len(everything)} lab report(s): "
             f"{_counts(g.verdict for g in everything)}",
             f"this run: {len(this_run)} grading(s): {_counts(g.verdict for g in this_run)}"
             + (f"; {kept} lab(s) kept, final already (--regrade grades them again)" if kept else ""),
             f"class table: {out / 'class.csv'}; per grading (GPU, host, seconds): {out / 'gradings.csv'}"]
    lines += [shown(n) for n in notes]
    failed = [g for g in everything if g.graded and g.verdict not in (score.MISSING,) + score.CORRECT]
    near = [g for g in everything if g.verdict == score.MISSING and g.message.startswith(grades.NEAR_MISS)]
    missing = [g for g in everything if g.verdict == score.MISSING and g not in near]
    errors = [g for g in everything if g.verdict == score.GRADER_ERROR]
    ungraded = [g for g in everything if not g.graded and g.verdict != score.GRADER_ERROR]
    stood = [Grading.of(s.student, s.report) for s in saved if s.kept]
    not_measured = ", ".join(sorted({g.verdict for g in ungraded}))
    counted = ("counted as 0 in the gradebook files, but for a bonus lab (--missing-as-zero)" if t.missing_as_zero
               else "left out of the gradebook files (--missing-as-zero counts them as 0)")
    for group, head, verdict in (
            (failed, "lab(s) failed, with the reason:", True),
            (near, f"lab(s) submitted under another name (a near miss), shown as '{NEAR_MISS_CELL}' in class.csv and "
                   "never counted as 0 (grade.py import --accept takes the file, or put it in place as kernel.cu):",
             False),
            (missing, f"lab(s) never submitted, shown as 'missing' in class.csv and {counted}:", False),
            (errors, f"grading(s) failed to produce a report (verdict {score.GRADER_ERROR}; grade again to complete "
                     "them):", False),
            (ungraded, f"lab(s) not measured ({not_measured}): no grade, shown as such in class.csv:", True),
            (stood, "grading(s) of this run measured nothing, and the earlier grade stays (what this run got is in "
                    f"students/<student>/<lab>{outdir.ATTEMPT}.json):", True)):
        if group:
            lines += [f"{len(group)} {head}"] + _listed(group, verdict)
    alarm = []
    if ungraded:
        alarm += [f"NOTHING WAS MEASURED for {len(ungraded)} of {len(everything)} lab(s) in {out} "
                  f"({not_measured}): no GPU, or a broken machine.",
                  "Their 0 points are NOT grades: class.csv shows the verdict instead of points, and no "
                  "gradebook file holds a number for them.",
                  "Grade again on a machine with a GPU (the reports say what was missing)."]
    models = Counter(name for found in t.reports.values() for d in found.values() if score.is_grade(d)
                     and (name := (gpu_of(d) or {}).get("name")))
    if len(models) > 1:
        alarm.append("WARNING: this class was graded on GPUs of different models: "
                     + ", ".join(f"{name} ({n} lab(s))" for name, n in sorted(models.items()))
                     + ". Scores compare within one model (copy bandwidth is measured in each run, but "
                       "targets are per model): grade the class on one model, or check gradings.csv.")
    return ClassResult(this_run, lines, alarm, 1 if errors or ungraded or stood else 0)


def class_files(out: Path, lab_order: list[str], missing_as_zero: bool = False, notes: list[str] | None = None,
                saved: list[Saved] | None = None, kept: int = 0, lab_facts: dict[str, dict] | None = None,
                roster: Roster | None = None) -> ClassResult:
    """Write every class file from every report in OUT and return the summary.  lab_order: every lab of the kit;
    notes: lines for the summary; saved: this run's resume.save answers; kept: labs the plan kept; lab_facts,
    roster: the plan's (None: the kit's labs' facts, and CLASS/roster.csv read here)."""
    out = Path(out)
    outdir.sweep_temporaries(out)
    t = load(out, lab_order, lab_facts or plan.lab_facts(plan.select_labs(lab_order)), missing_as_zero, roster)
    write_atomic(out / "class.csv", class_csv(t))
    write_atomic(out / "gradings.csv", gradings_csv(t))
    files = gradescope_files(t)
    for (lab, student), data in files.items():
        if data is None:
            outdir.gradescope_path(out, lab, student).unlink(missing_ok=True)
        else:
            write_json(outdir.gradescope_path(out, lab, student), data)
    present = {k for k in t.gradescope if k not in files} | {k for k, data in files.items() if data is not None}
    books, book_notes = site_gradebooks(t, present)
    for name, text in books.items():
        write_atomic(out / outdir.GRADEBOOK / name, text)
    all_notes = list(notes or []) + book_notes
    try:
        all_notes.append(f"class page: {classhtml.write_class_html(t)}")
    except Exception as err:          # the page is a convenience: never lose the grading over it
        all_notes.append(f"could not write the class page (classhtml.py): {type(err).__name__}: {err}")
    result = summarize(t, list(saved or []), kept, all_notes)
    write_atomic(out / "summary.txt", "\n".join(result.summary + result.alarm) + "\n")
    return result
