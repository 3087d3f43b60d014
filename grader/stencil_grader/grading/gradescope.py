"""Gradescope's results.json of one graded lab (results(report, leaderboard=None)), in Gradescope's
autograder output format (https://gradescope-autograders.readthedocs.io/en/latest/specs/ and
.../leaderboards/): tests whose max_score add up to the lab's points, all "visible", made from
report.student_view (no path of the instructor's machine); extra_data: lab, verdict, points, bonus.
"""

from __future__ import annotations

from .report import _case_line, by_tcase, student_view


def _split(total: float, weights: list[int]) -> list[float]:
    """total split in proportion to weights, rounded to 0.01, summing exactly to round(total, 2)."""
    whole = sum(weights)
    parts = [round(total * w / whole, 2) for w in weights]
    if parts:
        parts[-1] = round(round(total, 2) - sum(parts[:-1]), 2)
    return parts


def tests(report: dict) -> list[dict]:
    """Gradescope test entries of one lab report, as its student sees it (their scores sum to
    the lab's points): build and static checks (0 points), correctness per Check test case
    (its points split by cases passed), performance, the program's own output (0 points)."""
    report = student_view(report)
    head = f"{report['verdict']}: {float(report['points']):.2f}/{float(report['max_points']):g} points"
    if report.get("seed") is not None:
        head += f"; seed {report['seed']} (replay in your copy of the kit: {report.get('replay')})"
    if "correctness" not in report:          # a grading that produced no report (instructor mode)
        return [_test(report["lab"], 0.0, report["max_points"],
                      head + "\n" + "\n".join(report.get("messages", [])))]
    b = report.get("build")
    build_lines = [f"build: {b['outcome']}"] + ([b["message"]] if b["outcome"] != "ok" else []) if b else []
    for c in report.get("static") or []:
        build_lines += [f"static {c['name']}: {c['status']}: {c['message']}"] + ["  " + d for d in c["details"]]
    found = [_test("build and static checks", 0.0, 0.0, head + "\n" + "\n".join(build_lines))]
    c = report["correctness"]
    groups = by_tcase(c["cases"])
    if groups and c["total"]:
        names = list(groups)
        scores = _split(c["points"], [sum(x["outcome"] == "pass" for x in groups[n]) for n in names]) \
            if c["points"] else [0.0] * len(names)
        maxima = _split(c["max_points"], [len(groups[n]) for n in names])
        found += [_test(f"correctness: {name}", got, most, "\n".join(_case_line(x) for x in groups[name]))
                  for name, got, most in zip(names, scores, maxima)]
    else:
        found.append(_test("correctness", c["points"], c["max_points"], f"{c['verdict']}: {c['message']}"))
    p = report["performance"]
    found.append(_test("performance", p["points"], p["max_points"], f"{p['verdict']}: {p['message']}"))
    if (report.get("program_output") or "").strip():
        found.append(_test("output of your code", 0.0, 0.0, report["program_output"]))
    return found


def _test(name: str, score: float, max_score: float, output: str) -> dict:
    return {"name": name, "score": score, "max_score": max_score, "output": output, "visibility": "visible"}


def results(report: dict, leaderboard: list[dict] | None = None) -> dict:
    """Gradescope's results.json of one lab report (module docstring).  leaderboard: entries
    {"name", "value"[, "order": "asc"|"desc"]}, written only when given (ValueError for an
    entry without a name or a value, or with another order)."""
    found = tests(report)
    data = {"score": round(float(report["points"]), 2),
            "output": found[0]["output"].splitlines()[0] if found else "", "tests": found,
            "extra_data": {"lab": report.get("lab"), "verdict": report.get("verdict"),
                           "max_points": report.get("max_points"), "bonus": bool(report.get("bonus"))}}
    if leaderboard is not None:
        for entry in leaderboard:
            if not isinstance(entry, dict) or "name" not in entry or "value" not in entry \
                    or entry.get("order", "desc") not in ("asc", "desc"):
                raise ValueError(f"a Gradescope leaderboard entry is {{'name', 'value'[, 'order': 'asc' or "
                                 f"'desc']}}, got {entry!r}")
        data["leaderboard"] = [dict(e) for e in leaderboard]
    return data
