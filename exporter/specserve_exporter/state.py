"""What the exporter knows: counters, last-window gauges and histograms, keyed by kind and rank.

One `LogState` per exporter. Sources feed it under its lock; the collector reads it under the same
lock at scrape time. Nothing here knows about files, Docker or HTTP. `observe` is the one place a
parsed window changes it, for the reference and the fast path alike; what it keeps of each field
is the field table's (fields.py).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from specserve.buckets import concurrency_bucket

from .fields import LINE_KINDS, Feed, Kind, Read, Value
from .histogram import Histogram
from .parser import Ranks, Reason
from .window import Window

# The numeric gauges of the last line, by kind: cleared when the last line lacks them.
_LAST_LINE: dict[Kind, tuple[str, ...]] = {
    kind: tuple(dict.fromkeys(
        f.field.name for f in line_kind.feeds
        if f.read is Read.LAST_LINE and f.field.value in (Value.NUMBER, Value.ESTIMATE)))
    for kind, line_kind in LINE_KINDS.items()
}


@dataclass
class Series:
    """The lines of one kind printed by one rank."""

    # EVERY_LINE feeds, by feed and the key's label ("" when the feed has no key).
    histograms: dict[tuple[Feed, str], Histogram] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)  # by field name
    graph: tuple[str, bool] | None = None
    last_seen: float = 0.0


@dataclass(frozen=True)
class SpeculationConfig:
    """What the exporter is told about the deployment (from the profile or flags)."""

    draft_tokens: int | None = None
    baseline: dict[str, float] = field(default_factory=dict)  # concurrency bucket -> tok/s
    # --speculative-adaptive: the server's switch lines, not draft_tokens, say the current count.
    adaptive: bool = False


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
        # The last `Switch adaptive runtime state` line: (steps, draft tokens), and how many.
        self.adaptive_shape: tuple[int, int] | None = None
        self.adaptive_switches = 0
        self.series: dict[Kind, dict[Ranks, Series]] = {kind: {} for kind in Kind}
        self._key_labels: dict[int, str] = {}

    # --- called with self.lock held -------------------------------------------------------

    def observe(self, window: Window, now: float) -> None:
        """Everything one window of parsed lines changes: counters, histograms and gauges."""
        self.parsed[window.kind] += window.lines
        self.unknown_fields += window.unknown_fields
        by_rank = self.series[window.kind]
        series = by_rank.get(window.ranks)
        if series is None:
            series = by_rank[window.ranks] = Series()
        histograms = series.histograms
        for feed, sums in window.sums.items():
            for key, (counts, total) in sums.items():
                label = "" if feed.key is None else self._key_label(key)
                hist = histograms.get((feed, label))
                if hist is None:
                    hist = histograms[(feed, label)] = Histogram(feed.bounds)
                hist.merge(counts, total)
        gauges = series.gauges
        if window.last is not None:
            values = window.last.values
            for name in _LAST_LINE[window.kind]:
                if name in values:
                    gauges[name] = values[name]
                else:
                    gauges.pop(name, None)
        gauges.update(window.printed)
        if window.graph is not None:
            series.graph = window.graph
        series.last_seen = now

    def _key_label(self, key: int) -> str:
        label = self._key_labels.get(key)
        if label is None:
            label = self._key_labels[key] = concurrency_bucket(key)
        return label

    @property
    def draft_tokens(self) -> int | None:
        """Draft tokens per verify pass now: under adaptive speculation the server's last switch,
        else (and before the first switch) the configured count."""
        if self.config.adaptive and self.adaptive_shape is not None:
            return self.adaptive_shape[1]
        return self.config.draft_tokens

    def draft_acceptance(self, accept_length: float) -> float | None:
        """The exporter's own draft-acceptance rate: (accept_len - 1) / (draft_tokens - 1).

        Same definition for every SGLang version (upstream's printed `accept rate` changed meaning
        in PR #23530). The bonus token is not a draft token, hence the -1 on both sides.
        """
        draft_tokens = self.draft_tokens
        if draft_tokens is None or draft_tokens < 2:
            return None
        return max(0.0, (accept_length - 1.0) / (draft_tokens - 1))
