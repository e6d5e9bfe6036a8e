"""Per-level statistics from request records: throughput, TTFT, ITL percentiles."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from specserve.bench.client import RequestRecord

MAX_ERRORS_LISTED = 5


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile, linear interpolation between order statistics (numpy's default)."""
    if not values:
        return None
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def distribution(values: Sequence[float], quantiles: Sequence[int]) -> dict[str, float | None]:
    out: dict[str, float | None] = {f"p{q}": percentile(values, q) for q in quantiles}
    out["mean"] = _mean(values)
    return out


def summarize_level(
    concurrency: int,
    records: Sequence[RequestRecord],
    wall_s: float,
    max_tokens: int,
) -> dict[str, Any]:
    """The level's entry in results.json (without the exporter block)."""
    ok = [r for r in records if r.ok]
    tokens = sum(r.output_tokens for r in ok)
    speeds = [s for r in ok if (s := r.decode_tok_s) is not None]
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    itls = [gap for r in ok for gap in r.itls]
    latencies = [r.latency for r in ok if r.latency is not None]
    errors = Counter(r.error or "unknown error" for r in records if not r.ok)
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in sorted({r.kind for r in records}):
        mine = [r for r in ok if r.kind == kind]
        kind_speeds = [s for r in mine if (s := r.decode_tok_s) is not None]
        by_kind[kind] = {
            "ok": len(mine),
            "request_tok_s_p50": percentile(kind_speeds, 50),
        }
    sources = {r.tokens_from for r in ok}
    return {
        "concurrency": concurrency,
        "requests": len(records),
        "ok": len(ok),
        "failed": len(records) - len(ok),
        "errors": [{"message": m, "count": c} for m, c in errors.most_common(MAX_ERRORS_LISTED)],
        "wall_s": wall_s,
        "output_tokens": tokens,
        "agg_tok_s": tokens / wall_s if ok and wall_s > 0 else None,
        "request_tok_s": distribution(speeds, (10, 50, 90)),
        "ttft_s": distribution(ttfts, (50, 90, 99)),
        "itl_s": distribution(itls, (50, 90, 99)),
        "latency_s": distribution(latencies, (50, 99)),
        "by_kind": by_kind,
        "finish_reasons": dict(Counter(r.finish_reason or "none" for r in ok)),
        "short_outputs": sum(1 for r in ok if r.output_tokens < max_tokens),
        "tokens_from": sources.pop() if len(sources) == 1 else ("mixed" if sources else None),
        "exporter": None,
        "exporter_error": None,
        "speedup": None,
    }
