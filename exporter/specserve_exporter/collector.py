"""Expose LogState as Prometheus metric families at scrape time (a custom collector).

Names follow Prometheus' naming guide: one prefix (`specserve_`), base units in the name
(`_seconds`, `_ratio`, `_tokens_per_second`), `_total` on counters. docs/metrics.md lists them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .parser import Kind, Ranks, Reason
from .state import USAGE_POOLS, LogState

PREFIX = "specserve_"
RANK_LABELS = ("dp", "tp", "pp")


class SourceStatus(Protocol):
    """What a log source reports about itself (see sources/base.py)."""

    kind: str

    def is_up(self) -> bool: ...
    def reopens(self) -> int: ...


def _ranks(ranks: Ranks) -> list[str]:
    return [ranks.dp, ranks.tp, ranks.pp]


def _gauge(name: str, doc: str, labels: Iterable[str] = RANK_LABELS) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, doc, labels=list(labels))


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
        yield CounterMetricFamily(
            PREFIX + "log_lines_read", "Log lines read from the source.", value=s.lines_read
        )
        parsed = CounterMetricFamily(
            PREFIX + "log_lines_parsed",
            "SGLang scheduler stats lines parsed, by kind (decode or prefill).",
            labels=["kind"],
        )
        for kind in Kind:
            parsed.add_metric([kind.value], s.parsed[kind])
        yield parsed
        rejected = CounterMetricFamily(
            PREFIX + "log_lines_rejected",
            "Stats lines that could not be read, by reason. Never fatal.",
            labels=["reason"],
        )
        for reason in Reason:
            rejected.add_metric([reason.value], s.rejected[reason])
        yield rejected
        yield CounterMetricFamily(
            PREFIX + "log_lines_ignored",
            "Lines that are not scheduler stats lines (HTTP access lines, warnings, ...).",
            value=s.lines_ignored,
        )
        yield CounterMetricFamily(
            PREFIX + "log_unknown_fields",
            "Fields of parsed stats lines this exporter does not know (a newer SGLang format).",
            value=s.unknown_fields,
        )
        yield CounterMetricFamily(
            PREFIX + "log_file_gaps",
            "Times specserve-launch could not write the log file (full disk, read-only, "
            "directory gone) and said so in it once it could: output the exporter never saw.",
            value=s.log_file_gaps,
        )
        yield CounterMetricFamily(
            PREFIX + "log_file_gap_bytes",
            "Bytes of server output specserve-launch could not write to the log file.",
            value=s.log_file_gap_bytes,
        )

    def _decode(self) -> Iterator[Metric]:
        s = self.state
        accept = HistogramMetricFamily(
            PREFIX + "decode_accept_length",
            "Per-window mean accept length (accepted tokens per verify pass, bonus token "
            "included: 1.0 = every draft token rejected).",
            labels=list(RANK_LABELS),
        )
        last_accept = _gauge("decode_last_accept_length", "Accept length of the last window.")
        last_tput = _gauge(
            "decode_last_gen_throughput_tokens_per_second",
            "Whole-server decode throughput of the last window, as printed by SGLang.",
        )
        running = _gauge("decode_running_requests", "Running requests (#running-req).")
        queued = _gauge("decode_queued_requests", "Queued requests (#queue-req).")
        usage = _gauge(
            "decode_token_usage_ratio",
            "KV cache usage of the last window, by pool (kv for standard models).",
            (*RANK_LABELS, "pool"),
        )
        graph = _gauge(
            "decode_graph_enabled",
            "1 when the last decode window ran with graphs (CUDA graphs on NVIDIA).",
            (*RANK_LABELS, "graph"),
        )
        printed_rate = _gauge(
            "decode_printed_accept_rate_ratio",
            "SGLang's own `accept rate`, as printed. Its meaning changed in SGLang PR #23530 "
            "(accept_len/draft_tokens before, (accept_len-1)/(draft_tokens-1) after).",
        )
        draft_acceptance = _gauge(
            "decode_draft_acceptance_ratio",
            "Computed by the exporter for every SGLang version: (accept_len - 1) / "
            "(draft_tokens - 1) with the configured draft-token count.",
        )
        last_seen = _gauge(
            "decode_last_line_timestamp_seconds",
            "Unix time at which the exporter read the last decode line of this rank.",
        )
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
        throughput = HistogramMetricFamily(
            PREFIX + "decode_gen_throughput_tokens_per_second",
            "Per-window whole-server decode throughput, by concurrency bucket of #running-req "
            "(compare with the baseline of the same bucket).",
            labels=[*RANK_LABELS, "concurrency"],
        )
        for (ranks, bucket), hist in s.throughput.items():
            throughput.add_metric([*_ranks(ranks), bucket], hist.cumulative(), hist.sum)
        yield from (accept, throughput, last_accept, last_tput, running, queued, usage, graph)
        yield from (printed_rate, draft_acceptance, last_seen)

    def _prefill(self) -> Iterator[Metric]:
        new = CounterMetricFamily(
            PREFIX + "prefill_new_tokens", "Prefilled tokens (#new-token).", labels=RANK_LABELS
        )
        cached = CounterMetricFamily(
            PREFIX + "prefill_cached_tokens",
            "Prompt tokens served from the prefix cache (#cached-token).",
            labels=RANK_LABELS,
        )
        tput = _gauge(
            "prefill_last_input_throughput_tokens_per_second",
            "Input throughput of the last prefill line (newer SGLang versions only).",
        )
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
            yield GaugeMetricFamily(
                PREFIX + "speculative_draft_tokens",
                "Configured --speculative-num-draft-tokens.",
                value=config.draft_tokens,
            )
        baseline = GaugeMetricFamily(
            PREFIX + "baseline_gen_throughput_tokens_per_second",
            "Measured non-speculative throughput per concurrency bucket: the alert threshold.",
            labels=["concurrency"],
        )
        for bucket, value in sorted(config.baseline.items()):
            baseline.add_metric([bucket], value)
        yield baseline

    def _source(self) -> Iterator[Metric]:
        if self.source is None:
            return
        up = GaugeMetricFamily(
            PREFIX + "source_up", "1 while the log source is being read.", labels=["source"]
        )
        up.add_metric([self.source.kind], 1.0 if self.source.is_up() else 0.0)
        yield up
        reopens = CounterMetricFamily(
            PREFIX + "source_reopens",
            "Times the source was reopened: file rotations and truncations, container or pod "
            "restarts.",
            labels=["source"],
        )
        reopens.add_metric([self.source.kind], self.source.reopens())
        yield reopens
