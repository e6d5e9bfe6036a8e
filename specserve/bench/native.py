"""SGLang's own latency histograms during a benchmark level: its /metrics before and after.

With --enable-metrics SGLang serves `sglang:time_to_first_token_seconds` and
`sglang:inter_token_latency_seconds` (per token: each output's interval divided by its new
tokens, so a verify pass that brings 3 tokens counts 3 short intervals). These are the histograms
the SLO alerts read (SpecServeTimeToFirstTokenHigh / SpecServeInterTokenLatencyHigh). A level's
p99 is Prometheus' histogram_quantile on the level's bucket increments summed over every label
set, so the bench reports what the alert would see for that load. The client-side ITL in the
report is the gap between streamed chunks instead (one chunk per verify pass).
"""

from __future__ import annotations

import math
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specserve.monitoring.metrics import SGLANG_INTER_TOKEN_LATENCY, SGLANG_TIME_TO_FIRST_TOKEN

QUANTILE = 0.99
# Histogram family -> upper bound -> cumulative count, summed over label sets.
Histograms = dict[str, dict[float, float]]
FAMILIES = {"ttft": SGLANG_TIME_TO_FIRST_TOKEN, "itl": SGLANG_INTER_TOKEN_LATENCY}


def parse_histograms(text: str) -> Histograms:
    found: Histograms = {}
    for family in text_string_to_metric_families(text):
        if family.name not in FAMILIES.values():
            continue
        buckets = found.setdefault(family.name, {})
        for sample in family.samples:
            if sample.name == family.name + "_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return found


def bucket_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus' histogram_quantile on cumulative `buckets`; None without observations."""
    bounds = sorted(buckets)
    if not bounds or bounds[-1] != math.inf:
        return None
    counts = [buckets[b] for b in bounds]
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    index = next(i for i, count in enumerate(counts) if count >= rank)
    if index == len(bounds) - 1:
        # Above the last finite bound: Prometheus answers that bound.
        return bounds[-2] if len(bounds) > 1 else None
    start = 0.0 if index == 0 else bounds[index - 1]
    below = 0.0 if index == 0 else counts[index - 1]
    in_bucket = counts[index] - below
    if index == 0 and bounds[0] <= 0:
        return bounds[0]
    return start + (bounds[index] - start) * ((rank - below) / in_bucket)


def level_latency(before: Histograms, after: Histograms) -> dict[str, Any] | None:
    """p99 TTFT and ITL (seconds) of what SGLang observed between two scrapes, and how many
    observations each rests on; None when the server serves neither histogram."""
    if not any(FAMILIES[key] in after for key in FAMILIES):
        return None
    out: dict[str, Any] = {}
    for key, family in FAMILIES.items():
        old, new = before.get(family, {}), after.get(family, {})
        delta = {bound: new[bound] - old.get(bound, 0.0) for bound in new}
        out[f"{key}_p99_s"] = bucket_quantile(QUANTILE, delta)
        out[f"{key}_observations"] = int(delta.get(math.inf, 0.0))
    return out


class NativeScraper:
    """Scrapes SGLang's /metrics (exempt from the API key); None where metrics are off."""

    def __init__(self, base_url: str) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self._client = httpx.Client(timeout=httpx.Timeout(10.0))

    def close(self) -> None:
        self._client.close()

    def scrape(self) -> Histograms | None:
        try:
            response = self._client.get(self.url)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None  # started without --enable-metrics: SGLang serves no /metrics
        try:
            return parse_histograms(response.text)
        except ValueError:
            return None
