"""NCCL preset + overrides and the extra environment."""

from __future__ import annotations

from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile
from specserve.profile.nccl import PRESETS, validate_nccl_env


def check_env(profile: Profile) -> list[Issue]:
    issues: list[Issue] = []
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
    issues += validate_nccl_env(preset.env, topology, field_prefix=f"nccl.preset({preset.name})")
    issues += validate_nccl_env(nccl.overrides, topology, field_prefix="nccl.overrides")
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
