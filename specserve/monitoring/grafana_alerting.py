"""Grafana-managed alert rules equivalent to the Prometheus alerts, plus contact-point and
notification-policy examples, in Grafana's alerting file-provisioning format (apiVersion 1).

Each rule is: A = the alert's value query (recording rules inlined, so it works without the
Prometheus rule file), B = reduce(A, last), C = threshold(B) with the same comparison and limit
as the Prometheus rule; condition C. The Prometheus datasource is referenced as
`${SPECSERVE_PROMETHEUS_DATASOURCE_UID}`, which Grafana's provisioning expands from its
environment (the datasource provisioning file uses the same variable).

The SLO burn-rate alerts are not here: they read the Prometheus rule file's SLO records at six
windows up to 3 days, which Grafana cannot inline into one instant query (docs/slo.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specserve.monitoring.expansion import alert_annotations, alert_value_expr, compare_text
from specserve.monitoring.overrides import resolve_settings
from specserve.monitoring.routing import SEVERITY_ROUTES, WARNING_RECEIVER, policy_tree
from specserve.monitoring.rules import ALERTS, DEFAULT_RUNBOOK_BASE_URL, Alert

DATASOURCE_UID_ENV = "SPECSERVE_PROMETHEUS_DATASOURCE_UID"
DATASOURCE_UID_REF = "${" + DATASOURCE_UID_ENV + "}"
EXPRESSION_DATASOURCE = "__expr__"
FOLDER = "specserve"
RULE_GROUP = "specserve"
EVALUATION_INTERVAL = "1m"
QUERY_REF, REDUCE_REF, CONDITION_REF = "A", "B", "C"
_EVALUATOR = {"<": "lt", ">": "gt"}


def rule_uid(alert: Alert) -> str:
    return alert.runbook_slug


def grafana_template(text: str) -> str:
    """Prometheus annotation templates -> Grafana's: `$value` is the reduced value `B`."""
    return text.replace("$value", f"$values.{REDUCE_REF}.Value")


def _expression(ref_id: str, model: dict[str, Any]) -> dict[str, Any]:
    return {
        "refId": ref_id,
        "relativeTimeRange": {"from": 0, "to": 0},
        "datasourceUid": EXPRESSION_DATASOURCE,
        "model": {
            "refId": ref_id,
            "datasource": {"type": EXPRESSION_DATASOURCE, "uid": EXPRESSION_DATASOURCE},
            **model,
        },
    }


def grafana_rule(
    alert: Alert, threshold: Any, for_: str, runbook_base_url: str
) -> dict[str, Any]:
    limit = float(compare_text(alert, threshold))
    annotations = alert_annotations(alert, threshold, runbook_base_url)
    return {
        "uid": rule_uid(alert),
        "title": alert.name,
        "condition": CONDITION_REF,
        "data": [
            {
                "refId": QUERY_REF,
                "relativeTimeRange": {"from": 600, "to": 0},
                "datasourceUid": DATASOURCE_UID_REF,
                "model": {
                    "refId": QUERY_REF,
                    "expr": alert_value_expr(alert, threshold, inline=True),
                    "instant": True,
                    "range": False,
                    "editorMode": "code",
                    "legendFormat": "__auto",
                    "intervalMs": 60000,
                    "maxDataPoints": 43200,
                },
            },
            _expression(
                REDUCE_REF,
                {"type": "reduce", "expression": QUERY_REF, "reducer": "last",
                 "settings": {"mode": "dropNN"}},
            ),
            _expression(
                CONDITION_REF,
                {
                    "type": "threshold",
                    "expression": REDUCE_REF,
                    "conditions": [
                        {"evaluator": {"type": _EVALUATOR[alert.comparison], "params": [limit]}}
                    ],
                },
            ),
        ],
        # Value queries are empty while idle or healthy: that is "OK", never "NoData".
        "noDataState": "OK",
        "execErrState": "Error",
        "for": for_,
        "annotations": {key: grafana_template(value) for key, value in annotations.items()},
        "labels": alert.labels,
        "isPaused": False,
    }


def grafana_alert_rules(
    overrides: Mapping[str, Any] | None = None,
    runbook_base_url: str = DEFAULT_RUNBOOK_BASE_URL,
) -> dict[str, Any]:
    settings = resolve_settings(overrides or {})
    rules = [
        grafana_rule(alert, settings[alert.name].threshold_text, settings[alert.name].for_,
                     runbook_base_url)
        for alert in ALERTS
        if settings[alert.name].enabled and not alert.needs_slo_records
    ]
    return {
        "apiVersion": 1,
        "groups": [
            {
                "orgId": 1,
                "name": RULE_GROUP,
                "folder": FOLDER,
                "interval": EVALUATION_INTERVAL,
                "rules": rules,
            }
        ],
    }


def contact_points_example() -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "contactPoints": [
            {
                "orgId": 1,
                "name": route.receiver,
                "receivers": [
                    {
                        "uid": route.receiver,
                        "type": "webhook",
                        "settings": {"url": route.webhook_url, "httpMethod": "POST"},
                        "disableResolveMessage": False,
                    }
                ],
            }
            for route in SEVERITY_ROUTES
        ],
    }


def notification_policies_example() -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "policies": [
            {
                "orgId": 1,
                **policy_tree(
                    WARNING_RECEIVER,
                    ["grafana_folder", "alertname", "instance"],
                    "object_matchers",
                    lambda label, value: [label, "=", value],
                ),
            }
        ],
    }
