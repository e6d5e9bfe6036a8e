"""Like for like: what a baseline was measured with, and whether a speculative profile matches it.

A baseline is the threshold speculation is judged against (the exporter's alert, the tuning
report's speedups), so it only means something if it was measured under the settings the
speculative server runs with: the same image and SGLang version, target, parallelism, running
request cap, context length, CUDA-graph settings and NCCL preset. `playbooks/baseline.yml` records
them in the profile's `baseline` block (`recorded_settings` of the profile it benchmarked);
`specserve check` (checks/baseline.py) and the exporter compare them with the speculative
profile through `compare`, the one implementation.

`max_running_requests` is the effective value: the profile's own, else the cap SGLang applies
under speculation when it is unset (48, arg_groups/speculative_hook.py); without speculation
SGLang applies none (None: uncapped). The image and the SGLang version are compared only where
the caller knows what the server runs (`specserve check --image`, the SGLang version check
targets); the exporter knows neither unless told.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specserve.profile.model import Profile
from specserve.profile.variants import effective_max_running_requests

# The recorded keys of the `baseline` block (rows `baseline.<key>` of fields.py), in the order
# messages name them, each with the profile field (or deploy setting) it stands for.
SETTINGS: dict[str, str] = {
    "image": "the deploy's server image",
    "sglang_version": "the SGLang version checked for",
    "target": "target.path",
    "tp": "parallelism.tp",
    "dp": "parallelism.dp",
    "ep": "parallelism.ep",
    "max_running_requests": "server.max_running_requests (effective)",
    "context_length": "target.context_length",
    "disable_cuda_graph": "server.disable_cuda_graph",
    "cuda_graph_max_bs": "server.cuda_graph_max_bs",
    "nccl_preset": "nccl.preset",
}
# Compared only when the caller says what the server runs.
_DEPLOY_SETTINGS = ("image", "sglang_version")
FIX = "re-run playbooks/baseline.yml so the baseline is measured with the profile's settings"


def profile_settings(
    profile: Profile, image: str | None = None, sglang_version: str | None = None
) -> dict[str, Any]:
    """The settings `profile` runs under, keyed like the recorded ones; image and SGLang version
    only when given."""
    target = (profile.document.get("target") or {}).get("path") or profile.target.path
    par, server = profile.parallelism, profile.server
    out: dict[str, Any] = {}
    if image is not None:
        out["image"] = image
    if sglang_version is not None:
        out["sglang_version"] = sglang_version
    out.update(
        target=target,
        tp=par.tp,
        dp=par.dp,
        ep=par.ep,
        max_running_requests=effective_max_running_requests(profile, sglang_version),
        context_length=profile.target.context_length,
        disable_cuda_graph=server.disable_cuda_graph,
        cuda_graph_max_bs=server.cuda_graph_max_bs,
        nccl_preset=profile.nccl.preset,
    )
    return out


def recorded_settings(document: Mapping[str, Any]) -> dict[str, Any]:
    """The settings the profile document's `baseline` block records (a key absent: not
    recorded; null is a recorded value: unset / uncapped)."""
    block = document.get("baseline") or {}
    return {key: block[key] for key in SETTINGS if key in block}


@dataclass(frozen=True)
class Difference:
    setting: str
    recorded: Any
    current: Any

    def describe(self) -> str:
        return (
            f"baseline.{self.setting} = {_show(self.recorded)} but {SETTINGS[self.setting]} = "
            f"{_show(self.current)}"
        )


@dataclass(frozen=True)
class Comparison:
    """A speculative profile against its baseline; `applies` is False when there is nothing to
    compare (no speculation, or no baseline numbers)."""

    applies: bool
    differences: tuple[Difference, ...] = ()
    unrecorded: tuple[str, ...] = field(default=())

    @property
    def like_for_like(self) -> bool:
        return not self.differences


def _show(value: Any) -> str:
    return "null" if value is None else repr(value) if isinstance(value, str) else str(value)


def _same(setting: str, recorded: Any, current: Any) -> bool:
    if setting == "sglang_version" and isinstance(recorded, str):
        # The server reports e.g. `0.5.21` (the stand-in `0.5.21+specserve-standin`): the
        # release is what the version check targets; the local label only says who served it.
        return recorded.partition("+")[0] == current
    return bool(recorded == current)


def compare(
    profile: Profile, image: str | None = None, sglang_version: str | None = None
) -> Comparison:
    """`profile`'s baseline against the settings `profile` runs under."""
    if profile.speculative is None or not profile.baseline:
        return Comparison(applies=False)
    recorded = recorded_settings(profile.document)
    current = profile_settings(profile, image, sglang_version)
    differences = tuple(
        Difference(key, recorded[key], current[key])
        for key in SETTINGS
        if key in recorded and key in current and not _same(key, recorded[key], current[key])
    )
    unrecorded = tuple(
        key for key in SETTINGS if key not in recorded and key not in _DEPLOY_SETTINGS
    )
    return Comparison(applies=True, differences=differences, unrecorded=unrecorded)


def refusal(comparison: Comparison) -> str:
    """One message naming every differing setting and the fix (check and exporter alike)."""
    named = "; ".join(d.describe() for d in comparison.differences)
    return (
        f"the baseline was measured under other settings than this speculative profile, so "
        f"comparing them is not like for like: {named}"
    )


def unrecorded_notice(comparison: Comparison) -> str:
    every = len(comparison.unrecorded) == len(SETTINGS) - len(_DEPLOY_SETTINGS)
    what = (
        "records none of the settings it was measured with (written by hand, or by an older "
        "playbooks/baseline.yml)"
        if every
        else "does not record " + ", ".join(f"baseline.{k}" for k in comparison.unrecorded)
    )
    return f"the baseline {what}, so nothing proves it is like for like with this profile"
