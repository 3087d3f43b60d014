"""The result of the static stage: one StaticCheck per check (source.py, symbols.py, sass.py),
gathered by static.py.  What a failure costs is decided in score.py."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_REPORTED = 20


@dataclass
class StaticCheck:
    """One static check.  status: "pass", "fail", "skipped" or "warn" (a note); severity: what a failure
    costs, "forbidden" (lab gets 0, not run), "constraint" (performance gets 0), "signal" or "note"
    (nothing); details: one line per finding ("line 12: cudaMemcpy: memory copy: ...")."""

    name: str
    status: str
    severity: str
    message: str
    details: list[str] = field(default_factory=list)


@dataclass
class StaticResult:
    checks: list[StaticCheck] = field(default_factory=list)

    def failed(self, severity: str) -> list[StaticCheck]:
        return [c for c in self.checks if c.status == "fail" and c.severity == severity]

    @property
    def forbidden(self) -> bool:
        return bool(self.failed("forbidden"))

    @property
    def constraint_failed(self) -> bool:
        return bool(self.failed("constraint"))
