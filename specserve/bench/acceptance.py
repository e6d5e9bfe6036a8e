"""Acceptance per request, per prompt class and per draft position, from SGLang's per-request
speculative details (meta_info / sglext.spec_tokens_details, recorded per version in
facts.request_spec_details of the contract data).

Per position: SGLang's `spec_correct_drafts_histogram[k]` counts a request's verify passes that
accepted exactly k drafts (Req.update_spec_correct_drafts_histogram). Draft position k survives a
pass when the pass accepted at least k drafts, so over any set of requests the survival of
position k is sum(hist[j], j >= k) / sum(hist): P(accepted >= k). A position that survives
rarely is a draft token that costs verify work and seldom pays; fewer draft tokens would do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from specserve.bench.stats import percentile


def add_histograms(histograms: Iterable[Sequence[int]]) -> list[int]:
    total: list[int] = []
    for histogram in histograms:
        if len(total) < len(histogram):
            total.extend([0] * (len(histogram) - len(total)))
        for k, count in enumerate(histogram):
            total[k] += count
    return total


def survival(histogram: Sequence[int]) -> list[float]:
    """[P(accepted >= 1), P(accepted >= 2), ...] for draft positions 1.. the histogram reaches."""
    passes = sum(histogram)
    if passes <= 0:
        return []
    return [sum(histogram[k:]) / passes for k in range(1, len(histogram))]


def accept_distribution(values: Sequence[float]) -> dict[str, Any]:
    """Median, p10/p90 and n of per-request accept lengths."""
    return {
        "n": len(values),
        "p10": percentile(values, 10),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "mean": sum(values) / len(values) if values else None,
    }


def summarize(per_request: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The level's acceptance section over its requests' details, overall and per class; None
    when no request carried details (no speculation, or a server that returns none)."""
    measured = [r for r in per_request if r.get("accept_length") is not None]
    if not measured:
        return None

    def section(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        histogram = add_histograms(r.get("histogram") or [] for r in rows)
        return {
            "accept_length": accept_distribution([r["accept_length"] for r in rows]),
            "verify_passes": sum(r.get("verify_ct") or 0 for r in rows),
            "histogram": histogram,
            "position_survival": survival(histogram),
        }

    kinds = sorted({r["kind"] for r in measured})
    return {
        **section(measured),
        "by_kind": {kind: section([r for r in measured if r["kind"] == kind]) for kind in kinds},
    }
