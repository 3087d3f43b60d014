"""What a report means for a class: a grade (is_grade) unless "missing" or one of score.NOT_GRADED, whose 0 points mean
nothing; a "missing" report of something submitted under another name is a near miss, never 0."""

from ..base import labspec
from ..grading import score

#: How a "missing" report's message starts when something was submitted under another name (a
#: near miss: Kernel.cu, kernel (1).cu, a .zip, ...): never counted as 0 (plan.py writes it).
NEAR_MISS = "near miss: "


def is_near_miss(report: dict | None) -> bool:
    """True for a "missing" report of a near miss (NEAR_MISS): submitted, under another name."""
    return bool(report) and report.get("verdict") == score.MISSING and reason(report).startswith(NEAR_MISS)


def reason(report: dict) -> str:
    """Why a report got its verdict, in one line: its first message, else the verdict's stage's."""
    lines = [m for m in report.get("messages") or [] if isinstance(m, str) and m.strip()]
    for stage in ("correctness", "performance"):
        section = report.get(stage)
        if isinstance(section, dict) and section.get("verdict") not in (None, "pass", "not_run") \
                and section.get("message"):
            lines.append(section["message"])
    return lines[0].strip().splitlines()[0] if lines else ""


def total(reports: list[dict]) -> float | None:
    """The class total of one student's reports ("missing" adds 0); None when one of them is no grade."""
    if any(r.get("verdict") in score.NOT_GRADED for r in reports):
        return None
    return round(sum(float(r.get("points") or 0.0) for r in reports if score.is_grade(r)), 2)


def placeholder(spec: labspec.LabSpec, student: str, verdict: str, message: str) -> dict:
    """A report no grading wrote ("missing", "grader_error"), or refused before any ran (compile_error)."""
    return {"lab": spec.lab, "title": spec.title, "bonus": spec.bonus, "student": student, "verdict": verdict,
            "points": 0.0, "max_points": spec.points.total, "full_points": False,
            "final": verdict not in score.NOT_GRADED + (score.MISSING,), "messages": [message], "seconds": {},
            "gpu": None}
