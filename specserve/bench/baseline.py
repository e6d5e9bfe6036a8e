"""A baseline run -> the profile's `baseline` block ({bucket label: tok/s}).

The exporter's alert compares the server's decode-log `gen throughput` per concurrency bucket with
this mapping, so the preferred number is that same quantity as the exporter saw it during the
level (`exporter.gen_throughput_tok_s[bucket]`); the client-side aggregate tok/s is the fallback
when the run had no exporter. The block's `source` says which one each bucket used.

Given the profile the baseline server ran (and the image), the block also records what it was
measured with (specserve/profile/likeness.py), so `check` and the exporter can refuse to judge a
speculative profile against a baseline measured under other settings. The server's own
`/server_info` (in the result) is the second witness: its SGLang version is what gets recorded,
and where it reports the tensor parallelism or the running-request cap it resolved, those must be
the profile's, or the run measured something else than the profile says.
"""

from __future__ import annotations

from typing import Any

from specserve.bench.settings import METRICS
from specserve.buckets import BUCKET_LABELS, concurrency_bucket, validate_bucket_label
from specserve.profile.likeness import SETTINGS, profile_settings
from specserve.profile.model import Profile

# Recorded setting -> the resolved ServerArgs field /server_info reports it as.
_SERVER_INFO: dict[str, str] = {"tp": "tp_size", "max_running_requests": "max_running_requests"}


class BaselineError(ValueError):
    """The result cannot serve as a baseline; the message says why and what to do."""


def _level_value(level: dict[str, Any], bucket: str, metric: str) -> tuple[float | None, str]:
    server = ((level.get("exporter") or {}).get("gen_throughput_tok_s") or {}).get(bucket)
    if metric in ("auto", "exporter") and server is not None:
        return float(server), "exporter"
    if metric in ("auto", "client") and level["agg_tok_s"] is not None:
        return float(level["agg_tok_s"]), "client"
    return None, metric


def baseline_mapping(
    result: dict[str, Any], metric: str = "auto", allow_speculative: bool = False
) -> tuple[dict[str, float], dict[str, str]]:
    """({bucket: tok/s}, {bucket: "exporter"|"client"}) from a validated result.

    Several levels in one bucket (3 and 4 both go to "4"): the highest level wins, being the
    closest to the bucket's bound, which is what a full bucket looks like in production.
    """
    if metric not in METRICS:
        raise BaselineError(f"--metric must be one of {', '.join(METRICS)}, got {metric!r}")
    spec = result["server"]["speculative"]
    if spec and not allow_speculative:
        raise BaselineError(
            f"this result was measured with speculative decoding ({spec['algorithm']}); the "
            f"baseline must come from the same server started without --speculative-algorithm "
            f"(pass --allow-speculative to use it anyway)"
        )
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    chosen: dict[str, int] = {}
    for level in result["levels"]:
        concurrency = level["concurrency"]
        bucket = validate_bucket_label(concurrency_bucket(concurrency))
        value, source = _level_value(level, bucket, metric)
        if value is None or value <= 0 or chosen.get(bucket, 0) > concurrency:
            continue
        values[bucket] = round(value, 1)
        sources[bucket] = source
        chosen[bucket] = concurrency
    if not values:
        raise BaselineError(
            f"no level of this result has a usable {metric} throughput (every level failed, "
            f"or --metric exporter on a run without --exporter-url)"
        )
    ordered = dict(sorted(values.items(), key=lambda kv: BUCKET_LABELS.index(kv[0])))
    return ordered, sources


def measured_with(
    result: dict[str, Any], profile: Profile, image: str | None = None
) -> dict[str, Any]:
    """The settings the baseline server of `result` ran under: `profile`'s (the profile it was
    started from), the SGLang version the server reported, `image` when given."""
    settings = profile_settings(profile, image)
    info = result["server"].get("info") or {}
    for key, reported in _SERVER_INFO.items():
        if reported in info and info[reported] != settings[key]:
            raise BaselineError(
                f"the server reported {reported}={info[reported]!r} but the profile "
                f"{profile.source_path or profile.name} gives {key} {settings[key]!r}: this run "
                f"was not measured with that profile; benchmark the server started from it"
            )
    if info.get("version"):
        settings["sglang_version"] = str(info["version"])
    return {key: settings[key] for key in SETTINGS if key in settings}


def baseline_block(
    result: dict[str, Any],
    metric: str = "auto",
    allow_speculative: bool = False,
    profile: Profile | None = None,
    image: str | None = None,
) -> dict[str, Any]:
    """The profile's `baseline:` block, `source` naming the run and the quantity used, and with
    `profile` what it was measured with."""
    values, sources = baseline_mapping(result, metric, allow_speculative)
    used = sorted(set(sources.values()))
    what = {
        "exporter": "server gen throughput per bucket as the exporter saw it",
        "client": "client-side aggregate output tok/s",
    }
    settings = result["settings"]
    source = (
        f"specserve bench {result['started_at']} against {result['url']} "
        f"({result['server']['model']}, {settings['max_tokens']} output tokens, kinds "
        f"{','.join(settings['kinds'])}): {'; '.join(what[u] for u in used)}"
    )
    block: dict[str, Any] = {"gen_throughput_tok_s": values, "source": source}
    if profile is not None:
        block.update(measured_with(result, profile, image))
    return block
