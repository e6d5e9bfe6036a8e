"""The ranking's settings: the concurrency it is made at, or a traffic mix over benched levels.
Checked when a run starts, so a ranking that could not be computed is refused before any
restart."""

from __future__ import annotations

from typing import Any

from specserve.tune.errors import TuneError

# Weights are user-typed decimals: 0.5 + 0.3 + 0.2 is not exactly 1.0 in binary.
MIX_TOLERANCE = 0.01


def parse_mix(mix: Any, benched: list[int]) -> dict[int, float]:
    """tune_traffic_mix as {concurrency: weight}; {} or None means no mix (one concurrency)."""
    if not mix:
        return {}
    if not isinstance(mix, dict):
        raise TuneError(f"tune_traffic_mix must map concurrency to weight, e.g. "
                        f"{{1: 0.5, 8: 0.3, 32: 0.2}}; got {mix!r}")
    parsed: dict[int, float] = {}
    for key, weight in mix.items():
        try:
            level = int(str(key))
        except ValueError:
            raise TuneError(f"tune_traffic_mix key {key!r} is not a concurrency (an integer), "
                            "e.g. {1: 0.5, 8: 0.3, 32: 0.2}") from None
        if level not in benched:
            raise TuneError(f"tune_traffic_mix names concurrency {level}, which is not benched "
                            f"(tune_bench_concurrency is {benched}); add {level} to "
                            "tune_bench_concurrency or drop it from the mix")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
            raise TuneError(f"tune_traffic_mix weight for concurrency {level} is {weight!r}: "
                            "every weight must be a number above 0 (drop a level to weigh it 0)")
        parsed[level] = float(weight)
    total = sum(parsed.values())
    if abs(total - 1.0) > MIX_TOLERANCE:
        raise TuneError(f"tune_traffic_mix weights sum to {total:g}, not 1 (within "
                        f"{MIX_TOLERANCE:g}): give each concurrency its share of the traffic, "
                        "e.g. {1: 0.5, 8: 0.3, 32: 0.2}")
    return dict(sorted(parsed.items()))


def check_settings(settings: dict[str, Any]) -> None:
    """The ranking must be computable from what the sweep benches: refuse before any restart."""
    benched = [int(c) for c in settings.get("bench_concurrency") or []]
    mix = parse_mix(settings.get("traffic_mix"), benched)
    concurrency = settings.get("concurrency")
    if not mix and concurrency is not None and int(concurrency) not in benched:
        raise TuneError(f"tune_concurrency {concurrency} is not benched (tune_bench_concurrency "
                        f"is {benched}); add it to tune_bench_concurrency")
