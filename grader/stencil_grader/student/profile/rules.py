"""The rule table (grader/profile_rules.json): its validation, and the findings it gives; a rule's
"mode" says which figures it reads, "counters" (counters.py) or "code" (nocounters.py: the compiled code and the
audited launches)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path

from ... import KIT_ROOT
from ...base.files import display_path, read_json
from .common import show_figures

#: The rule table: the one place where thresholds, messages and handout sections live.
RULES_PATH = KIT_ROOT / "grader" / "profile_rules.json"
SEVERITIES = ("info", "warning", "critical")
#: What a rule's figures come from (a profile's "mode").
MODES = ("counters", "code")
#: Former names of a mode, still accepted in rule tables and profile inputs: "ptx" was mode "code".
MODE_ALIASES = {"ptx": "code"}


class RulesError(ValueError):
    """profile_rules.json breaks its schema; the message names the rule and the key."""


@dataclass(frozen=True)
class Rule:
    """One row of profile_rules.json (see its "_about")."""

    id: str
    severity: str
    when: tuple[tuple[str, str, float], ...]
    message: str
    handout: str
    section: str
    source: str
    labs: tuple[str, ...] | None = None
    mode: str = "counters"


@dataclass(frozen=True)
class RuleTable:
    rules: tuple[Rule, ...]
    settings: dict
    stall_reasons: dict
    path: str = ""


_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq}


def parse_rules(data, path: str = "profile_rules.json") -> RuleTable:
    """Validate the table; raises RulesError naming the rule and the key that is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise RulesError(f"{path}: must be an object with a list \"rules\"")
    rules, seen = [], set()
    for i, r in enumerate(data["rules"]):
        where = f"{path}: rules[{i}]" + (f" ({r.get('id')})" if isinstance(r, dict) and r.get("id") else "")
        if not isinstance(r, dict):
            raise RulesError(f"{where}: must be an object")
        for key in ("id", "severity", "message", "handout", "section", "source"):
            if not isinstance(r.get(key), str) or not r[key].strip():
                raise RulesError(f"{where}: \"{key}\" must be a non-empty string, got {r.get(key)!r}")
        if r["id"] in seen:
            raise RulesError(f"{where}: the id {r['id']!r} is used twice")
        seen.add(r["id"])
        if r["severity"] not in SEVERITIES:
            raise RulesError(f"{where}: \"severity\" must be one of {', '.join(SEVERITIES)}, got {r['severity']!r}")
        when = r.get("when")
        if not isinstance(when, list) or not when:
            raise RulesError(f"{where}: \"when\" must be a non-empty list of [figure, operator, number]")
        conditions = []
        for c in when:
            if not (isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and c[1] in _OPS
                    and isinstance(c[2], (int, float)) and not isinstance(c[2], bool)):
                raise RulesError(f"{where}: a condition must be [figure, one of {' '.join(_OPS)}, number], got {c!r}")
            conditions.append((c[0], c[1], float(c[2])))
        labs, mode = r.get("labs"), MODE_ALIASES.get(r.get("mode"), r.get("mode", "counters"))
        if labs is not None and not (isinstance(labs, list) and all(isinstance(x, str) for x in labs)):
            raise RulesError(f"{where}: \"labs\" must be a list of lab names or absent")
        if mode not in MODES:
            raise RulesError(f"{where}: \"mode\" must be one of {', '.join(MODES)}, got {mode!r}")
        rules.append(Rule(r["id"], r["severity"], tuple(conditions), r["message"], r["handout"], r["section"],
                          r["source"], tuple(labs) if labs is not None else None, mode))
    settings, stalls = data.get("settings", {}), data.get("stall_reasons", {})
    if not isinstance(settings, dict) or not isinstance(stalls, dict):
        raise RulesError(f"{path}: \"settings\" and \"stall_reasons\" must be objects")
    return RuleTable(tuple(rules), settings, stalls, path)


def load_rules(path: Path = RULES_PATH) -> RuleTable:
    """Read and validate the rule table (RulesError when it is broken)."""
    return parse_rules(read_json(path, RulesError), display_path(Path(path)))


def evaluate(table: RuleTable, kernels: list[dict], lab: str, at_target: bool, mode: str = "counters") -> list[dict]:
    """The findings of every rule of `mode` on every kernel (all conditions hold; an unmeasured figure
    holds none), ranked by severity, table order, time share; lowered to "info" on a kernel under
    settings.min_time_share, and all of them at the lab's target (settings.demote_at_target)."""
    min_share = float(table.settings.get("min_time_share", 0.0))
    demote = bool(table.settings.get("demote_at_target", False)) and at_target
    findings = []
    for order, rule in enumerate(table.rules):
        if rule.mode != mode or rule.labs is not None and lab not in rule.labs:
            continue
        for k in kernels:
            f = k["figures"]
            if not all(f.get(name) is not None and not isinstance(f.get(name), str)
                       and _OPS[op](f[name], limit) for name, op, limit in rule.when):
                continue
            values = dict(f, kernel=k["label"])
            if f.get("top_stall"):
                values["stall_meaning"] = table.stall_reasons.get(f["top_stall"], "")
            minor = f.get("time_share") is not None and f["time_share"] < min_share
            severity, note = rule.severity, ""
            if severity != "info" and (minor or demote):
                severity, note = "info", (" (a small part of the profiled time)" if minor else " (your launcher "
                                          "already reaches the lab's target: worth knowing, not urgent)")
            findings.append({"rule": rule.id, "severity": severity, "table_severity": rule.severity,
                             "kernel": k["label"], "message": show_figures(rule.message, values) + note,
                             "handout": rule.handout, "section": rule.section, "source": rule.source,
                             "order": order, "time_share": f.get("time_share") or 0.0})
    findings.sort(key=lambda x: (-SEVERITIES.index(x["severity"]), x["order"], -x["time_share"]))
    return findings
