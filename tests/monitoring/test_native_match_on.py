"""Native-or-log and the disagreement alert with `match_on` set, as for the chart's sidecar: one
Prometheus scrapes several pods, each with its SGLang and its exporter. Each pod's native series
must pair with its own exporter only: the rules are rendered with `match_on: namespace, pod`
(`specserve rules render --overrides`, as users do) and promtool evaluates three pods at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specserve.monitoring.prometheus import render_rules
from specserve.monitoring.yamlio import dump_yaml

from .conftest import run
from .promtool_cases import ACCEPT, Case, Check, Firing, _file, counter

MATCH = "namespace, pod"
OVERRIDES: dict[str, Any] = {
    name: {"thresholds": {"match_on": MATCH}}
    for name in ("SpecDecodeDraftsRejected", "SpecDecodeAcceptLengthLow",
                 "SpecServeAcceptLengthMismatch")
}  # fmt: skip


def _exporter(pod: str) -> dict[str, str]:
    return {"job": "specserve-exporter", "instance": f"{pod}:9433", "namespace": "ml", "pod": pod}


def _sglang(pod: str) -> dict[str, str]:
    return {"job": "sglang", "instance": f"{pod}:8000", "namespace": "ml", "pod": pod,
            "model_name": "kimi", "engine_type": "unified"}  # fmt: skip


def _sel(labels: dict[str, str], **extra: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in {**labels, **extra}.items())


def _pod(pod: str, native: float | None, log: float | None) -> dict[str, str]:
    """30 minutes of steady decoding: 60 verify calls, 6 finished requests (each with its
    prefill token) and 60 decode lines a minute."""
    series: dict[str, str] = {}
    if native is not None:
        s = _sglang(pod)
        series[f'sglang:generation_tokens_total{{{_sel(s, is_streaming="false")}}}'] = counter(
            (60 * native + 6, 30)
        )
        series[f'sglang:num_requests_total{{{_sel(s, is_streaming="false")}}}'] = counter((6, 30))
        series[f"sglang:spec_verify_calls_total{{{_sel(s)}}}"] = counter((60, 30))
    if log is not None:
        e = _exporter(pod)
        series[f"{ACCEPT}_sum{{{_sel(e, dp='0', tp='0', pp='0')}}}"] = counter((60 * log, 30))
        series[f"{ACCEPT}_count{{{_sel(e, dp='0', tp='0', pp='0')}}}"] = counter((60, 30))
    return series


CASE = Case(
    "pod a: native 1.00, log 2.50 (fires, exporter's labels); pod b: native 2.50, log 1.00 "
    "(silent: its own native wins; 60% apart); pod c: log 1.00 only (fires); pod d: native "
    "1.00 only, its exporter lost the log (fires, SGLang's labels; 100% apart)",
    {**_pod("a", 1.0, 2.5), **_pod("b", 2.5, 1.0), **_pod("c", None, 1.0),
     **_pod("d", 1.0, None)},
    (
        Check(
            "SpecDecodeDraftsRejected", "15m",
            (Firing(_exporter("a"), "1.000"), Firing(_exporter("c"), "1.000"),
             Firing(_sglang("d"), "1.000")),
        ),
        Check(
            "SpecServeAcceptLengthMismatch", "15m",
            (Firing(_sglang("a"), "150%"), Firing(_sglang("b"), "60%"),
             Firing(_sglang("d"), "100%")),
        ),
    ),
)


def test_each_pod_pairs_with_its_own_exporter(promtool: str, tmp_path: Path) -> None:
    rules = render_rules(OVERRIDES)
    exprs = {r["alert"]: r["expr"] for r in rules["groups"][1]["rules"]}
    assert "on (namespace, pod) group_left ()" in exprs["SpecDecodeDraftsRejected"]
    (tmp_path / "rules.yml").write_text(dump_yaml(rules))
    (tmp_path / "test.yml").write_text(dump_yaml(_file([CASE], ["rules.yml"], OVERRIDES)))
    result = run(promtool, "test", "rules", "test.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_match_on_the_pods_would_mix(promtool: str, tmp_path: Path) -> None:
    """The same pods under the default (empty) match_on: one native series stands for all, so
    the expectations above fail. The test above is not passing vacuously."""
    (tmp_path / "rules.yml").write_text(dump_yaml(render_rules()))
    (tmp_path / "test.yml").write_text(dump_yaml(_file([CASE], ["rules.yml"], OVERRIDES)))
    result = run(promtool, "test", "rules", "test.yml", cwd=tmp_path)
    assert result.returncode != 0
