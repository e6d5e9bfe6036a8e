"""SGLang's latency histograms in the bench: a quantile is the bucket that holds it, never a
number interpolated inside that bucket; per-level deltas over label sets; every output says so."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from specserve.bench.native import (
    Bucket,
    format_bucket,
    level_latency,
    parse_histograms,
    quantile_bucket,
)
from specserve.bench.report import markdown
from specserve.bench.results import ResultError, load_result, validate_result
from specserve.standin.metrics import TTFT_BUCKETS, NativeMetrics
from tests.bench.test_units import _result

# SGLang's default TTFT bounds (0.5.21 and 0.5.23; the stand-in's are upstream's,
# tests/standin/test_native_metrics_parity.py), cumulative counts of n observations all <= 0.1 s.
FIRST_BUCKET_ONLY = {**{b: 50.0 for b in TTFT_BUCKETS}, math.inf: 50.0}


def test_every_observation_in_the_first_bucket_is_a_bound_not_99_ms() -> None:
    # Prometheus' interpolation answers 0.099 here on every run, whatever the real TTFTs were.
    assert quantile_bucket(0.99, FIRST_BUCKET_ONLY) == Bucket(None, 0.1)
    assert format_bucket(Bucket(None, 0.1).as_json()) == "<= 100 ms"


def test_a_quantile_in_a_middle_bucket_is_that_buckets_bounds() -> None:
    # 10 observations in (0.6, 1]: interpolation would say 0.996; the histogram says (0.6, 1].
    buckets = {0.4: 0.0, 0.6: 0.0, 1.0: 10.0, 2.0: 10.0, math.inf: 10.0}
    assert quantile_bucket(0.99, buckets) == Bucket(0.6, 1.0)
    assert format_bucket({"gt": 0.6, "le": 1.0}) == "0.6-1 s"
    # 4 observations <= 1 and 4 in (1, 2]: the median is the 4th, in the first bucket.
    assert quantile_bucket(0.5, {1.0: 4.0, 2.0: 8.0, math.inf: 8.0}) == Bucket(None, 1.0)
    assert quantile_bucket(0.51, {1.0: 4.0, 2.0: 8.0, math.inf: 8.0}) == Bucket(1.0, 2.0)
    assert format_bucket({"gt": 0.1, "le": 0.2}) == "100-200 ms"
    assert format_bucket({"gt": 0.025, "le": 0.03}) == "25-30 ms"


def test_quantile_edges() -> None:
    assert quantile_bucket(0.99, {1.0: 0.0, math.inf: 0.0}) is None  # no observation
    assert quantile_bucket(0.99, {1.0: 5.0}) is None  # no +Inf bucket: not a histogram
    # Above the last finite bound: only a lower bound (Prometheus answers the bound itself).
    assert quantile_bucket(0.99, {1.0: 1.0, 2.0: 1.0, math.inf: 100.0}) == Bucket(2.0, None)
    assert format_bucket({"gt": 400.0, "le": None}) == "> 400 s"
    assert format_bucket(None) == "-"


def test_level_latency_is_the_delta_between_scrapes_over_every_label_set() -> None:
    metrics = NativeMetrics("demo")
    metrics.first_token(5.0, stream=True)  # before the level: must not count
    before = parse_histograms(_text(metrics))
    for seconds, stream in ((0.5, True), (0.7, False), (0.5, False)):
        metrics.first_token(seconds, stream)
    metrics.inter_token(0.09, 3)  # one output of 3 tokens: 3 intervals of 30 ms
    after = parse_histograms(_text(metrics))
    latency = level_latency(before, after)
    assert latency == {
        # Both streaming label sets are summed: the p99 of 0.5, 0.5, 0.7 is in (0.6, 0.8];
        # the 5 s before the level would put it in (4, 6].
        "ttft_p99_bucket_s": {"gt": 0.6, "le": 0.8},
        "ttft_observations": 3,
        "itl_p99_bucket_s": {"gt": 0.025, "le": 0.03},
        "itl_observations": 3,
    }


def test_no_histograms_no_latency() -> None:
    assert level_latency({}, {}) is None


def test_report_and_result_carry_the_bucket(tmp_path: Path) -> None:
    result = _result("speculative", True, {1: 140.0, 2: 240.0})
    fast = {"ttft_p99_bucket_s": {"gt": None, "le": 0.1}, "ttft_observations": 50,
            "itl_p99_bucket_s": {"gt": 0.025, "le": 0.03}, "itl_observations": 900}  # fmt: skip
    result["levels"][0]["server_latency"] = fast
    result["levels"][1]["server_latency"] = None  # no /metrics
    validate_result(result)
    assert result["schema_version"] == 2
    table = markdown(result)
    header = next(line for line in table.splitlines() if line.startswith("| concurrency"))
    assert "| client TTFT p99 ms |" in header and "| server TTFT p99 bucket |" in header
    rows = {line.split(" | ")[0]: line for line in table.splitlines() if line.startswith("| ")}
    assert "| <= 100 ms | 25-30 ms |" in rows["| 1"] and "99.0" not in rows["| 1"]
    assert "| - | - |" in rows["| 2"]
    # The old number in a schema-2 result is refused, naming the field.
    broken = copy.deepcopy(result)
    old_shape = {"ttft_p99_s": 0.099, "ttft_observations": 50, "itl_p99_s": 0.03,
                 "itl_observations": 900}  # fmt: skip
    broken["levels"][0]["server_latency"] = old_shape
    with pytest.raises(ResultError, match="levels/0/server_latency"):
        validate_result(broken)


def test_a_schema_1_result_still_loads_and_its_number_says_interpolated(tmp_path: Path) -> None:
    result = _result("speculative", True, {1: 140.0})
    result["schema_version"] = 1
    old_shape = {"ttft_p99_s": 0.099, "ttft_observations": 50, "itl_p99_s": None,
                 "itl_observations": 0}  # fmt: skip
    result["levels"][0]["server_latency"] = old_shape
    path = tmp_path / "old.json"
    path.write_text(json.dumps(result))
    row = next(line for line in markdown(load_result(path)).splitlines() if line.startswith("| 1"))
    assert "| ~99.0 ms (interpolated) | - |" in row
    new_shape = {"ttft_p99_bucket_s": None, "ttft_observations": 0, "itl_p99_bucket_s": None,
                 "itl_observations": 0}  # fmt: skip
    result["levels"][0]["server_latency"] = new_shape
    path.write_text(json.dumps(result))
    with pytest.raises(ResultError, match="levels/0/server_latency"):
        load_result(path)  # schema 1 with schema 2's fields: one or the other


def _text(metrics: NativeMetrics) -> str:
    return generate_latest(metrics.registry).decode()
