"""names.py is the one list of the exporter's metrics: the collector serves exactly those, with
the declared type and labels (docs/metrics.md's table is generated from it)."""

from __future__ import annotations

import pytest
from prometheus_client.core import CollectorRegistry

from specserve_exporter import names
from specserve_exporter.collector import LogCollector
from specserve_exporter.ingest import Ingestor
from specserve_exporter.state import LogState, SpeculationConfig

DECODE = (
    b"[2026-02-23 17:53:14 TP0] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, "
    b"accept len: 2.50, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 120.00, "
    b"#queue-req: 0\n"
)
# A DSPARK rank's line, with the block drafters' fields (SGLang 0.5.23's order).
DECODE_BLOCK = (
    b"[2026-02-23 17:53:14 TP1] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, "
    b"accept len: 2.15, accept rate: 0.38, cap len: 1.15, block accept len: 1.07, "
    b"est uncap acc len: 2.67 [1.67, 3.67], cuda graph: True, gen throughput (token/s): 96.00, "
    b"#queue-req: 0\n"
)
PREFILL = (
    b"[2026-02-23 17:53:13 TP0] Prefill batch, #new-seq: 1, #new-token: 64, #cached-token: 0, "
    b"token usage: 0.01, #running-req: 0, #queue-req: 0, input throughput (token/s): 900.00\n"
)


class _Source:
    kind = "file"

    def is_up(self) -> bool:
        return True

    def reopens(self) -> int:
        return 0

    def errors(self) -> dict[str, int]:
        return {"directory": 0}


def _served() -> dict[str, tuple[str, tuple[str, ...]]]:
    state = LogState(SpeculationConfig(draft_tokens=4, baseline={"1-4": 50.0}))
    Ingestor(state).feed(PREFILL + DECODE + DECODE_BLOCK)
    registry = CollectorRegistry()
    registry.register(LogCollector(state, _Source()))
    served: dict[str, tuple[str, tuple[str, ...]]] = {}
    for family in registry.collect():
        labels = {k for s in family.samples for k in s.labels if k != "le"}
        served[family.name] = (family.type, tuple(sorted(labels)))
    return served


def test_the_collector_serves_exactly_the_named_metrics_with_their_types_and_labels():
    served = _served()
    declared = {m.name: (m.type.value, tuple(sorted(m.labels))) for m in names.ALL}
    assert served == declared


def test_every_name_is_unique_prefixed_and_has_help():
    # docs/metrics.md's table is generated from this list (tests/test_generated.py).
    assert len(names.BY_NAME) == len(names.ALL)
    for metric in names.ALL:
        assert metric.name.startswith(names.PREFIX)
        assert metric.help.strip(), f"{metric.name} has no help text"


def test_sample_names_follow_prometheus_client():
    assert names.LOG_LINES_PARSED.total == "specserve_log_lines_parsed_total"
    assert names.DECODE_ACCEPT_LENGTH.count == "specserve_decode_accept_length_count"
    assert names.DECODE_RUNNING_REQUESTS.sample == "specserve_decode_running_requests"


def test_a_series_a_type_does_not_have_is_an_error():
    with pytest.raises(AttributeError, match="specserve_decode_running_requests is a gauge"):
        _ = names.DECODE_RUNNING_REQUESTS.count
