"""Example Alertmanager configuration: webhooks on 127.0.0.1, routed by severity.

Inhibitions encode what one alert already explains: drafts rejected implies a low accept length
and a throughput below baseline; a broken log source explains missing decode lines.
"""

from __future__ import annotations

from typing import Any

from specserve.monitoring.routing import SEVERITY_ROUTES, WEBHOOK_BASE, policy_tree

DEFAULT_RECEIVER = "specserve-default"


def _webhook(name: str, url: str) -> dict[str, Any]:
    return {"name": name, "webhook_configs": [{"url": url, "send_resolved": True}]}


def _inhibit(source: str, targets: str) -> dict[str, Any]:
    return {
        "source_matchers": [f'alertname="{source}"'],
        "target_matchers": [f'alertname=~"{targets}"'],
        "equal": ["job", "instance"],
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
        ],
        "receivers": [
            _webhook(DEFAULT_RECEIVER, f"{WEBHOOK_BASE}/default"),
            *(_webhook(route.receiver, route.webhook_url) for route in SEVERITY_ROUTES),
        ],
    }
