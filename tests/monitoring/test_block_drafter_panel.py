"""The dashboard's block-drafter panel shows what SGLang printed, in real Prometheus.

The end-to-end stack's stand-in runs EAGLE3, whose lines hold no block-drafter field, so its
"every query has data" check leaves this panel out (tests/e2e/test_monitoring_e2e.py). Here two
lines SGLang 0.5.23's own code printed for block drafters (tests/fixtures/sglang-logs) go
through the exporter, its exposition becomes promtool's input series, and promtool evaluates
each of the panel's queries: each must return the value SGLang printed, under the series'
instance and DP rank. Fails on a renamed metric, a query that drops or mislabels the series, or
a field the exporter no longer carries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from prometheus_client.core import CollectorRegistry

from specserve.monitoring.dashboard import build_dashboard
from specserve_exporter.collector import LogCollector
from specserve_exporter.ingest import Ingestor
from specserve_exporter.parser import read_fields
from specserve_exporter.state import LogState, SpeculationConfig

from .conftest import run

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "sglang-logs" / "0.5.23" / "corpus.log"
TITLE = "Block drafters (DFLASH, DSPARK)"
JOB = "specserve-exporter"
# Each printed field and the gauge the panel reads for it.
GAUGES = {
    b"block accept len": "specserve_decode_last_block_accept_length",
    b"cap len": "specserve_decode_last_cap_length",
    b"est uncap acc len": "specserve_decode_uncapped_accept_length_estimate",
}


def _lines() -> dict[str, bytes]:
    """One node printing the verify cap's fields (cap len, block accept len), one printing
    DSPARK's estimate: no single line of SGLang's holds all three."""
    lines = CORPUS.read_bytes().splitlines()
    capped = next(line for line in lines if b"cap len: " in line and b"block accept len" in line)
    estimated = next(line for line in lines if b"est uncap acc len: " in line)
    return {"node1:9433": capped, "node2:9433": estimated}


def _exposition(line: bytes) -> list[tuple[str, dict[str, str], float]]:
    state = LogState(SpeculationConfig(draft_tokens=8))
    Ingestor(state).feed(line + b"\n", now=1000.0)
    registry = CollectorRegistry()
    registry.register(LogCollector(state))
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in registry.collect()
        for sample in family.samples
        if sample.name in GAUGES.values()
    ]


def _series(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def test_each_query_of_the_block_drafter_panel_returns_what_sglang_printed(
    promtool: str, tmp_path: Path
) -> None:
    panels = [p for p in build_dashboard()["panels"] if p.get("title") == TITLE]
    assert len(panels) == 1, f"no panel titled {TITLE!r}"
    queries = [target["expr"] for target in panels[0]["targets"]]
    assert len(queries) == len(GAUGES)

    input_series: list[dict[str, str]] = []
    expected: dict[str, list[dict[str, Any]]] = {name: [] for name in GAUGES.values()}
    for instance, line in _lines().items():
        printed = read_fields(line)
        assert printed is not None
        for name, labels, value in _exposition(line):
            scraped = {**labels, "job": JOB, "instance": instance}
            input_series.append({"series": _series(name, scraped), "values": f"{value}x10"})
        for field, name in GAUGES.items():
            if field in printed:
                # `max without (tp, pp)`: the instance and DP rank stay.
                labels = {"job": JOB, "instance": instance, "dp": "0"}
                expected[name].append({"labels": _series(name, labels).removeprefix(name),
                                       "value": float(printed[field])})  # fmt: skip
    assert all(expected.values()), expected  # each field printed by one of the lines

    tests = []
    for query in queries:
        (name,) = [n for n in GAUGES.values() if n in query]
        tests.append({"expr": query, "eval_time": "5m", "exp_samples": expected[name]})
    document = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": input_series, "promql_expr_test": tests}],
    }
    path = tmp_path / "block-drafter-panel.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = run(promtool, "test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
