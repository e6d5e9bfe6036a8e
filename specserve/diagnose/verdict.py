"""Rank what holds into causes with their evidence, and say what each explains.

Blindness first (nothing else can be trusted while the log is not read), then causes (each with
the symptoms it explains folded under it), then symptoms no measured cause explains, each with
what to look at next. Profile findings from `specserve check` (a graph cap left uncovered, an
unlike baseline) are causes too: they hold whatever the load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from specserve.diagnose.causes import MEANINGS, Role
from specserve.diagnose.evidence import Evidence, Seen
from specserve.profile.issues import Issue


@dataclass(frozen=True)
class Finding:
    role: Role
    title: str  # the alert's name, or "profile: <field>"
    cause: str
    fix: str
    evidence: tuple[str, ...]
    explained: tuple[str, ...] = ()
    rank: int = 50


@dataclass(frozen=True)
class Verdict:
    findings: tuple[Finding, ...]
    context: tuple[str, ...] = field(default_factory=tuple)

    @property
    def found(self) -> bool:
        return bool(self.findings)

    def render(self) -> str:
        lines = [*(f"context: {line}" for line in self.context)]
        if not self.findings:
            lines.append("no cause found: no alert condition holds now")
            return "\n".join(lines) + "\n"
        for number, item in enumerate(self.findings, 1):
            lines.append(f"{number}. [{item.role.name.lower()}] {item.title}: {item.cause}")
            lines.extend(f"   evidence: {line}" for line in item.evidence)
            if item.explained:
                lines.append(f"   explains: {', '.join(item.explained)}")
            lines.append(f"   fix: {item.fix}")
        return "\n".join(lines) + "\n"


def _evidence(seen: Sequence[Seen], state: str | None) -> tuple[str, ...]:
    status = f" (alert {state})" if state else " (condition holds; alert not yet firing)"
    return tuple(f"{item.where()}: value {item.value:.4g}{status}" for item in seen)


def _alert_finding(evidence: Evidence, name: str, explained: tuple[str, ...] = ()) -> Finding:
    meaning = MEANINGS[name]
    seen = [item for item in evidence.seen if item.alert == name]
    return Finding(meaning.role, name, meaning.cause, meaning.fix,
                   _evidence(seen, evidence.states.get(name)), explained, meaning.rank)


def _static_finding(issue: Issue) -> tuple[str, str]:
    """(title, source) of a finding from `check` or from a bench result (field `bench: ...`)."""
    if issue.field.startswith("bench:"):
        return issue.field, "a bench result"
    return f"profile: {issue.field}", "specserve check"


def judge(evidence: Evidence, profile_issues: Sequence[Issue] = ()) -> Verdict:
    holding = evidence.holding()
    ranked = sorted(holding, key=lambda n: (MEANINGS[n].role, MEANINGS[n].rank))
    # A holding cause folds what it explains: symptoms, and a broader cause's reading of the
    # same fact (decode passes off the graphs read as "graphs off" while the misses at high
    # batch say which). The table has no cycle (tests/diagnose/test_causes.py).
    explained = {name for cause in holding if MEANINGS[cause].role is Role.CAUSE
                 for name in MEANINGS[cause].explains if name in holding}  # fmt: skip
    findings = [
        _alert_finding(evidence, name, tuple(sorted(set(MEANINGS[name].explains) & holding)))
        if MEANINGS[name].role is Role.CAUSE else _alert_finding(evidence, name)
        for name in ranked if name not in explained
    ]
    # What `check` (or a bench result) finds holds whatever the load: a cause when something
    # is slow, a latent risk (context, exit 0) while every measured condition is healthy.
    latent: list[str] = []
    for issue in profile_issues:
        title, source = _static_finding(issue)
        if not holding:
            latent.append(f"{'' if source == 'a bench result' else 'profile, '}latent "
                          f"({issue.severity.value}): {issue.field}: {issue.problem}. "
                          f"Fix: {issue.fix}")
        else:
            findings.append(Finding(Role.CAUSE, title, issue.problem, issue.fix,
                                    (f"{source} ({issue.severity.value})",), rank=60))
    findings.sort(key=lambda f: (f.role, f.rank))
    context = tuple(
        f"{instance}: adaptive speculation {'on' if on else 'off'}"
        + (f", draft tokens now {tokens:g}" if tokens is not None else "")
        for instance, (on, tokens) in sorted(evidence.adaptive.items())
    ) + tuple(latent)
    return Verdict(tuple(findings), context)
