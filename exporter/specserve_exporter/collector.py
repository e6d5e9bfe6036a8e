"""Expose LogState as Prometheus metric families at scrape time (a custom collector).

Every family's name, labels and help text come from names.py (docs/metrics.md lists them all).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from . import names
from .names import MetricType
from .parser import Kind, Ranks, Reason
from .state import USAGE_POOLS, LogState

_FAMILIES = {
    MetricType.COUNTER: CounterMetricFamily,
    MetricType.GAUGE: GaugeMetricFamily,
    MetricType.HISTOGRAM: HistogramMetricFamily,
}


class SourceStatus(Protocol):
    """What a log source reports about itself (see sources/base.py)."""

    kind: str

    def is_up(self) -> bool: ...
    def reopens(self) -> int: ...


def _ranks(ranks: Ranks) -> list[str]:
    return [ranks.dp, ranks.tp, ranks.pp]


def _family(metric: names.Metric) -> Metric:
    """An empty family of `metric`, with its labels, for add_metric."""
    return _FAMILIES[metric.type](metric.name, metric.help, labels=list(metric.labels))


def _single(metric: names.Metric, value: float) -> Metric:
    """A family of one unlabelled sample."""
    assert not metric.labels, metric.name
    return _FAMILIES[metric.type](metric.name, metric.help, value=value)


class LogCollector(Collector):
    def __init__(self, state: LogState, source: SourceStatus | None = None) -> None:
        self.state = state
        self.source = source

    def collect(self) -> Iterator[Metric]:
        with self.state.lock:
            yield from self._line_counters()
            yield from self._decode()
            yield from self._prefill()
            yield from self._config()
        yield from self._source()

    def _line_counters(self) -> Iterator[Metric]:
        s = self.state
        yield _single(names.LOG_LINES_READ, s.lines_read)
        parsed = _family(names.LOG_LINES_PARSED)
        for kind in Kind:
            parsed.add_metric([kind.value], s.parsed[kind])
        yield parsed
        rejected = _family(names.LOG_LINES_REJECTED)
        for reason in Reason:
            rejected.add_metric([reason.value], s.rejected[reason])
        yield rejected
        yield _single(names.LOG_LINES_IGNORED, s.lines_ignored)
        yield _single(names.LOG_UNKNOWN_FIELDS, s.unknown_fields)
        yield _single(names.LOG_FILE_GAPS, s.log_file_gaps)
        yield _single(names.LOG_FILE_GAP_BYTES, s.log_file_gap_bytes)

    def _decode(self) -> Iterator[Metric]:
        s = self.state
        accept = _family(names.DECODE_ACCEPT_LENGTH)
        last_accept = _family(names.DECODE_LAST_ACCEPT_LENGTH)
        last_tput = _family(names.DECODE_LAST_GEN_THROUGHPUT)
        running = _family(names.DECODE_RUNNING_REQUESTS)
        queued = _family(names.DECODE_QUEUED_REQUESTS)
        usage = _family(names.DECODE_TOKEN_USAGE)
        graph = _family(names.DECODE_GRAPH_ENABLED)
        printed_rate = _family(names.DECODE_PRINTED_ACCEPT_RATE)
        draft_acceptance = _family(names.DECODE_DRAFT_ACCEPTANCE)
        last_seen = _family(names.DECODE_LAST_LINE_TIMESTAMP)
        for ranks, series in s.decode.items():
            labels = _ranks(ranks)
            hist = series.accept_length
            if hist.count:
                accept.add_metric(labels, hist.cumulative(), hist.sum)
            last = series.last
            if "accept_length" in last:
                last_accept.add_metric(labels, last["accept_length"])
                computed = s.draft_acceptance(last["accept_length"])
                if computed is not None:
                    draft_acceptance.add_metric(labels, computed)
            if "accept_rate" in last:
                printed_rate.add_metric(labels, last["accept_rate"])
            if "gen_throughput" in last:
                last_tput.add_metric(labels, last["gen_throughput"])
            if "running_requests" in last:
                running.add_metric(labels, last["running_requests"])
            if "queued_requests" in last:
                queued.add_metric(labels, last["queued_requests"])
            for field_name, pool in USAGE_POOLS:
                if field_name in last:
                    usage.add_metric([*labels, pool], last[field_name])
            if series.graph is not None:
                graph.add_metric([*labels, series.graph[0]], 1.0 if series.graph[1] else 0.0)
            last_seen.add_metric(labels, series.last_seen)
        throughput = _family(names.DECODE_GEN_THROUGHPUT)
        for (ranks, bucket), hist in s.throughput.items():
            throughput.add_metric([*_ranks(ranks), bucket], hist.cumulative(), hist.sum)
        yield from (accept, throughput, last_accept, last_tput, running, queued, usage, graph)
        yield from (printed_rate, draft_acceptance, last_seen)

    def _prefill(self) -> Iterator[Metric]:
        new = _family(names.PREFILL_NEW_TOKENS)
        cached = _family(names.PREFILL_CACHED_TOKENS)
        tput = _family(names.PREFILL_LAST_INPUT_THROUGHPUT)
        for ranks, series in self.state.prefill.items():
            labels = _ranks(ranks)
            new.add_metric(labels, series.new_tokens)
            cached.add_metric(labels, series.cached_tokens)
            if series.last_input_throughput is not None:
                tput.add_metric(labels, series.last_input_throughput)
        yield from (new, cached, tput)

    def _config(self) -> Iterator[Metric]:
        config = self.state.config
        if config.draft_tokens is not None:
            yield _single(names.SPECULATIVE_DRAFT_TOKENS, config.draft_tokens)
        baseline = _family(names.BASELINE_GEN_THROUGHPUT)
        for bucket, value in sorted(config.baseline.items()):
            baseline.add_metric([bucket], value)
        yield baseline

    def _source(self) -> Iterator[Metric]:
        if self.source is None:
            return
        up = _family(names.SOURCE_UP)
        up.add_metric([self.source.kind], 1.0 if self.source.is_up() else 0.0)
        yield up
        reopens = _family(names.SOURCE_REOPENS)
        reopens.add_metric([self.source.kind], self.source.reopens())
        yield reopens
