"""A histogram kept as plain per-bucket counts, cheap to update on the exporter's hot path.

prometheus_client's Histogram takes a lock and walks its buckets on every observe(); the exporter
observes up to a million values a second, so it keeps raw counts here and builds cumulative
buckets only when Prometheus scrapes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

# Accept length includes the bonus token: 1.00 = every draft rejected; the ideal is the draft-token
# count (top-k 1: steps + 1), at most 8 for the configurations SGLang documents.
ACCEPT_LENGTH_BUCKETS: tuple[float, ...] = (
    1.0, 1.05, 1.1, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0,
)
# Whole-server decode tokens/s: tens for one request on a 1T model, thousands at high concurrency.
THROUGHPUT_BUCKETS: tuple[float, ...] = (
    1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 125, 150, 200, 300, 500, 750,
    1000, 1500, 2000, 3000, 5000, 10000,
)


class Histogram:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last slot is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def merge(self, counts: Sequence[int], total: float) -> None:
        """Add counts made elsewhere over the same bounds (+Inf last) and their sum."""
        for index, count in enumerate(counts):
            self.counts[index] += count
        self.sum += total

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """Buckets as Prometheus wants them: (le, cumulative count), ending with +Inf."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else _format_bound(bound), running))
        return out


def _format_bound(bound: float) -> str:
    return str(int(bound)) + ".0" if bound.is_integer() else repr(bound)
