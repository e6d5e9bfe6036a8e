"""drafter.adaptive: what SGLang does with `--speculative-adaptive` for this profile.

SGLang's resolution turns adaptive off with nothing but a log warning when the algorithm, top-k
or another feature does not support it (specserve/adaptive.py says which; whether it stays on
is profile/adaptive.py's answer), and fails at start when the steps are not one of the config's
candidates. Both are said here before anything starts, in SGLang's own words.
"""

from __future__ import annotations

from specserve.adaptive import (
    AdaptiveConfigError,
    candidate_steps,
    load_config,
    start_steps,
    unsupported_reason,
)
from specserve.profile.adaptive import ADAPTIVE_FLAG, server_flags
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Drafter, Profile
from specserve.profile.sglang import Contract


def _off_fix(reason: str) -> str:
    if reason.startswith("speculative_algorithm"):
        return "use EAGLE3 (or EAGLE) with adaptive, or set drafter.adaptive: false"
    if reason.startswith("speculative_eagle_topk"):
        return "set drafter.eagle_topk: 1 (or leave the tree unset), or set drafter.adaptive: false"
    if "DP" in reason or "dp_attention" in reason:
        return "turn parallelism.enable_dp_attention off, or set drafter.adaptive: false"
    return "remove that flag from server.extra_args, or set drafter.adaptive: false"


def _steps_issues(d: Drafter, candidates: list[int]) -> list[Issue]:
    try:
        steps = start_steps(d.num_steps, candidates)
    except ValueError as exc:
        # 0 is a candidate SGLang may switch to, not a start the profile can ask for.
        startable = [c for c in candidates if c >= 1]
        return [
            error(
                "drafter.num_steps",
                f"SGLang refuses to start: {str(exc).partition('. Pass')[0]}",
                f"set drafter.num_steps to one of {startable}, or leave the tree unset (SGLang "
                f"then starts at {candidates[len(candidates) // 2]})",
            )
        ]
    if d.num_draft_tokens is not None and d.num_draft_tokens != steps + 1:
        return [
            error(
                "drafter.num_draft_tokens",
                f"with adaptive speculation SGLang sets draft tokens to steps + 1 = {steps + 1} "
                f"(and changes both at run time), but num_draft_tokens is {d.num_draft_tokens}",
                f"set num_draft_tokens: {steps + 1}, or leave it unset",
            )
        ]
    return []


def check_adaptive(profile: Profile, contract: Contract) -> list[Issue]:
    d = profile.speculative
    if d is None:
        return []
    if not d.adaptive:
        if d.adaptive_config:
            return [
                error(
                    "drafter.adaptive_config",
                    "set while drafter.adaptive is false: SGLang ignores the file",
                    "set drafter.adaptive: true, or remove drafter.adaptive_config",
                )
            ]
        return []
    if contract.option(ADAPTIVE_FLAG) is None:
        return [
            error(
                "drafter.adaptive",
                f"SGLang {contract.version} has no {ADAPTIVE_FLAG}",
                "target SGLang 0.5.21 or 0.5.23, or set drafter.adaptive: false",
            )
        ]
    reason = unsupported_reason(d.algorithm, d.eagle_topk, server_flags(profile), contract.version)
    if reason is not None:
        return [
            error(
                "drafter.adaptive",
                f"SGLang {contract.version} turns adaptive speculation off at start and serves "
                f"the static parameters, saying so only in a log warning: {reason}",
                _off_fix(reason),
            )
        ]
    issues: list[Issue] = []
    try:
        slots = load_config(d.adaptive_config)
    except AdaptiveConfigError as exc:
        if d.adaptive_config is not None and "cannot read" in str(exc):
            # The file may exist only where the server runs (a mounted path): a warning here,
            # while SGLang fails at start without it.
            return [
                warning(
                    "drafter.adaptive_config",
                    f"{exc}; its candidate steps were not checked, and SGLang fails at start "
                    "where the file is missing",
                    "run check where the file is, or put it there",
                )
            ]
        return [
            error(
                "drafter.adaptive_config",
                f"SGLang refuses to start: {exc}",
                "fix the file (specserve/adaptive.py DEFAULT_CONFIG shows SGLang's built-in one)",
            )
        ]
    issues += _steps_issues(d, candidate_steps(slots))
    return issues
