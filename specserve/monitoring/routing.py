"""Where notifications go, shared by the Alertmanager example and Grafana's notification policy
example: one receiver per severity, each a webhook on 127.0.0.1, and the grouping timings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specserve.monitoring.rules import SERVICE_LABEL, Severity

WEBHOOK_BASE = "http://127.0.0.1:9095"
GROUP_WAIT = "30s"
GROUP_INTERVAL = "5m"
REPEAT_INTERVAL = "4h"


@dataclass(frozen=True)
class SeverityRoute:
    """Alerts of `service=specserve` with this severity go to `receiver`."""

    severity: Severity
    receiver: str
    # Shorter than REPEAT_INTERVAL for pages that must not be forgotten; None keeps the default.
    repeat_interval: str | None = None

    @property
    def webhook_url(self) -> str:
        return f"{WEBHOOK_BASE}/{self.severity}"

    @property
    def matchers(self) -> tuple[tuple[str, str], ...]:
        """(label, value) pairs the route matches with equality."""
        return (("service", SERVICE_LABEL), ("severity", self.severity))


SEVERITY_ROUTES: tuple[SeverityRoute, ...] = (
    SeverityRoute("critical", "specserve-critical", repeat_interval="1h"),
    SeverityRoute("warning", "specserve-warning"),
)
# The root of Grafana's policy tree: what matches no severity route is handled as a warning.
WARNING_RECEIVER = next(r.receiver for r in SEVERITY_ROUTES if r.severity == "warning")


def policy_tree(
    default_receiver: str,
    group_by: list[str],
    matchers_key: str,
    matcher: Callable[[str, str], object],
) -> dict[str, Any]:
    """The routing tree both Alertmanager and Grafana read: the default receiver and timings at
    the root, one child per severity route. They differ only in the matchers' key and syntax."""
    routes: list[dict[str, Any]] = []
    for route in SEVERITY_ROUTES:
        child: dict[str, Any] = {
            "receiver": route.receiver,
            matchers_key: [matcher(label, value) for label, value in route.matchers],
        }
        if route.repeat_interval is not None:
            child["repeat_interval"] = route.repeat_interval
        routes.append(child)
    return {
        "receiver": default_receiver,
        "group_by": group_by,
        "group_wait": GROUP_WAIT,
        "group_interval": GROUP_INTERVAL,
        "repeat_interval": REPEAT_INTERVAL,
        "routes": routes,
    }
