"""Expose LogState as Prometheus metric families at scrape time (a custom collector).

Every family's name, labels and help text come from names.py (docs/metrics.md lists them all).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from . import names
from .fields import LINE_KINDS, Feed, Kind, Read, Value
from .names import MetricType
from .parser import Ranks, Reason
from .state import LogState, Series

_FAMILIES = {
    MetricType.COUNTER: CounterMetricFamily,
    MetricType.GAUGE: GaugeMetricFamily,
    MetricType.HISTOGRAM: HistogramMetricFamily,
}

# Every metric the stats lines feed, in the order names.ALL lists them.
_LINE_METRICS: tuple[names.Metric, ...] = tuple(
    m for m in names.ALL
    if any(m is f.metric or m is k.last_seen for k in LINE_KINDS.values() for f in k.feeds)
)


class SourceStatus(Protocol):
    """What a log source reports about itself (see sources/base.py)."""

    kind: str

    def is_up(self) -> bool: ...
    def reopens(self) -> int: ...
    def errors(self) -> Mapping[str, int]: ...


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
            yield from self._lines()
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

    def _lines(self) -> Iterator[Metric]:
        """The metrics of the stats lines, each kind's as its field table says (fields.py)."""
        s = self.state
        families = {m: _family(m) for m in _LINE_METRICS}
        for kind, line_kind in LINE_KINDS.items():
            for ranks, series in s.series[kind].items():
                labels = _ranks(ranks)
                for feed in line_kind.feeds:
                    self._add(families[feed.metric], feed, series, labels)
                if line_kind.last_seen is not None:
                    families[line_kind.last_seen].add_metric(labels, series.last_seen)
        yield from families.values()

    def _add(self, family: Metric, feed: Feed, series: Series, labels: list[str]) -> None:
        metric = feed.metric
        if feed.read is Read.EVERY_LINE:
            if metric.type is MetricType.COUNTER:  # a counter from the first line of its kind on
                hist = series.histograms.get((feed, ""))
                family.add_metric(labels, 0.0 if hist is None else hist.sum)
                return
            own = [*labels, feed.field.label] if feed.field.label else labels  # the graph kind
            for (of, key), hist in series.histograms.items():
                if of is feed:
                    family.add_metric([*own, key] if feed.key else own,
                                      hist.cumulative(), hist.sum)
            return
        labels = [*labels, feed.field.label] if feed.field.label else labels
        if feed.field.value is Value.GRAPH:
            if series.graph is not None and series.graph[0] == feed.field.label:
                family.add_metric(labels, 1.0 if series.graph[1] else 0.0)
            return
        value = series.gauges.get(feed.field.name)
        if value is not None and metric is names.DECODE_DRAFT_ACCEPTANCE:
            value = self.state.draft_acceptance(value)
        if value is not None:
            family.add_metric(labels, value)

    def _config(self) -> Iterator[Metric]:
        config = self.state.config
        draft_tokens = self.state.draft_tokens
        if draft_tokens is not None:
            yield _single(names.SPECULATIVE_DRAFT_TOKENS, draft_tokens)
        yield _single(names.SPECULATIVE_ADAPTIVE, 1.0 if config.adaptive else 0.0)
        yield _single(names.SPECULATIVE_ADAPTIVE_SWITCHES, self.state.adaptive_switches)
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
        errors = _family(names.SOURCE_ERRORS)
        for reason, count in self.source.errors().items():
            errors.add_metric([self.source.kind, str(reason)], count)
        yield errors
