"""Parallelism must add up to the GPUs the deployment asks for."""

from __future__ import annotations

from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile


def check_parallelism(profile: Profile) -> list[Issue]:
    par, gpu = profile.parallelism, profile.gpu
    issues: list[Issue] = []
    # Over several nodes the GPU sum and the stand-in's tp are checks/nodes.py's.
    single = profile.nodes.count == 1
    if single and gpu.count > 0 and par.gpus_needed != gpu.count:
        how = "tp" if par.enable_dp_attention else "tp x dp"
        issues.append(
            error(
                "parallelism.tp",
                f"{how} = {par.gpus_needed} GPUs but gpu.count asks for {gpu.count}",
                f"make {how} equal gpu.count (e.g. tp: {gpu.count})",
            )
        )
    if par.enable_dp_attention:
        if par.dp == 1:
            issues.append(
                warning(
                    "parallelism.enable_dp_attention",
                    "DP attention with dp 1 does nothing",
                    "set parallelism.dp > 1 or turn enable_dp_attention off",
                )
            )
        elif par.tp % par.dp:
            issues.append(
                error(
                    "parallelism.dp",
                    f"with DP attention dp ({par.dp}) must divide tp ({par.tp})",
                    "choose dp among the divisors of tp",
                )
            )
    if par.ep not in (1, par.tp):
        issues.append(
            warning(
                "parallelism.ep",
                f"ep {par.ep} is neither 1 nor tp ({par.tp}); SGLang's MoE expert parallelism "
                "runs inside the TP group",
                f"set ep: {par.tp} for expert parallelism, or 1",
            )
        )
    if single and gpu.count == 0 and par.tp != 1:
        issues.append(
            error(
                "parallelism.tp",
                f"gpu.count is 0 (CPU stand-in) but tp is {par.tp}",
                "set tp: 1 for the CPU stand-in",
            )
        )
    return issues
