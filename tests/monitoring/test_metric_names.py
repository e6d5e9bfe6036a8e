"""Every metric the generated monitoring queries is declared once: the specserve exporter's in
specserve_exporter.names (the table its collector serves), the others in
specserve.monitoring.metrics. A typo in a query, or a metric the exporter stopped serving, fails
here instead of giving an empty panel or an alert that can never fire."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specserve.monitoring import metrics
from specserve_exporter import names

from .conftest import MONITORING
from .expressions import all_promql_expressions

# A metric name in PromQL: followed by a selector, a range or a closing parenthesis.
_SPECSERVE = re.compile(r"\bspecserve_[a-z_]+")
_SGLANG = re.compile(r"\bsglang:[a-z0-9_]+")
_DCGM = re.compile(r"\bDCGM_FI_[A-Z_]+")
# SGLang's router (smg_*, specserve.monitoring.metrics.ROUTER_METRICS).
_ROUTER = re.compile(r"\bsmg_[a-z_]+")


def _exporter_series() -> set[str]:
    series: set[str] = set()
    for metric in names.ALL:
        series.add(metric.sample)
        if metric.type is names.MetricType.HISTOGRAM:
            series.update({metric.bucket, metric.sum, metric.count})
    return series


def _other_names() -> set[str]:
    return {value for key, value in vars(metrics).items() if key.isupper()}


def _queried(text: str) -> tuple[set[str], set[str]]:
    # Recording rule names (`instance:specserve_...:mean5m`) are ours, not series anyone serves.
    text = re.sub(r"\b[a-z_]+:specserve_[a-z_]+:[a-z_0-9]+", "", text)
    # SGLang's histograms are declared by family name; queries read `_bucket` and `_count`.
    sglang = {re.sub(r"_(bucket|count)$", "", name) for name in _SGLANG.findall(text)}
    router = {re.sub(r"_bucket$", "", name) for name in _ROUTER.findall(text)}
    return set(_SPECSERVE.findall(text)), sglang | set(_DCGM.findall(text)) | router


@pytest.mark.parametrize(
    "path",
    [
        MONITORING / "prometheus" / "specserve-rules.yml",
        MONITORING / "grafana" / "dashboards" / "specserve.json",
        MONITORING / "grafana" / "provisioning" / "alerting" / "specserve-alerts.yml",
    ],
    ids=lambda path: path.name,
)
def test_generated_files_query_only_declared_metrics(path: Path) -> None:
    # Descriptions and comments count too: a metric they name must exist as well.
    ours, others = _queried(path.read_text(encoding="utf-8"))
    assert ours, f"no specserve metric found in {path.name}: the pattern is broken"
    assert ours <= _exporter_series(), sorted(ours - _exporter_series())
    assert others <= _other_names(), sorted(others - _other_names())


def test_every_query_uses_declared_metrics() -> None:
    ours: set[str] = set()
    others: set[str] = set()
    for _where, expr in all_promql_expressions():
        found_ours, found_others = _queried(expr)
        ours |= found_ours
        others |= found_others
    assert ours <= _exporter_series(), sorted(ours - _exporter_series())
    assert others <= _other_names(), sorted(others - _other_names())
    # The dashboard shows SGLang's native metrics and the GPUs next to the exporter's.
    assert {metrics.SGLANG_RUNNING_REQUESTS, metrics.DCGM_GPU_UTIL} <= others
    # ... and the router's (issue 19).
    assert {metrics.ROUTER_WORKER_HEALTH, metrics.ROUTER_REQUEST_DURATION} <= others


def test_an_undeclared_metric_is_caught() -> None:
    ours, _ = _queried("rate(specserve_decode_accept_lenght_sum[5m])")
    assert not ours <= _exporter_series()


def test_an_undeclared_router_metric_is_caught() -> None:
    _, others = _queried("smg_worker_healthy{job='specserve-router'}")
    assert others == {"smg_worker_healthy"} and not others <= _other_names()
