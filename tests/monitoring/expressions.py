"""Every PromQL query the dashboard and the Grafana alerts run, ready for a real Prometheus.

Grafana fills `$__rate_interval`, `$__range` and dashboard variables before it queries; this
module does the same with fixed values so a test can send each expression to Prometheus'
HTTP API as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specserve.monitoring.dashboard import (
    EXPORTER_JOB_VARIABLE,
    ROUTER_JOB_VARIABLE,
    build_dashboard,
    iter_panels,
)
from specserve.monitoring.grafana_alerting import grafana_alert_rules
from specserve.monitoring.overrides import resolve_settings

GRAFANA_VARIABLES: dict[str, str] = {
    "$__rate_interval": "1m",
    "$__range": "1h",
    "$" + EXPORTER_JOB_VARIABLE: "specserve-exporter",
    "$" + ROUTER_JOB_VARIABLE: "specserve-router",
}


def executable(expr: str) -> str:
    """`expr` with Grafana's variables replaced (longest name first, so `$__range` stays whole)."""
    for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, GRAFANA_VARIABLES[name])
    return expr


def all_promql_expressions(overrides: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """(where, expr) for every dashboard target and every Grafana alert query, executable,
    as rendered with `overrides` (the committed defaults when None)."""
    found: list[tuple[str, str]] = []
    for panel in iter_panels(build_dashboard(resolve_settings(overrides or {}))):
        for target in panel.get("targets", []):
            where = f"dashboard panel {panel['id']} {panel['title']!r} target {target['refId']}"
            found.append((where, executable(target["expr"])))
    for group in grafana_alert_rules(overrides)["groups"]:
        for rule in group["rules"]:
            for query in rule["data"]:
                if "expr" in query["model"]:
                    where = f"grafana alert {rule['title']} query {query['refId']}"
                    found.append((where, executable(query["model"]["expr"])))
    return found
