"""One finding of a check: which field, what is wrong, how to fix it.

Every check returns a list of these instead of raising, so `specserve check` can report all the
problems of a profile at once, and errors stay separate from warnings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Issue:
    severity: Severity
    field: str
    problem: str
    fix: str

    def render(self) -> str:
        return f"{self.severity.value}: {self.field}: {self.problem}. Fix: {self.fix}"

    def as_dict(self) -> dict[str, str]:
        data = asdict(self)
        data["severity"] = self.severity.value
        return data


def error(field: str, problem: str, fix: str) -> Issue:
    return Issue(Severity.ERROR, field, problem, fix)


def warning(field: str, problem: str, fix: str) -> Issue:
    return Issue(Severity.WARNING, field, problem, fix)


def errors(issues: list[Issue]) -> list[Issue]:
    return [i for i in issues if i.severity is Severity.ERROR]


def warnings(issues: list[Issue]) -> list[Issue]:
    return [i for i in issues if i.severity is Severity.WARNING]
