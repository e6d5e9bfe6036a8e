"""The Prometheus rule file: recording rules at every window an alert needs, then the alerts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specserve.monitoring.expansion import (
    alert_annotations,
    alert_expr,
    recording_expr,
    recording_windows,
)
from specserve.monitoring.overrides import resolve_settings, resolve_slos
from specserve.monitoring.rules import ALERTS, DEFAULT_RUNBOOK_BASE_URL, RECORDING_RULES
from specserve.monitoring.slo import OBJECTIVES, objective_records, record_labels

RECORDING_GROUP = "specserve.recording"
ALERT_GROUP = "specserve.alerts"
SLO_GROUP = "specserve.slo"


def render_rules(
    overrides: Mapping[str, Any] | None = None,
    runbook_base_url: str = DEFAULT_RUNBOOK_BASE_URL,
    slos: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Prometheus rule file (as a dict) with `overrides` applied.

    `overrides` maps alert names to `{"enabled": bool, "for": "5m", "window": "2m",
    "thresholds": {...}}`; it is validated first and every problem is reported at once
    (OverridesError). `slos` maps objective names to `{"enabled": bool, "target": 0.99,
    "period": "28d", "threshold_seconds": 2}` (specserve.monitoring.slo), validated likewise.
    """
    settings = resolve_settings(overrides or {})
    windows = recording_windows(settings)
    records = [
        {"record": rule.record(window), "expr": recording_expr(rule, window)}
        for rule in RECORDING_RULES
        for window in windows[rule.family]
    ]
    alerts: list[dict[str, Any]] = []
    for alert in ALERTS:
        effective = settings[alert.name]
        if not effective.enabled:
            continue
        alerts.append(
            {
                "alert": alert.name,
                "expr": alert_expr(alert, effective.threshold_text),
                "for": effective.for_,
                "labels": alert.labels,
                "annotations": alert_annotations(alert, effective.threshold_text, runbook_base_url),
            }
        )
    groups: list[dict[str, Any]] = [{"name": RECORDING_GROUP, "rules": records}]
    if alerts:
        groups.append({"name": ALERT_GROUP, "rules": alerts})
    # Last: the first two groups keep their places for readers that index them.
    objectives = resolve_slos(slos)
    slo_records = [
        {"record": record, "expr": expr, "labels": record_labels(objective)}
        for objective in OBJECTIVES
        if objectives[objective.name].enabled
        for record, expr in objective_records(objective, objectives[objective.name].text)
    ]
    if slo_records:
        groups.append({"name": SLO_GROUP, "rules": slo_records})
    return {"groups": groups}
