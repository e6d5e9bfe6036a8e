"""NCCL preset + overrides and the extra environment."""

from __future__ import annotations

from specserve.profile.argview import profile_view
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile
from specserve.profile.nccl import PRESETS, SGLANG_OVERWRITES, sglang_overwrites, validate_nccl_env
from specserve.profile.sglang import Contract


def _flags_on(profile: Profile, contract: Contract) -> set[str]:
    """The flags of SGLANG_OVERWRITES the rendered argv turns on."""
    view = profile_view(profile, contract)
    flags = {flag for flags in SGLANG_OVERWRITES.values() for flag in flags}
    return {f for f in flags if view is not None and view[f[2:].replace("-", "_")]}


def check_env(profile: Profile, contract: Contract) -> list[Issue]:
    issues: list[Issue] = []
    overwritten = sglang_overwrites(_flags_on(profile, contract))
    nccl, topology = profile.nccl, profile.gpu.topology
    preset = PRESETS.get(nccl.preset)
    if preset is None:
        return [
            error(
                "nccl.preset",
                f"unknown NCCL preset {nccl.preset!r}",
                f"use one of: {', '.join(PRESETS)}",
            )
        ]
    if preset.topology != "any" and topology != preset.topology:
        make = error if preset.topology == "nvlink" else warning
        issues.append(
            make(
                "nccl.preset",
                f"preset {preset.name} is meant for {preset.topology} but gpu.topology is "
                f"{topology}",
                f"pick a preset for {topology} ('default' fits everything)",
            )
        )
    issues += validate_nccl_env(
        preset.env, topology, f"nccl.preset({preset.name})", overwritten
    )
    issues += validate_nccl_env(nccl.overrides, topology, "nccl.overrides", overwritten)
    for name in profile.env:
        if name.startswith("NCCL_"):
            issues.append(
                error(
                    f"env.{name}",
                    f"{name} set under env: bypasses NCCL validation",
                    f"move it to nccl.overrides.{name}",
                )
            )
    return issues
