"""SGLang's latency histograms in the bench: histogram_quantile as Prometheus computes it (the
same figures the promtool scenarios of the SLO rules expect), per-level deltas over label sets."""

from __future__ import annotations

import math

import pytest

from specserve.bench.native import bucket_quantile, level_latency, parse_histograms
from specserve.standin.metrics import NativeMetrics


def test_quantile_interpolates_inside_the_bucket_like_prometheus() -> None:
    # 10 observations in (0.6, 1]: p99 = 0.6 + 0.4 * 0.99, as promtool evaluates the TTFT rule.
    buckets = {0.4: 0.0, 0.6: 0.0, 1.0: 10.0, 2.0: 10.0, math.inf: 10.0}
    assert bucket_quantile(0.99, buckets) == pytest.approx(0.6 + 0.4 * 0.99)
    assert bucket_quantile(0.5, {1.0: 4.0, 2.0: 8.0, math.inf: 8.0}) == pytest.approx(1.0)
    # The first bucket starts at 0.
    assert bucket_quantile(0.5, {0.1: 10.0, math.inf: 10.0}) == pytest.approx(0.05)


def test_quantile_edges() -> None:
    assert bucket_quantile(0.99, {1.0: 0.0, math.inf: 0.0}) is None  # no observation
    assert bucket_quantile(0.99, {1.0: 5.0}) is None  # no +Inf bucket: not a histogram
    # Above the last finite bound: that bound, as Prometheus answers.
    assert bucket_quantile(0.99, {1.0: 1.0, 2.0: 1.0, math.inf: 100.0}) == 2.0


def test_level_latency_is_the_delta_between_scrapes_over_every_label_set() -> None:
    metrics = NativeMetrics("demo")
    metrics.first_token(5.0, stream=True)  # before the level: must not count
    before = parse_histograms(_text(metrics))
    for seconds, stream in ((0.5, True), (0.7, False), (0.5, False)):
        metrics.first_token(seconds, stream)
    metrics.inter_token(0.09, 3)  # one output of 3 tokens: 3 intervals of 30 ms
    after = parse_histograms(_text(metrics))
    latency = level_latency(before, after)
    assert latency is not None
    assert latency["ttft_observations"] == 3 and latency["itl_observations"] == 3
    # Both streaming label sets are summed: all three TTFTs are in (0.4, 0.8].
    assert 0.4 < latency["ttft_p99_s"] <= 0.8
    assert 0.025 < latency["itl_p99_s"] <= 0.030


def test_no_histograms_no_latency() -> None:
    assert level_latency({}, {}) is None


def _text(metrics: NativeMetrics) -> str:
    from prometheus_client import generate_latest

    return generate_latest(metrics.registry).decode()
