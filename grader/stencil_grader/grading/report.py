"""Reports of a graded lab: the JSON report (BUILD_DIR/report.json, every figure; to_dict), the
terminal table made from it (render_text), student_view, the report with no path of the
instructor's machine, and next_step, what the student should do next: the first thing the report
page (html.py) and the last the terminal table says.  Units: GB/s (1e9 bytes), milliseconds (bench),
seconds (build, check).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import sys
from pathlib import Path

from .. import KIT_ROOT, __version__
from ..base.files import display_path
from . import score
from .build import BUILD_LOG, make_path_problem
from .buildmessage import cut
from .pipeline import LabRun

FIRST_FAILURES = 3
_GREEN, _YELLOW, _RED, _RESET = "\033[32m", "\033[33m", "\033[31m", "\033[0m"
_COLOUR = {"pass": _GREEN, "ok": _GREEN, "slow": _YELLOW, "not_measured": _YELLOW,
           "not measured": _YELLOW, "not_run": _YELLOW, "skipped": _YELLOW}


def use_colour(stream=None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set or TERM is dumb."""
    stream = stream or sys.stdout
    return (hasattr(stream, "isatty") and stream.isatty() and "NO_COLOR" not in os.environ
            and os.environ.get("TERM") != "dumb")


def replay_command(report: dict) -> str:
    """The shell command (words quoted) that replays this run: `cd LABDIR && make check [SEED=N]
    [IMPL=...]`, or `python3 grader/grade.py lab LABDIR --impl DIR [--seed N]` for a folder make
    cannot take (build.make_path_problem)."""
    impl, seed = report["impl"], report.get("seed")
    if impl not in ("starter", "reference") and make_path_problem(Path(impl)):
        words = ["python3", "grader/grade.py", "lab", report["lab_dir"], "--impl", impl]
        return shlex.join(words + (["--seed", str(seed)] if seed is not None else []))
    words = ["make", "check"] + ([f"SEED={seed}"] if seed is not None else []) \
        + ([f"IMPL={impl}"] if impl != "starter" else [])
    return f"cd {shlex.quote(report['lab_dir'])} && {shlex.join(words)}"


def _replaced(value, pairs: list[tuple[str, str]]):
    """value with every string in it (nested dicts and lists too) rewritten by pairs, in order."""
    if isinstance(value, str):
        for old, new in pairs:
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {k: _replaced(v, pairs) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v, pairs) for v in value]
    return value


def student_view(report: dict) -> dict:
    """A copy of a lab report (to_dict's, or a class placeholder) with no path of the instructor's:
    a graded folder's source becomes "kernel.cu", its folder ".", its build "build", the lab's
    "labs/<lab>", the kit's folder relative; impl "submission", build_dir None, and replay the
    student's command in their own kit.  The starter's and reference's keep their paths."""
    lab = report.get("lab", "")
    graded_folder = report.get("impl") not in (None, "starter", "reference")
    pairs = [(str(report[key]), new) for key, new in (("source", "kernel.cu"), ("build_dir", "build"), ("impl", "."))
             if graded_folder and report.get(key)]
    lab_dir = report.get("lab_dir")
    if lab_dir and Path(lab_dir).is_absolute():
        pairs.append((str(lab_dir), f"labs/{lab}"))
    pairs.append((str(KIT_ROOT) + "/", ""))
    view = _replaced(report, pairs)
    if graded_folder:
        view.update(impl="submission", source="kernel.cu", build_dir=None, lab_dir=f"labs/{lab}")
        if view.get("seed") is not None:
            view["replay"] = replay_command(dict(view, impl="starter"))
    return view



def to_dict(run: LabRun) -> dict:
    """The JSON report of one graded lab (every figure; paths as strings)."""
    spec, s = run.spec, run.score
    check = run.check
    impl = run.impl if run.impl in ("starter", "reference") else str(Path(run.impl).resolve())
    report = {
        "grader_version": __version__, "generated_at": run.started_at, "lab": spec.lab, "number": spec.number,
        "title": spec.title, "bonus": spec.bonus, "lab_dir": display_path(spec.lab_dir), "impl": impl,
        "source": str(run.source), "build_dir": str(Path(run.build_dir).resolve()), "seed": run.seed,
        "verdict": s.verdict, "points": s.points, "max_points": s.max_points, "full_points": s.full_points,
        "messages": list(s.messages), "notes": list(run.notes),
        "final": run.final and s.verdict not in score.NOT_GRADED,
        "seconds": {k: round(v, 3) for k, v in run.seconds.items()}, "resources": run.resources,
        "sandbox": dict(run.sandbox), "program_output": program_output(run), "build": None,
        "static": [dataclasses.asdict(c) for c in run.static.checks] if run.static else None,
        "launches": [dataclasses.asdict(c) for c in run.launches], "gpu": _gpu_section(run),
        "limits": {"tolerance": dataclasses.asdict(spec.tolerance), "check": dataclasses.asdict(spec.check),
                   "bench_grid": dataclasses.asdict(spec.bench)},
        "correctness": dict(dataclasses.asdict(s.correctness), passed=None, total=None, cases=[]),
        "performance": dict(dataclasses.asdict(s.performance), ratio=s.ratio, target=None, bench=None),
    }
    if run.build:
        b = run.build
        report["build"] = {"outcome": b.outcome, "seconds": round(b.seconds, 2), "message": b.message,
                           "command": b.command,
                           "kernels": [dict(dataclasses.asdict(k), short_name=k.short_name) for k in b.kernels]}
    if check:
        report["correctness"].update(
            passed=check.passed, total=check.total, run_status=check.status, run_message=check.message,
            exit_status=check.exit_status, seconds=round(check.seconds, 2), list_error=check.list_error,
            stopped_early=check.stopped_early, reruns=check.reruns, phases=check.phases,
            stderr_tail=check.stderr_tail, xml_log=str(check.xml_log) if check.xml_log else None,
            cases=[dataclasses.asdict(c) for c in check.cases])
    if s.target:
        t = s.target
        report["performance"]["target"] = {
            "table": t.table, "floor": t.target.floor, "target": t.target.target, "calibrated": t.target.calibrated,
            "reference_ratio": t.target.reference_ratio, "note": t.note, "generic": t.table == "generic",
            "meaning": score.target_meaning(run.spec, t, run.device_name)}
    if run.bench:
        report["performance"].update(bench=run.bench.data, bench_status=run.bench.status,
                                     bench_message=run.bench.message, stderr_tail=run.bench.stderr_tail,
                                     timed_by=run.bench.program)
    report["replay"] = replay_command(report)
    return report


def _gpu_section(run: LabRun) -> dict | None:
    """Which GPU the GPU stages found (and which one a pool handed out), or None when they
    did not run."""
    if run.check is None and run.bench is None and not run.not_measured and run.gpu is None:
        return None
    no_gpu = run.not_measured if run.not_measured and run.not_measured.startswith("no GPU") else None
    return {"status": "no_gpu" if no_gpu else ("ok" if run.device else "not_run"),
            "message": no_gpu or "", "device": run.device,
            "assigned": run.gpu.as_dict() if run.gpu else None}


def program_output(run: LabRun) -> str:
    """What the student's code printed (a kernel's printf) in the check and bench runs."""
    return "".join(r.output for r in (run.check, run.bench) if r is not None and r.output.strip())


# ---------------------------------------------------------------- what to do next

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
            f"{without_prefix(line).splitlines()[0] if line else 'See the build section.'} "
            "Fix the machine (or ask your instructor), then grade again.")
    if verdict == score.GRADER_ERROR:
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
        return ("warn", "No grade yet: correctness and bandwidth were not measured.",
                f"{where}Why: {_sentence(why)} {todo}")
    if verdict == "pending":
        return "warn", "No grade yet: the GPU stages have not run.", "The build and static checks are done."
    if verdict in ("incorrect", "crash", "timeout") and c.get("total"):
        first = next((x for x in c.get("cases") or [] if x.get("outcome") != "pass"), None)
        failed = c["total"] - (c.get("passed") or 0)
        said = (str(first.get("message") or first.get("outcome")).strip().splitlines() or [""])[0] if first else ""
        return "bad", f"{failed} of {c['total']} correctness cases did not pass: fix the first one.", (
            f"{first.get('label') if first else ''}: {_sentence(said)} Replay these inputs with: "
            f"{report.get('replay') or 'make check'}; make sanitize finds out-of-bounds accesses and races.")
    if verdict == "constraint":
        return "warn", "Correct, but a constraint of this lab failed: performance earns no points until it passes.", (
            f"{_sentence(without_prefix(p.get('message')))} The static checks and launches say what was seen.")
    if verdict == "slow":
        return "warn", "Correct, and short of the bandwidth target.", (
            f"Your kernel moved its bytes at {_num(p.get('ratio'), '.3f')} of the copy bandwidth; full performance "
            f"points from {_num((p.get('target') or {}).get('target'), 'g')}. "
            "Run make profile in the lab directory to see what slows it down (the handout section that teaches each "
            "fix is named).")
    if verdict == "implausible":
        return "bad", "The timing is implausible: no performance points.", without_prefix(p.get("message"))
    if verdict in ("incorrect", "crash", "timeout"):       # the timed run's output, or the bench itself
        return "bad", f"The timed run failed ({verdict}): no performance points.", without_prefix(p.get("message") or
                                                                                       c.get("message"))
    return ("warn", f"Verdict: {verdict or 'unknown'}.",
            " ".join(without_prefix(m) for m in messages[:1]) or "See the report.")


# ---------------------------------------------------------------- terminal

def paint(word: str, colour: bool) -> str:
    return f"{_COLOUR.get(word, _RED)}{word}{_RESET}" if colour else word


def _pts(stage: dict) -> str:
    return f"{stage['points']:.2f}/{stage['max_points']:g}"


def _row(name: str, status: str, detail: str, colour: bool) -> str:
    return f"  {name:<12} {paint(status, colour)}{' ' * max(0, 14 - len(status))} {detail}".rstrip()


def _kernel_lines(build: dict) -> list[str]:
    """One line per kernel and architecture from the ptxas report."""
    return [f"      kernel {k.get('label') or k['short_name']} ({k['arch']}): {k['registers']} registers, "
            f"{k['smem_bytes']} B static shared memory, " + ("no spills" if not (k["spill_stores"] or k["spill_loads"])
                                                             else f"spills: {k['spill_stores']} B stored, "
                                                             f"{k['spill_loads']} B loaded per thread")
            for k in build["kernels"] if k["entry"]]


_NO_SEED = {"kit_error": "the build stopped on the machine's or the kit's fault (below), not your code's",
            "compile_error": "your file did not build, so no case ran; fix the first error below, then run make "
                             "check again",
            "timeout": "the build did not finish in time, so no case ran (below)"}


def seed_line(report: dict) -> str:
    """The report's first line: the seed and how to replay it, or why none was drawn and,
    when the submission stopped the run (its build, a forbidden call), what to do instead."""
    if report["seed"] is not None:
        return f"seed: {report['seed']} (replay: {report['replay']})"
    if why := _NO_SEED.get((report.get("build") or {}).get("outcome")):
        return f"seed: none drawn: {why}"
    if report["verdict"] == "forbidden":
        return "seed: none drawn: a static check stopped the run (below); fix what it names, then run make check again"
    return f"seed: none drawn (the cases did not run); run again with: {report['replay']}"


def sandbox_line(layers: dict) -> str | None:
    """One line on the sandbox the student code ran in (None when nothing ran)."""
    if not layers:
        return None
    off = [f"{k} ({v.removeprefix('off: ')})" for k, v in layers.items() if v.startswith("off")]
    on = [k for k, v in layers.items() if v.startswith("on")]
    line = "on: " + ", ".join(on) if on else "off"
    return line + ("; off: " + "; ".join(off) if off else "")


def render_text(report: dict, colour: bool = False) -> str:
    """The terminal table of one JSON report; its first line is the seed."""
    out = [seed_line(report), f"Lab {report['lab']}: {report['title']}",
           f"  source {display_path(report['source'])} (impl {report['impl']})",
           f"  build dir {display_path(report['build_dir'])}", ""]
    b = report["build"]
    if b:
        out.append(_row("build", b["outcome"], f"{b['seconds']:.1f} s", colour))
        out += _kernel_lines(b) if b["outcome"] == "ok" else ["      " + line for line in b["message"].splitlines()] \
            + [f"      (make's whole output: {display_path(Path(report['build_dir']) / BUILD_LOG)})"]
    out += _check_lines("static", report["static"], colour) + _correctness_lines(report, colour) \
        + _performance_lines(report, colour) + _check_lines("launches", report.get("launches"), colour)
    out += _output_lines(report.get("program_output") or "")
    if d := (report["gpu"] or {}).get("device"):
        out.append(_row("device", "", f"{d.get('name', '?')} (cc {d.get('cc', '?')}, "
                                      f"{d.get('sm_count', '?')} SMs)", False))
    if box := sandbox_line(report.get("sandbox") or {}):
        out.append(_row("sandbox", "", box, False))
    out += [f"  note: {line}" for line in report.get("notes", [])]
    out += ["", _row("verdict", report["verdict"], f"{report['points']:.2f}/{report['max_points']:g} points",
                     colour)]
    _, headline, detail = next_step(report)
    out.append(f"  next: {headline} {detail}")
    return "\n".join(out) + "\n"


#: Lines of the student's own output shown on the terminal (the JSON keeps what the grader kept).
OUTPUT_LINES = 20


def _check_lines(stage: str, checks: list[dict] | None, colour: bool) -> list[str]:
    """A line per static or launch check, "ok" for a pass, then its first ten details."""
    out = []
    for c in checks or []:
        out.append(_row(stage, "ok" if c["status"] == "pass" else c["status"], f"{c['name']}: {c['message']}", colour))
        out += ["      " + d for d in c["details"][:10]]
    return out


def _stderr_lines(program: str, tail: str | None) -> list[str]:
    return [f"      {program}'s stderr (last lines):"] + ["        " + line for line in tail.splitlines()[-10:]] \
        if tail else []


def _output_lines(text: str) -> list[str]:
    """What the student's code printed (a kernel's printf), first lines, control bytes escaped."""
    if not text.strip():
        return []
    lines = text.rstrip("\n").splitlines()
    shown = ["      " + cut(line.encode("unicode_escape").decode("ascii").replace("\\t", "    "))
             for line in lines[:OUTPUT_LINES]]
    more = [f"      ... {len(lines) - OUTPUT_LINES} more line(s) in report.json"] if len(lines) > OUTPUT_LINES else []
    return ["  output of your code (its printf, from the correctness and timing runs):"] + shown + more


def _not_measured(stage_name: str, stage: dict, colour: bool, gpu: dict | None = None) -> str:
    """"correctness: not measured (why), 0.00/40 points"; the probe's no-GPU message is left to "next:"."""
    reason = stage["message"].removeprefix("not measured: ")
    said = without_prefix((gpu or {}).get("message"))
    if (gpu or {}).get("status") == "no_gpu" and said and said in reason:
        reason = reason.replace(said, "no GPU, see next")
    return f"  {stage_name}: {paint('not measured', colour)} ({reason}), {_pts(stage)} points"


def by_tcase(cases: list[dict]) -> dict[str, list[dict]]:
    """A report's cases grouped by Check test case (its name as text), in their order."""
    groups: dict[str, list[dict]] = {}
    for case in cases:
        groups.setdefault(str(case.get("tcase")), []).append(case)
    return groups


def _case_line(case: dict) -> str:
    """"outcome: label: first line of the message" (the label once, even when the message starts with it)."""
    if case["outcome"] == "pass":
        return f"pass: {case['label']}"
    message = (case["message"].strip().splitlines() or [""])[0]
    if not message.startswith(case["label"]):
        message = f"{case['label']}: {message}"
    return f"{case['outcome']}: {message}"


def _correctness_lines(report: dict, colour: bool) -> list[str]:
    c = report["correctness"]
    if c["verdict"] == "not_measured":
        return [_not_measured("correctness", c, colour, report.get("gpu"))]
    lines = [_row("correctness", c["verdict"], f"{_pts(c)}  {c['message']}", colour)]
    if c["total"] is None:
        return lines
    for tcase, cases in by_tcase(c["cases"]).items():
        passed = sum(x["outcome"] == "pass" for x in cases)
        lines.append(f"      {tcase:<20} {passed}/{len(cases)}")
        failures = [x for x in cases if x["outcome"] != "pass"]
        lines += [f"        {cut(_case_line(x))}" for x in failures[:FIRST_FAILURES]]
        if len(failures) > FIRST_FAILURES:
            lines.append(f"        ... {len(failures) - FIRST_FAILURES} more not passed")
    lines += [f"      {c[key]}" for key in ("run_message", "list_error") if c.get(key)]
    return lines + (_stderr_lines("check", c.get("stderr_tail")) if c["verdict"] in ("crash", "timeout") else [])


def _performance_lines(report: dict, colour: bool) -> list[str]:
    p = report["performance"]
    lines = [_not_measured("performance", p, colour, report.get("gpu")) if p["verdict"] == "not_measured"
             else _row("performance", p["verdict"], f"{_pts(p)}  {p['message']}", colour)]
    if data := p.get("bench"):
        lines.append(f"      {data['gbps']:.1f} GB/s effective, copy {data['copy_gbps']:.1f} GB/s, "
                     f"ratio {data['ratio']:.3f}; median {data['ms_median']:.3f} ms"
                     + (f" over {data['repetitions']} repetitions" if "repetitions" in data else ""))
        launchers = data.get("launchers") or []
        lines += [f"        {k['name']}: {k['gbps']:.1f} GB/s, ratio {k['ratio']:.3f}, median {k['ms_median']:.3f} ms"
                  for k in launchers if len(launchers) > 1]       # lab 7: each kernel's own figure
        if "nx" in data:
            lines.append(f"      grid {data['nx']} x {data['ny']} x {data.get('nz', 1)}, "
                         f"{data.get('steps', 1)} sweep(s) per call")
        if data.get("scaled_down"):
            lines.append(f"      scaled down: {data.get('note', '')}")
    if t := p.get("target"):
        lines.append(f"      target table {t['table']} ({t['note']}): floor {t['floor']:g}, "
                     f"target {t['target']:g} of copy bandwidth"
                     + (f"; calibrated: {t['calibrated']}" if t.get("calibrated") else ""))
        if t.get("generic") and t.get("meaning"):
            lines.append(f"      what this means: {t['meaning']}")
    return lines + (_stderr_lines("bench", p.get("stderr_tail")) if p.get("bench_status") not in (None, "ok") else [])
