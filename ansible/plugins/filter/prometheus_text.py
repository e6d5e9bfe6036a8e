"""Read the exporter's /metrics text into plain samples for the verification gate.

Uses prometheus_client's own parser (the exporter is built on the same library).
"""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families


def prometheus_samples(text: str, name: str | None = None) -> list[dict[str, Any]]:
    """Every sample as {name, labels, value}; only those called `name` when given."""
    samples: list[dict[str, Any]] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if name is None or sample.name == name:
                samples.append(
                    {"name": sample.name, "labels": dict(sample.labels), "value": sample.value}
                )
    return samples


def prometheus_sum(text: str, name: str, **labels: str) -> float:
    """The sum of `name` over every series whose labels include `labels` (0 when none)."""
    return sum(
        s["value"]
        for s in prometheus_samples(text, name)
        if all(s["labels"].get(k) == v for k, v in labels.items())
    )


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"prometheus_samples": prometheus_samples, "prometheus_sum": prometheus_sum}
