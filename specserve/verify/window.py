"""What the specserve exporter saw between two scrapes of its /metrics: the one window computation.

Accept length over a window = delta(_sum) / delta(_count) of `specserve_decode_accept_length`
(every rank's label set together); gen throughput per concurrency bucket likewise. Both
histograms count decode-log windows, so these are window means: the numbers the verification
gate, bench, the dashboard and the baseline alert use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from specserve_exporter.names import (
    DECODE_ACCEPT_LENGTH,
    DECODE_GEN_THROUGHPUT,
    DECODE_GRAPH_ENABLED,
    LOG_LINES_PARSED,
)


@dataclass(frozen=True)
class GraphSample:
    """One rank's `specserve_decode_graph_enabled` gauge: its labels and 1.0 or 0.0."""

    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Snapshot:
    """One scrape, every rank's label set summed (graph state kept per rank)."""

    decode_lines: float = 0.0
    accept_sum: float = 0.0
    accept_count: float = 0.0
    # concurrency bucket -> (sum, count)
    throughput: dict[str, tuple[float, float]] = field(default_factory=dict)
    graphs: tuple[GraphSample, ...] = ()


def parse_snapshot(text: str) -> Snapshot:
    """Read a /metrics page; ValueError when it is not a specserve exporter's."""
    decode = accept_sum = accept_count = 0.0
    throughput: dict[str, list[float]] = {}
    graphs: list[GraphSample] = []
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        for sample in family.samples:
            if sample.name == LOG_LINES_PARSED.total and sample.labels.get("kind") == "decode":
                decode += sample.value
            elif sample.name == DECODE_ACCEPT_LENGTH.sum:
                accept_sum += sample.value
            elif sample.name == DECODE_ACCEPT_LENGTH.count:
                accept_count += sample.value
            elif sample.name in (DECODE_GEN_THROUGHPUT.sum, DECODE_GEN_THROUGHPUT.count):
                slot = throughput.setdefault(sample.labels.get("concurrency", ""), [0.0, 0.0])
                slot[0 if sample.name == DECODE_GEN_THROUGHPUT.sum else 1] += sample.value
            elif sample.name == DECODE_GRAPH_ENABLED.name:
                graphs.append(GraphSample(dict(sample.labels), sample.value))
    if LOG_LINES_PARSED.name not in names:
        raise ValueError(
            f"no {LOG_LINES_PARSED.total} metric: this is not a specserve-exporter /metrics page"
        )
    return Snapshot(
        decode_lines=decode,
        accept_sum=accept_sum,
        accept_count=accept_count,
        throughput={k: (v[0], v[1]) for k, v in throughput.items()},
        graphs=tuple(graphs),
    )


@dataclass(frozen=True)
class Window:
    """The decode windows counted between a `before` and an `after` snapshot."""

    decode_lines: float
    accept_sum: float
    accept_windows: float
    # concurrency bucket -> (mean tok/s, windows)
    throughput: dict[str, tuple[float, int]]
    graphs: tuple[GraphSample, ...]  # the state at `after`: a gauge, not a delta

    @property
    def accept_length(self) -> float | None:
        """Mean accept length over the window, None when no window carried one."""
        return self.accept_sum / self.accept_windows if self.accept_windows > 0 else None


def window(before: Snapshot, after: Snapshot) -> Window:
    throughput: dict[str, tuple[float, int]] = {}
    for bucket, (total, count) in after.throughput.items():
        prev_total, prev_count = before.throughput.get(bucket, (0.0, 0.0))
        if count - prev_count > 0:
            throughput[bucket] = ((total - prev_total) / (count - prev_count),
                                  int(count - prev_count))
    return Window(
        decode_lines=after.decode_lines - before.decode_lines,
        accept_sum=after.accept_sum - before.accept_sum,
        accept_windows=after.accept_count - before.accept_count,
        throughput=throughput,
        graphs=after.graphs,
    )


def combined(windows: Iterable[Window]) -> Window:
    """Several exporters' windows (one per server pod) as one."""
    parts = list(windows)
    throughput: dict[str, tuple[float, int]] = {}
    for part in parts:
        for bucket, (mean, count) in part.throughput.items():
            prev_mean, prev_count = throughput.get(bucket, (0.0, 0))
            total = prev_mean * prev_count + mean * count
            throughput[bucket] = (total / (prev_count + count), prev_count + count)
    return Window(
        decode_lines=sum(p.decode_lines for p in parts),
        accept_sum=sum(p.accept_sum for p in parts),
        accept_windows=sum(p.accept_windows for p in parts),
        throughput=throughput,
        graphs=tuple(g for p in parts for g in p.graphs),
    )
