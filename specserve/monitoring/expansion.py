"""Placeholders and settings -> concrete PromQL and annotation text.

The catalogue (`rules`) writes `[[name]]`, `[[window]]` and `[[rule:family]]` (its docstring says
what each means); this module replaces them. A renderer passes a `threshold` callback (a number
for Prometheus and Grafana, a Helm values action for the chart) and chooses whether recording
rule families are referred to by name (rule files) or inlined (Grafana, dashboards).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from specserve.monitoring.rules import (
    ALERTS,
    RECORDING_RULES,
    RECORDING_RULES_BY_FAMILY,
    RECORDING_WINDOW,
    WINDOW,
    Alert,
    RecordingRule,
    Threshold,
)

_PLACEHOLDER = re.compile(r"\[\[(rule:)?([A-Za-z_:][A-Za-z0-9_:]*)\]\]")


def format_number(value: float) -> str:
    """Shortest text PromQL and Go templates both print for `value` (1.0 -> '1', 1.05 -> '1.05')."""
    if not math.isfinite(value):
        raise ValueError(f"threshold must be a finite number, got {value!r}")
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def format_threshold(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return format_number(value)


def expand(
    text: str,
    *,
    threshold: Callable[[str], str],
    rule: Callable[[str], str],
) -> str:
    """Replace `[[name]]` with `threshold(name)` and `[[rule:family]]` with `rule(family)`."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1):
            return rule(match.group(2))
        return threshold(match.group(2))

    return _PLACEHOLDER.sub(replace, text)


def _family(name: str) -> RecordingRule:
    if name not in RECORDING_RULES_BY_FAMILY:
        raise KeyError(f"unknown recording rule family [[rule:{name}]]")
    return RECORDING_RULES_BY_FAMILY[name]


def families_in(text: str) -> list[str]:
    """Recording rule families `text` refers to, directly or through other families."""
    found: list[str] = []
    for match in _PLACEHOLDER.finditer(text):
        if match.group(1) and match.group(2) not in found:
            found.append(match.group(2))
            found.extend(f for f in families_in(_family(match.group(2)).expr) if f not in found)
    return found


def window_only(window: str) -> Callable[[str], str]:
    """The threshold callback of a recording rule: it knows its window and nothing else."""

    def threshold(name: str) -> str:
        if name != WINDOW:
            raise KeyError(f"recording rules take no thresholds, found [[{name}]]")
        return window

    return threshold


def rule_names(window: str) -> Callable[[str], str]:
    """Recording rule families as Prometheus rule files refer to them: by name, at `window`."""
    return lambda name: _family(name).record(window)


def inline_rules(window: str) -> Callable[[str], str]:
    """Recording rule families as their expressions at `window`, parenthesised, nested inlined."""

    def inline(name: str) -> str:
        body = expand(_family(name).expr, threshold=window_only(window), rule=inline)
        indented = "\n".join(f"  {line}" for line in body.splitlines())
        return f"(\n{indented}\n)"

    return inline


def inline_rule(name: str, window: str) -> str:
    return inline_rules(window)(name)


def recording_expr(rule: RecordingRule, window: str, *, inline: bool = False) -> str:
    refer = inline_rules(window) if inline else rule_names(window)
    return expand(rule.expr, threshold=window_only(window), rule=refer)


def _check_catalogue() -> None:
    # Caught at import, so a rule edited without a window (or with a stray one) never renders.
    for alert in ALERTS:
        uses_rate = bool(families_in(alert.value_expr))
        if uses_rate != (alert.window is not None):
            raise ValueError(f"{alert.name}: window must be set exactly when it uses a rate")
        if any(item.name == WINDOW for item in alert.thresholds):
            raise ValueError(f"{alert.name}: {WINDOW!r} is reserved, not a threshold name")


_check_catalogue()


@dataclass(frozen=True)
class AlertSettings:
    """One alert's effective settings after overrides: what its placeholders expand to."""

    enabled: bool
    for_: str
    thresholds: Mapping[str, float | str]
    window: str | None = None

    def threshold_text(self, name: str) -> str:
        if name == WINDOW and self.window is not None:
            return self.window
        if name not in self.thresholds:
            raise KeyError(f"template names unknown threshold [[{name}]]")
        return format_threshold(self.thresholds[name])


def default_settings(alert: Alert) -> AlertSettings:
    return AlertSettings(
        enabled=alert.enabled_by_default,
        for_=alert.for_,
        thresholds={item.name: item.default for item in alert.thresholds},
        window=alert.window,
    )


def compare_text(alert: Alert, threshold: Callable[[str], str]) -> str:
    if isinstance(alert.compare_to, Threshold):
        return threshold(alert.compare_to.name)
    return format_number(alert.compare_to)


def _windowed(threshold: Callable[[str], str], *, inline: bool) -> Callable[[str], str]:
    # Lazy: alerts without a rate never ask for their (absent) window.
    def refer(name: str) -> str:
        window = threshold(WINDOW)
        return inline_rules(window)(name) if inline else rule_names(window)(name)

    return refer


def alert_value_expr(
    alert: Alert, threshold: Callable[[str], str], *, inline: bool = False
) -> str:
    return expand(alert.value_expr, threshold=threshold, rule=_windowed(threshold, inline=inline))


def alert_expr(alert: Alert, threshold: Callable[[str], str], *, inline: bool = False) -> str:
    """`(value query) <op> <threshold>`: the parentheses keep `and`/`or` inside the value."""
    value = alert_value_expr(alert, threshold, inline=inline)
    limit = compare_text(alert, threshold)
    if "\n" not in value and " and " not in value and " or " not in value:
        return f"{value} {alert.comparison} {limit}"
    body = "\n".join(f"  {line}" for line in value.splitlines())
    return f"(\n{body}\n)\n{alert.comparison} {limit}"


def alert_annotations(
    alert: Alert, threshold: Callable[[str], str], base_url: str
) -> dict[str, str]:
    refer = _windowed(threshold, inline=False)
    return {
        "summary": expand(alert.summary, threshold=threshold, rule=refer),
        "description": expand(alert.description, threshold=threshold, rule=refer),
        "runbook_url": alert.runbook_url(base_url),
    }


def recording_windows(settings: Mapping[str, AlertSettings]) -> dict[str, list[str]]:
    """Family -> the windows it is recorded at: RECORDING_WINDOW plus every enabled alert's
    window where that alert needs the family. Sorted as text, as Helm's `sortAlpha` sorts."""
    windows = {rule.family: {RECORDING_WINDOW} for rule in RECORDING_RULES}
    for alert in ALERTS:
        effective = settings[alert.name]
        if effective.enabled and effective.window is not None:
            for family in families_in(alert.value_expr):
                windows[family].add(effective.window)
    return {family: sorted(found) for family, found in windows.items()}
