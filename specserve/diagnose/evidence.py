"""Read what the bundle already measures, now: every alert's condition as Prometheus evaluates it.

Each enabled alert's expression (the same text the rule files carry, at the deployment's own
windows and thresholds: `specserve rules render --overrides` and this read one overrides file)
is sent to Prometheus as an instant query. A series it returns is a condition that holds right
now, whether or not the alert has waited out its `for` yet: diagnose answers "why is it slow
now", not "what has paged". Plus the adaptive state the exporter reports, as context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import requests

from specserve.monitoring.expansion import AlertSettings, alert_expr
from specserve.monitoring.rules import ALERTS
from specserve.profile.classlabel import RULES_CLASS_LABEL

QUERY_TIMEOUT_S = 15
# The exporter's gauges of the adaptive state (specserve_exporter.names).
ADAPTIVE = "specserve_speculative_adaptive"
DRAFT_TOKENS = "specserve_speculative_draft_tokens"


class EvidenceError(RuntimeError):
    """Prometheus could not be read: the message names the URL, what failed and the fix."""


@dataclass(frozen=True)
class Seen:
    """One series for which an alert's condition holds now."""

    alert: str
    labels: Mapping[str, str]
    value: float

    def where(self) -> str:
        # The labels that say where: the server, the bucket, the worker, the GPU, the request
        # class (SpecDecodeClassAcceptLengthLow's).
        keep = ("instance", "pod", "concurrency", "worker", "gpu", RULES_CLASS_LABEL)
        return ", ".join(f"{k}={self.labels[k]}" for k in keep if k in self.labels) or "-"


@dataclass(frozen=True)
class Evidence:
    seen: tuple[Seen, ...]
    # alert name -> "firing"/"pending" as Prometheus' rule manager holds it now.
    states: Mapping[str, str] = field(default_factory=dict)
    # instance -> (adaptive on, draft tokens now), from the exporter's gauges.
    adaptive: Mapping[str, tuple[bool, float | None]] = field(default_factory=dict)

    def holding(self) -> set[str]:
        return {item.alert for item in self.seen}


class PrometheusReader:
    def __init__(self, url: str, session: requests.Session | None = None) -> None:
        self.url = url.rstrip("/")
        self.session = session or requests.Session()

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        where = f"{self.url}{path}"
        try:
            response = self.session.get(where, params=params, timeout=QUERY_TIMEOUT_S)
        except requests.RequestException as err:
            raise EvidenceError(
                f"cannot reach Prometheus at {self.url} ({err.__class__.__name__}: {err}); pass "
                "--prometheus with the URL the monitoring stack serves (the Ansible inventory's "
                "monitoring_prometheus_port, or `kubectl port-forward` to the chart's Prometheus)"
            ) from err
        try:
            body = response.json()
        except ValueError as err:
            raise EvidenceError(
                f"{where} answered HTTP {response.status_code} with no JSON: is {self.url} "
                "Prometheus?") from err
        if body.get("status") != "success":
            raise EvidenceError(
                f"{where} refused {params}: {body.get('errorType')}: {body.get('error')} (were "
                "the rules rendered from the same overrides file? pass it with --overrides)")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self._get("/api/v1/query", {"query": expr})
        return list(data["result"]) if data["resultType"] == "vector" else []

    def alert_states(self) -> dict[str, str]:
        states: dict[str, str] = {}
        for alert in self._get("/api/v1/alerts")["alerts"]:
            name = alert["labels"]["alertname"]
            if states.get(name) != "firing":
                states[name] = alert["state"]
        return states


def gather(reader: PrometheusReader, settings: Mapping[str, AlertSettings]) -> Evidence:
    seen: list[Seen] = []
    for alert in ALERTS:
        effective = settings[alert.name]
        if not effective.enabled:
            continue
        for series in reader.query(alert_expr(alert, effective.threshold_text)):
            seen.append(Seen(alert.name, dict(series["metric"]), float(series["value"][1])))
    adaptive: dict[str, tuple[bool, float | None]] = {}
    draft_tokens = {s["metric"].get("instance", "-"): float(s["value"][1])
                    for s in reader.query(DRAFT_TOKENS)}  # fmt: skip
    for series in reader.query(ADAPTIVE):
        instance = series["metric"].get("instance", "-")
        adaptive[instance] = (float(series["value"][1]) == 1, draft_tokens.get(instance))
    return Evidence(tuple(seen), reader.alert_states(), adaptive)
