"""The few Prometheus HTTP API calls the end-to-end test makes (/api/v1/...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests


class PrometheusError(AssertionError):
    """Prometheus answered with an error: the message carries its errorType and error."""


@dataclass(frozen=True)
class Prometheus:
    url: str

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        response = requests.get(self.url + path, params=params, timeout=10)
        body = response.json()
        if body.get("status") != "success":
            raise PrometheusError(
                f"{path} {params}: {body.get('errorType')}: {body.get('error')}"
            )
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant vector (or scalar, as a one-element list) for `expr` at now."""
        data = self._get("/api/v1/query", {"query": expr})
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def value(self, expr: str) -> float | None:
        """The single value of `expr`, None when it returns nothing."""
        result = self.query(expr)
        if not result:
            return None
        if len(result) > 1:
            raise AssertionError(f"{expr} returned {len(result)} series, expected one: {result}")
        return float(result[0]["value"][1])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        data = self._get(
            "/api/v1/query_range",
            {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
        )
        return list(data["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts (pending and firing) as Prometheus' rule manager holds them."""
        return list(self._get("/api/v1/alerts")["alerts"])

    def alert_states(self) -> dict[str, str]:
        """alertname -> 'firing' or 'pending' (firing wins when several series exist)."""
        states: dict[str, str] = {}
        for alert in self.alerts():
            name = alert["labels"]["alertname"]
            if states.get(name) != "firing":
                states[name] = alert["state"]
        return states

    def targets_up(self) -> dict[str, str]:
        return {
            target["labels"]["job"]: target["health"]
            for target in self._get("/api/v1/targets")["activeTargets"]
        }

    def rule_groups(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/rules")["groups"])
