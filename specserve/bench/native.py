"""SGLang's own latency histograms during a benchmark level: its /metrics before and after.

With --enable-metrics SGLang serves `sglang:time_to_first_token_seconds` and
`sglang:inter_token_latency_seconds` (per token: each output's interval divided by its new
tokens, so a verify pass that brings 3 tokens counts 3 short intervals). These are the histograms
the SLO alerts read (SpecServeTimeToFirstTokenHigh / SpecServeInterTokenLatencyHigh).

A histogram knows which bucket an observation fell into, nothing finer. So a level's p99 is
reported as the bucket that holds it (the bucket increments of the level, summed over every label
set): `{"gt": lower, "le": upper}`, the p99 is above `gt` and at most `le`. Prometheus'
histogram_quantile would interpolate linearly inside that bucket, which with SGLang's TTFT buckets
(0.1, 0.2, 0.4, ... 400 s in 0.5.21 and 0.5.23) turns "every first token within 100 ms" into a
fake-precise "99.0 ms" on every run. The client-side TTFT and ITL in the report are the bench's own
timing instead (exact, per request).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specserve.monitoring.metrics import SGLANG_INTER_TOKEN_LATENCY, SGLANG_TIME_TO_FIRST_TOKEN

QUANTILE = 0.99
# Histogram family -> upper bound -> cumulative count, summed over label sets.
Histograms = dict[str, dict[float, float]]
FAMILIES = {"ttft": SGLANG_TIME_TO_FIRST_TOKEN, "itl": SGLANG_INTER_TOKEN_LATENCY}


@dataclass(frozen=True)
class Bucket:
    """Where a quantile lies: above `gt` (None: the first bucket, no lower bound) and at most
    `le` (None: the +Inf bucket, no upper bound)."""

    gt: float | None
    le: float | None

    def as_json(self) -> dict[str, float | None]:
        return {"gt": self.gt, "le": self.le}


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


def quantile_bucket(q: float, buckets: dict[float, float]) -> Bucket | None:
    """The bucket of cumulative `buckets` that holds the q-quantile (the bucket Prometheus'
    histogram_quantile interpolates in); None without observations or without a +Inf bucket."""
    bounds = sorted(buckets)
    if not bounds or bounds[-1] != math.inf:
        return None
    counts = [buckets[b] for b in bounds]
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    index = next(i for i, count in enumerate(counts) if count >= rank)
    lower = None if index == 0 else bounds[index - 1]
    upper = None if bounds[index] == math.inf else bounds[index]
    return Bucket(lower, upper)


def level_latency(before: Histograms, after: Histograms) -> dict[str, Any] | None:
    """The buckets of the p99 TTFT and ITL (seconds) that SGLang observed between two scrapes,
    and how many observations each rests on; None when the server serves neither histogram."""
    if not any(FAMILIES[key] in after for key in FAMILIES):
        return None
    out: dict[str, Any] = {}
    for key, family in FAMILIES.items():
        old, new = before.get(family, {}), after.get(family, {})
        delta = {bound: new[bound] - old.get(bound, 0.0) for bound in new}
        bucket = quantile_bucket(QUANTILE, delta)
        out[f"{key}_p99_bucket_s"] = None if bucket is None else bucket.as_json()
        out[f"{key}_observations"] = int(delta.get(math.inf, 0.0))
    return out


def format_bucket(bucket: dict[str, float | None] | None) -> str:
    """A quantile's bucket as text, never a single number: "<= 100 ms" (the first bucket),
    "100-200 ms" (above 100, at most 200), "> 400 s" (above the last finite bound); seconds once
    a bound reaches 1 s; "-" without observations."""
    if bucket is None:
        return "-"
    gt, le = bucket.get("gt"), bucket.get("le")
    finite = [b for b in (gt, le) if b is not None]
    if not finite:
        return "any (no finite bucket)"
    scale, unit = (1.0, "s") if max(finite) >= 1.0 else (1000.0, "ms")

    def num(seconds: float) -> str:
        return f"{seconds * scale:.6g}"

    if gt is None:
        return f"<= {num(finite[0])} {unit}"
    if le is None:
        return f"> {num(gt)} {unit}"
    return f"{num(gt)}-{num(le)} {unit}"


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
