"""Grafana-managed alert rules equivalent to the Prometheus alerts, plus contact-point and
notification-policy examples, in Grafana's alerting file-provisioning format (apiVersion 1).

Each rule is: A = the alert's value query (recording rules inlined, so it works without the
Prometheus rule file), B = reduce(A, last), C = threshold(B) with the same comparison and limit
as the Prometheus rule; condition C. The Prometheus datasource is referenced as
`${SPECSERVE_PROMETHEUS_DATASOURCE_UID}`, which Grafana's provisioning expands from its
environment (the datasource provisioning file uses the same variable).

The SLO burn-rate alerts inline their records too (slo.inline_burn_expr): each enabled
objective's error ratio at the pairs' windows (up to 3d: any instant query may read them) over
`1 - target`, from the same overrides file's `slos:` as the rule file, each objective's series
labelled `slo` as the records are. Grafana's own Alertmanager has no inhibition rules, so the
ticket's query (SpecServeErrorBudgetBurnSlow) leaves out the series where the page's condition
holds for the same objective and scope, as the Alertmanager example's inhibit rule does
(docs/slo.md).

A rule is built from its settings' text (grafana_rule's `threshold` callback, `for_`, the runbook
base URL and `number`, which turns the compared threshold's text into the YAML value): numbers
for this file, Helm actions on the chart's values for the chart's ConfigMap
(specserve.monitoring.grafana_helm), so both give the same rules for the same settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from specserve.monitoring.expansion import alert_annotations, alert_value_expr, compare_text
from specserve.monitoring.overrides import resolve_settings, resolve_slos
from specserve.monitoring.routing import SEVERITY_ROUTES, WARNING_RECEIVER, policy_tree
from specserve.monitoring.rules import ALERTS, DEFAULT_RUNBOOK_BASE_URL, Alert
from specserve.monitoring.slo import OBJECTIVES, inline_burn_expr

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
    alert: Alert,
    threshold: Callable[[str], str],
    for_: str,
    runbook_base_url: str,
    expr: str | None = None,
    number: Callable[[str], Any] = float,
) -> dict[str, Any]:
    """The rule of `alert`: `threshold(name)` is a threshold's (or the window's) text, `for_` and
    `runbook_base_url` the settings' text, `number(text)` the compared threshold's value in the
    file; `expr` replaces its inlined value query (the SLO burn rates)."""
    limit = number(compare_text(alert, threshold))
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
                    "expr": expr or alert_value_expr(alert, threshold, inline=True),
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
    slos: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The provisioning file with the alert `overrides` and the SLO settings `slos` (an
    overrides file's `alerts:` and `slos:`, as render_rules takes them)."""
    settings = resolve_settings(overrides or {})
    objectives = resolve_slos(slos)
    enabled = [(objective, objectives[objective.name].text) for objective in OBJECTIVES
               if objectives[objective.name].enabled]  # fmt: skip
    rules: list[dict[str, Any]] = []
    for alert in ALERTS:
        effective = settings[alert.name]
        if not effective.enabled:
            continue
        expr = None
        if alert.needs_slo_records:
            if not enabled:
                continue  # every objective off: the rule file's alert has no record to read
            expr = inline_burn_expr(alert.severity, enabled)
        rules.append(grafana_rule(alert, effective.threshold_text, effective.for_,
                                  runbook_base_url, expr))  # fmt: skip
    return alert_rules_document(rules)


def alert_rules_document(rules: list[dict[str, Any]]) -> dict[str, Any]:
    """The provisioning file holding `rules` in specserve's folder and group."""
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
