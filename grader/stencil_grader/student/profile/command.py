"""`grade.py profile`: build, read what the build says of each kernel (static_facts), profile (with
Nsight Compute's counters, or without them), analyse, write the files (grader/README.md, section 8)."""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...base import labspec
from ...base.files import display_path, write_json
from ...grading import build as grading_build, names, pipeline, sass
from . import access, counters, ncu, nocounters, rules as rule_table, text as rendering
from .common import EXIT_CANNOT, EXIT_FAILED, EXIT_PROFILED, CountersLocked, ProfileError, inputs_record


@dataclass
class ProfileRun:
    """exit_code (common.EXIT_*), terminal text (naming the files written), analyse()'s result (None:
    nothing diagnosed), seconds."""

    exit_code: int
    text: str
    result: dict | None = None
    seconds: float = 0.0


def static_facts(build_dir: Path) -> dict[str, dict]:
    """Per student kernel (mangled name): its label, ptxas.log's registers, smem_bytes, spills and
    stack (bytes), the SASS's div_rem, div_rem_in_loop, widest_load and widest_store (bytes per thread),
    kernel.ptx's accesses.  ProfileError: no kernel of the student's (EXIT_CANNOT: unreadable SASS)."""
    log = Path(build_dir) / "ptxas.log"
    resources = grading_build.parse_ptxas_log(log.read_text(errors="replace")) if log.is_file() else []
    facts: dict[str, dict] = {}
    for k in resources:
        if k.entry:
            facts[k.name] = {"label": names.kernel_label(k.name), "arch": k.arch, "registers": k.registers,
                             "smem_bytes": k.smem_bytes, "spill_stores": k.spill_stores,
                             "spill_loads": k.spill_loads, "stack_bytes": k.stack_bytes,
                             "div_rem": 0, "div_rem_in_loop": 0, "widest_load": 0, "widest_store": 0,
                             "accesses": []}
    if not facts:
        raise ProfileError(f"{log} lists no kernel (__global__ function) of your file: there is nothing "
                           "to profile", EXIT_FAILED)
    try:
        code = sass.student_code(build_dir)
    except sass.SassError as err:
        raise ProfileError(str(err), EXIT_CANNOT) from err
    for name, fact in facts.items():
        if fn := code.get(int(re.sub(r"\D", "", fact["arch"] or "") or 0), {}).get(name):
            divisions = [o for o, _ in sass.integer_divisions(fn)]
            fact.update(div_rem=len(divisions), div_rem_in_loop=len(sass.in_loops(fn, divisions)),
                        widest_load=sass.widest_global_load(fn), widest_store=sass.widest_global_load(fn, ("STG",)))
    ptx_path = Path(build_dir) / "kernel.ptx"
    if ptx_path.is_file():
        accesses = access.kernel_accesses(access.parse_ptx(ptx_path.read_text(errors="replace")))
        for name, fact in facts.items():
            fact["accesses"] = accesses.get(name, [])
    return facts


def collect_inputs(spec: labspec.LabSpec, impl: str, build_dir: Path, seed: int | None) -> dict:
    """Profile a good build under Nsight Compute; returns the profile-inputs record (mode
    "counters").  Raises ProfileError (CountersLocked when the counters are not permitted)."""
    found = ncu.find_ncu()
    if found is None:
        raise ProfileError(ncu.NO_NCU_FIX)
    static = static_facts(build_dir)
    command, raw, bench = ncu.run_ncu(found, static.keys(), build_dir, seed)
    if not ncu.parse_raw_csv(raw):
        raise ProfileError("ncu profiled none of your kernels: did the launcher launch any? "
                           f"(looked for {', '.join(f['label'] for f in static.values())})")
    return inputs_record(spec, impl, "counters", bench.get("device"), ncu_version=ncu.ncu_version(found),
                         ncu_command=[str(c) for c in command], bench=bench, static=static, ncu_raw_csv=raw)


def profile_lab(lab_dir, impl: str = "starter", build_dir: Path | None = None, seed: int | None = None,
                arch: str | None = None, from_inputs: Path | None = None, counters_wanted: bool = True) -> ProfileRun:
    """The whole command (grader/README.md, section 8); never raises for what the student's code or this
    machine does (ProfileRun.exit_code).  counters_wanted False: no counters even where ncu reads them."""
    start = time.monotonic()
    lab_dir = pipeline.resolve_lab_dir(lab_dir)
    spec = labspec.load(Path(lab_dir) / "lab.json")
    build_dir = Path(build_dir) if build_dir else pipeline.default_build_dir(spec.lab, impl)
    table = rule_table.load_rules()
    written: list[Path] = []
    said = ""
    try:
        if from_inputs:
            inputs = json.loads(Path(from_inputs).read_text())
        else:
            why = None
            if not counters_wanted or nocounters.forced():
                why = "asked for (--no-counters or STENCIL_PROFILE_COUNTERS=off)"
            elif ncu.find_ncu() is None:
                why = "Nsight Compute (ncu) is not installed here"
                said = f"grade.py profile: {why}: the diagnosis below comes without counters ({ncu.NO_NCU_FIX})\n"
            if why:
                nocounters.require_gpu()         # before a build that would be for nothing
            print(f"building {spec.lab} ({impl}) in {display_path(build_dir)} ...", flush=True)
            built = grading_build.build(spec.lab_dir, impl, build_dir, arch)
            if not built.ok:
                raise ProfileError(f"the build failed ({built.outcome}); nothing to profile:\n{built.message}",
                                   EXIT_FAILED)
            inputs = None
            if why is None:
                print("profiling under Nsight Compute (ncu) ...", flush=True)
                try:
                    inputs = collect_inputs(spec, impl, build_dir, seed)
                except CountersLocked:
                    why = "Nsight Compute may not read this GPU's counters (ERR_NVGPUCTRPERM)"
                    said = (f"grade.py profile: {why}: the diagnosis below comes without counters "
                            f"(to have them: {ncu.PERMISSION_FIX})\n")
                    print(said, end="", flush=True)
            if inputs is None:
                print("diagnosing without counters: the PTX, ptxas's report and the launch audit ...", flush=True)
                inputs = nocounters.collect(spec, impl, build_dir, seed, static_facts(build_dir), why)
            written.append(write_json(build_dir / "profile-inputs.json", inputs))
        result = analyse(inputs, table)
    except ProfileError as err:
        return ProfileRun(err.exit_code, f"grade.py profile: {err}\n", seconds=time.monotonic() - start)
    except (ValueError, KeyError) as err:
        return ProfileRun(EXIT_CANNOT, f"grade.py profile: cannot read the profile ({err})\n",
                          seconds=time.monotonic() - start)
    if not from_inputs:
        written.append(write_json(build_dir / "profile.json", result))
        report = build_dir / "profile.ncu-rep"
        written += [p for p in (_rewrite_report_page(build_dir, result),
                                report if report.is_file() and result["mode"] == "counters" else None) if p]
    seconds = time.monotonic() - start
    text = said + rendering.render_text(result)
    if written:
        text += "\nwritten: " + ", ".join(display_path(p) for p in written) + "\n"
        text += "  (open profile.ncu-rep in Nsight Compute, ncu-ui, for every counter)\n" if any(
            p.suffix == ".ncu-rep" for p in written) else ""
    text += f"profiled in {seconds:.1f} s; the profile is not part of the grade\n"
    return ProfileRun(EXIT_PROFILED, text, result, seconds)


def _rewrite_report_page(build_dir: Path, result: dict) -> Path | None:
    """report.html again, now with the diagnosis, when the build directory holds a report.json."""
    report_json = Path(build_dir) / "report.json"
    if not report_json.is_file():
        return None
    try:
        from ...grading import html, progress

        data = json.loads(report_json.read_text())
        return html.write_lab_html(data, Path(build_dir) / "report.html", profile=result,
                                   history=progress.read(Path(build_dir) / progress.BUILD_HISTORY))
    except (ImportError, OSError, ValueError, KeyError, TypeError) as err:
        print(f"  report.html not rewritten: {err}", file=sys.stderr)
        return None


def _counter_kernels(inputs: dict) -> list[dict]:
    rows = ncu.parse_raw_csv(inputs["ncu_raw_csv"])
    static = inputs.get("static", {})
    by_label = {f["label"]: name for name, f in static.items()}
    total_ms = sum((r["metrics"].get("gpu__time_duration.sum") or 0.0) / 1e6 for r in rows)
    kernels = []
    for r in rows:
        mangled = r["name"] if r["name"] in static else by_label.get(r["name"], r["name"])
        fact = static.get(mangled, {})
        kernels.append({"name": mangled, "label": fact.get("label", names.kernel_label(mangled)),
                        "block": r["block"], "grid": r["grid"], "static": fact,
                        "figures": counters.derive(r, fact, inputs, total_ms)})
    return kernels


#: The figures whose absence the report names, per mode.
WANTED = {"counters": ("dram_bytes", "gld_sectors_per_request", "shared_conflict_share", "theoretical_occupancy",
                       "local_bytes", "xu_share", "top_stall"),
          "code": ("gld_sectors_per_request", "theoretical_occupancy")}


def analyse(inputs: dict, table: rule_table.RuleTable) -> dict:
    """The diagnosis (profile.json) of one profile-inputs record, without a GPU: mode ("counters" or "code";
    "ptx" is read as "code"), kernels [{name, label, block, grid, figures, static}], findings, worst (severity or
    None), not_measured (figures missing), and the inputs' facts.  ValueError: an unreadable raw CSV."""
    mode = inputs.get("mode", "counters")
    mode = rule_table.MODE_ALIASES.get(mode, mode)
    kernels = _counter_kernels(inputs) if mode == "counters" else nocounters.kernels(inputs)
    bench = inputs["bench"]
    ratio, target = bench.get("ratio"), inputs.get("target_ratio")
    at_target = ratio is not None and target is not None and ratio >= target
    findings = rule_table.evaluate(table, kernels, inputs["lab"], at_target, mode)
    missing = sorted({w for k in kernels for w in WANTED[mode] if k["figures"].get(w) is None})
    return {"mode": mode, "no_counters": inputs.get("no_counters"), "lab": inputs["lab"], "impl": inputs.get("impl"),
            "device": inputs.get("device"), "recorded_at": inputs.get("recorded_at"),
            "ncu_version": inputs.get("ncu_version") if mode == "counters" else "no counters",
            "source": inputs.get("source"), "source_sha256": inputs.get("source_sha256"),
            "bench": {k: bench.get(k) for k in ("nx", "ny", "nz", "steps", "gbps", "copy_gbps", "ratio",
                                                "output_ok", "output_message", "ms_median")},
            "target_ratio": target, "at_target": at_target, "kernels": kernels, "findings": findings,
            "worst": max((f["severity"] for f in findings), key=rule_table.SEVERITIES.index, default=None),
            "not_measured": missing, "rules": table.path}
