"""Example Alertmanager configuration: webhooks on 127.0.0.1, routed by severity.

Inhibitions encode what one alert already explains: drafts rejected implies a low accept length
and a throughput below baseline; a broken log source explains missing decode lines; an SLO that
pages (SpecServeErrorBudgetBurn) needs no ticket (SpecServeErrorBudgetBurnSlow) for the same
objective and scope: equal on `slo`, the fleet's `job` (and `namespace` on Kubernetes) and the
replica labels, which the fleet's series lack, so a page for one replica silences neither the
fleet's ticket nor another objective's (docs/slo.md; Grafana's query does the same, having no
inhibitions: slo.SILENCED_BY).
"""

from __future__ import annotations

from typing import Any

from specserve.monitoring.routing import SEVERITY_ROUTES, WEBHOOK_BASE, policy_tree
from specserve.monitoring.slo import REPLICA_LABELS

SLO_PAGE = "SpecServeErrorBudgetBurn"
SLO_TICKET = "SpecServeErrorBudgetBurnSlow"
# What tells one burn-rate alert's objective and scope from another's: the objective, the fleet
# (its job; its namespace on Kubernetes) and, per replica, the replica labels. A label missing
# on both sides is equal: a fleet's page matches its fleet's ticket, never a replica's.
SLO_EQUAL = ["slo", "job", "namespace", *(name.strip() for name in REPLICA_LABELS.split(","))]

DEFAULT_RECEIVER = "specserve-default"


def _webhook(name: str, url: str) -> dict[str, Any]:
    return {"name": name, "webhook_configs": [{"url": url, "send_resolved": True}]}


def _inhibit(source: str, targets: str, equal: list[str] | None = None) -> dict[str, Any]:
    return {
        "source_matchers": [f'alertname="{source}"'],
        "target_matchers": [f'alertname=~"{targets}"'],
        "equal": equal or ["job", "instance"],
    }


def alertmanager_config() -> dict[str, Any]:
    return {
        "route": policy_tree(
            DEFAULT_RECEIVER,
            ["alertname", "job", "instance"],
            "matchers",
            lambda label, value: f'{label}="{value}"',
        ),
        "inhibit_rules": [
            _inhibit(
                "SpecDecodeDraftsRejected", "SpecDecodeAcceptLengthLow|SpecDecodeBelowBaseline"
            ),
            _inhibit("SpecServeLogSourceDown", "SpecServeNoDecodeLines"),
            _inhibit(SLO_PAGE, SLO_TICKET, SLO_EQUAL),
        ],
        "receivers": [
            _webhook(DEFAULT_RECEIVER, f"{WEBHOOK_BASE}/default"),
            *(_webhook(route.receiver, route.webhook_url) for route in SEVERITY_ROUTES),
        ],
    }
