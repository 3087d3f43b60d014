"""What a student should do next, from a graded lab's report: the first thing the report page
(html.py) and the terminal table (report.py) say.

    next_step(report) -> (tone, headline, detail)
    without_prefix(message) -> str       a stage's message without its "not measured: " / "not run: "
"""

from __future__ import annotations

import re


def without_prefix(message: str | None) -> str:
    """A stage's message without the "not measured: " or "not run: " it starts with (the page says
    that in its own words), so that no sentence reads "not measured: not measured: ..."."""
    return re.sub(r"^(?:(?i:not measured|not run)\s*:\s*)+", "", str(message or "").strip())


def _sentence(text) -> str:
    """text as a sentence: one full stop at its end, not two."""
    text = str(text or "").strip()
    return text if not text or text.endswith((".", "!", "?")) else text + "."


def _num(value, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def next_step(report: dict) -> tuple[str, str, str]:
    """(tone, headline, detail) of what the student should do next, from the report's verdict:
    tone is "good", "warn" or "bad" (the box's colour); detail is plain text, one line (the
    page escapes it).  Every verdict of score.VERDICTS, and the class placeholders', has one."""
    verdict = report.get("verdict")
    c, p = report.get("correctness") or {}, report.get("performance") or {}
    gpu = report.get("gpu") or {}
    messages = [str(m) for m in report.get("messages") or []]
    replay = report.get("replay") or "make check"
    if verdict == "pass":
        return "good", "Full marks.", ("Every case passed and the bandwidth reached the target. To learn more, run "
                                       "make profile, or try the next lab.")
    if verdict == "compile_error":
        return "bad", "Your file did not build: fix the first error the compiler names.", (
            "The compiler's output is in the build section; later errors often follow from the first. "
            "Then run make check again.")
    if verdict == "kit_error":
        line = next((m for m in messages if "kit error" in m), messages[0] if messages else "")
        return "warn", "No grade: the machine or the kit is at fault, not your code.", (
            f"{without_prefix(line).splitlines()[0] if line else 'See the build section.'} Fix the machine (or ask your "
            "instructor), then grade again.")
    if verdict == "grader_error":
        line = next((m for m in messages if m.strip()), "")
        return "warn", "No grade: the grader itself failed, not your code.", (
            f"{_sentence(without_prefix(line).splitlines()[0]) if line else ''} Grade again; if it fails the same "
            "way, tell your instructor (with the report).").strip()
    if verdict == "forbidden":
        failed = [s for s in report.get("static") or [] if s.get("status") == "fail"]
        what = (failed[0].get("details") or [failed[0].get("message")])[0] if failed else (messages or [""])[0]
        return "bad", "Your file uses something a kernel file may not, so it was not run.", (
            f"{_sentence(what)} Remove it (the static checks list every use), then run make check again.")
    if verdict == "not_measured":
        built = (report.get("build") or {}).get("outcome") == "ok"
        why = without_prefix(gpu.get("message") or p.get("message") or c.get("message") or (messages or [""])[0])
        failed = "; ".join(f"{s.get('name')}: {s.get('message')}" for s in report.get("static") or []
                           if s.get("status") == "fail")
        notes = " ".join(_sentence(d) for s in report.get("static") or [] if s.get("status") == "warn"
                         for d in s.get("details") or [s.get("message")])
        where = ("" if not built else f"Your file built, but a static check failed ({failed}): fix that first. "
                 if failed else "Your file built and passed the static checks. ") + (f"Note: {notes} " if notes else "")
        todo = ("Run make check on a machine with an NVIDIA GPU for a grade."
                if gpu.get("status") == "no_gpu" else "Run make check again once that is fixed.")
        return "warn", "No grade yet: correctness and bandwidth were not measured.", f"{where}Why: {_sentence(why)} {todo}"
    if verdict == "pending":
        return "warn", "No grade yet: the GPU stages have not run.", "The build and static checks are done."
    if verdict in ("incorrect", "crash", "timeout") and c.get("total"):
        first = next((x for x in c.get("cases") or [] if x.get("outcome") != "pass"), None)
        failed = c["total"] - (c.get("passed") or 0)
        said = (str(first.get("message") or first.get("outcome")).strip().splitlines() or [""])[0] if first else ""
        return "bad", f"{failed} of {c['total']} correctness cases did not pass: fix the first one.", (
            f"{first.get('label') if first else ''}: {_sentence(said)} Replay these inputs with: {replay}; make sanitize "
            "finds out-of-bounds accesses and races.")
    if verdict == "constraint":
        why = without_prefix(p.get("message"))
        return "warn", "Correct, but a constraint of this lab failed: performance earns no points until it passes.", (
            f"{_sentence(why)} The static checks and launches say what was seen.")
    if verdict == "slow":
        t = p.get("target") or {}
        ratio = p.get("ratio")
        return "warn", "Correct, and short of the bandwidth target.", (
            f"Your kernel moved its bytes at {_num(ratio, '.3f')} of the copy bandwidth; full performance points "
            f"from {_num(t.get('target'), 'g')}. Run make profile in the lab directory to see what slows it "
            "down (the handout section that teaches each fix is named).")
    if verdict == "implausible":
        return "bad", "The timing is implausible: no performance points.", without_prefix(p.get("message"))
    if verdict in ("incorrect", "crash", "timeout"):       # the timed run's output, or the bench itself
        return "bad", f"The timed run failed ({verdict}): no performance points.", without_prefix(p.get("message") or
                                                                                       c.get("message"))
    return "warn", f"Verdict: {verdict or 'unknown'}.", " ".join(without_prefix(m) for m in messages[:1]) or "See the report."
