"""Example Alertmanager configuration: webhooks on 127.0.0.1, routed by severity.

Inhibitions encode what one alert already explains: drafts rejected implies a low accept length
and a throughput below baseline; a broken log source explains missing decode lines.
"""

from __future__ import annotations

from typing import Any

from specserve.monitoring.grafana_alerting import CRITICAL_RECEIVER, WARNING_RECEIVER, WEBHOOK_BASE
from specserve.monitoring.rules import SERVICE_LABEL

DEFAULT_RECEIVER = "specserve-default"


def _webhook(name: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "webhook_configs": [{"url": f"{WEBHOOK_BASE}/{path}", "send_resolved": True}],
    }


def _inhibit(source: str, targets: str) -> dict[str, Any]:
    return {
        "source_matchers": [f'alertname="{source}"'],
        "target_matchers": [f'alertname=~"{targets}"'],
        "equal": ["job", "instance"],
    }


def alertmanager_config() -> dict[str, Any]:
    return {
        "route": {
            "receiver": DEFAULT_RECEIVER,
            "group_by": ["alertname", "job", "instance"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {
                    "receiver": CRITICAL_RECEIVER,
                    "matchers": [f'service="{SERVICE_LABEL}"', 'severity="critical"'],
                    "repeat_interval": "1h",
                },
                {
                    "receiver": WARNING_RECEIVER,
                    "matchers": [f'service="{SERVICE_LABEL}"', 'severity="warning"'],
                },
            ],
        },
        "inhibit_rules": [
            _inhibit(
                "SpecDecodeDraftsRejected", "SpecDecodeAcceptLengthLow|SpecDecodeBelowBaseline"
            ),
            _inhibit("SpecServeLogSourceDown", "SpecServeNoDecodeLines"),
        ],
        "receivers": [
            _webhook(DEFAULT_RECEIVER, "default"),
            _webhook(CRITICAL_RECEIVER, "critical"),
            _webhook(WARNING_RECEIVER, "warning"),
        ],
    }
