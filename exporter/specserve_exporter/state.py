"""What the exporter knows: counters, last-window gauges and histograms, keyed by rank.

One `LogState` per exporter. Sources feed it under its lock; the collector reads it under the same
lock at scrape time. Nothing here knows about files, Docker or HTTP.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from specserve.buckets import concurrency_bucket

from .histogram import ACCEPT_LENGTH_BUCKETS, THROUGHPUT_BUCKETS, Histogram
from .parser import Kind, Ranks, Reason, StatsLine

# Token-usage fields by KV pool, in the order SGLang's model kinds print them.
USAGE_POOLS: tuple[tuple[str, str], ...] = (
    ("token_usage", "kv"),
    ("full_token_usage", "full"),
    ("swa_token_usage", "swa"),
    ("mamba_usage", "mamba"),
    ("gpu_token_usage", "gpu"),
    ("cpu_token_usage", "cpu"),
)


@dataclass
class DecodeSeries:
    """Last decode window of one printing rank."""

    accept_length: Histogram = field(default_factory=lambda: Histogram(ACCEPT_LENGTH_BUCKETS))
    last: dict[str, float] = field(default_factory=dict)
    graph: tuple[str, bool] | None = None
    last_seen: float = 0.0


@dataclass
class PrefillSeries:
    new_tokens: float = 0.0
    cached_tokens: float = 0.0
    last_input_throughput: float | None = None


@dataclass(frozen=True)
class SpeculationConfig:
    """What the exporter is told about the deployment (from the profile or flags)."""

    draft_tokens: int | None = None
    baseline: dict[str, float] = field(default_factory=dict)  # concurrency bucket -> tok/s


class LogState:
    def __init__(self, config: SpeculationConfig) -> None:
        self.config = config
        self.lock = threading.Lock()
        self.lines_read = 0
        self.lines_ignored = 0
        self.parsed: Counter[Kind] = Counter()
        self.rejected: Counter[Reason] = Counter()
        self.unknown_fields = 0
        self.log_file_gaps = 0  # specserve-launch's gap markers (ingest.LOG_GAP_MARKER)
        self.log_file_gap_bytes = 0
        self.decode: dict[Ranks, DecodeSeries] = {}
        self.throughput: dict[tuple[Ranks, str], Histogram] = {}
        self.prefill: dict[Ranks, PrefillSeries] = {}

    # --- called with self.lock held -------------------------------------------------------

    def decode_series(self, ranks: Ranks) -> DecodeSeries:
        series = self.decode.get(ranks)
        if series is None:
            series = self.decode[ranks] = DecodeSeries()
        return series

    def throughput_histogram(self, ranks: Ranks, bucket: str) -> Histogram:
        key = (ranks, bucket)
        hist = self.throughput.get(key)
        if hist is None:
            hist = self.throughput[key] = Histogram(THROUGHPUT_BUCKETS)
        return hist

    def observe(self, line: StatsLine, now: float | None = None) -> None:
        """Everything one parsed line changes: histograms, counters and the last-value gauges."""
        self.parsed[line.kind] += 1
        self.unknown_fields += line.unknown_fields
        if line.kind is Kind.PREFILL:
            self._observe_prefill(line)
            return
        values = line.values
        series = self.decode_series(line.ranks)
        if "accept_length" in values:
            series.accept_length.observe(values["accept_length"])
        bucket = concurrency_bucket(int(values["running_requests"]))
        self.throughput_histogram(line.ranks, bucket).observe(values["gen_throughput"])
        self.set_last(line, series, now)

    def set_last(self, line: StatsLine, series: DecodeSeries, now: float | None) -> None:
        """The gauges: they show the last window only, so only the last line of a batch matters."""
        series.last = dict(line.values)
        if line.graph is not None and line.graph_on is not None:
            series.graph = (line.graph, line.graph_on)
        series.last_seen = time.time() if now is None else now

    def prefill_series(self, ranks: Ranks) -> PrefillSeries:
        series = self.prefill.get(ranks)
        if series is None:
            series = self.prefill[ranks] = PrefillSeries()
        return series

    def _observe_prefill(self, line: StatsLine) -> None:
        series = self.prefill_series(line.ranks)
        series.new_tokens += line.values.get("new_tokens", 0.0)
        series.cached_tokens += line.values.get("cached_tokens", 0.0)
        if "input_throughput" in line.values:
            series.last_input_throughput = line.values["input_throughput"]

    def draft_acceptance(self, accept_length: float) -> float | None:
        """The exporter's own draft-acceptance rate: (accept_len - 1) / (draft_tokens - 1).

        Same definition for every SGLang version (upstream's printed `accept rate` changed meaning
        in PR #23530). The bonus token is not a draft token, hence the -1 on both sides.
        """
        draft_tokens = self.config.draft_tokens
        if draft_tokens is None or draft_tokens < 2:
            return None
        return max(0.0, (accept_length - 1.0) / (draft_tokens - 1))
