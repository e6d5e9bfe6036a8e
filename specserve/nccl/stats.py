"""Turn per-rank, per-iteration all-reduce times into latency and bandwidth figures.

Conventions follow nccl-tests (doc/PERFORMANCE.md there): algorithm bandwidth is bytes / time,
and all-reduce bus bandwidth is algbw x 2(n-1)/n, the traffic each link carries in a ring, so the
figure is comparable across world sizes and with the hardware's link speed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


def busbw_factor(world_size: int) -> float:
    if world_size < 1:
        raise ValueError(f"world size {world_size} must be at least 1")
    return 2.0 * (world_size - 1) / world_size


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (10^9 bytes, as nccl-tests prints)."""
    if seconds <= 0:
        raise ValueError(f"time {seconds} s must be positive")
    return nbytes / seconds / 1e9


def busbw_gbps(nbytes: int, seconds: float, world_size: int) -> float:
    return algbw_gbps(nbytes, seconds) * busbw_factor(world_size)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside [0, 100]")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def per_iteration_max(rank_times_us: Sequence[Sequence[float]]) -> list[float]:
    """Iteration i's time is the slowest rank's: an all-reduce ends when its last rank ends."""
    if not rank_times_us:
        raise ValueError("no ranks reported times")
    lengths = {len(times) for times in rank_times_us}
    if len(lengths) != 1:
        raise ValueError(f"ranks reported different iteration counts: {sorted(lengths)}")
    return [max(column) for column in zip(*rank_times_us, strict=True)]


@dataclass(frozen=True)
class SizeStats:
    median_us: float
    p99_us: float
    mean_us: float
    min_us: float
    algbw_gbps: float
    busbw_gbps: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def summarize(rank_times_us: Sequence[Sequence[float]], nbytes: int, world_size: int) -> SizeStats:
    """Latency percentiles over iterations; bandwidths from the median (robust to stragglers)."""
    times = per_iteration_max(rank_times_us)
    if not times:
        raise ValueError("no timed iterations")
    bad = [t for t in times if not (math.isfinite(t) and t > 0)]
    if bad:
        raise ValueError(f"non-positive or non-finite iteration times: {bad[:3]}")
    median = percentile(times, 50)
    return SizeStats(
        median_us=median,
        p99_us=percentile(times, 99),
        mean_us=sum(times) / len(times),
        min_us=min(times),
        algbw_gbps=algbw_gbps(nbytes, median * 1e-6),
        busbw_gbps=busbw_gbps(nbytes, median * 1e-6, world_size),
    )


def speedup(default_median_us: float | None, preset_median_us: float | None) -> float | None:
    """How many times faster than `default` (>1 is faster); None when either is missing."""
    if default_median_us is None or preset_median_us is None or preset_median_us <= 0:
        return None
    return default_median_us / preset_median_us
