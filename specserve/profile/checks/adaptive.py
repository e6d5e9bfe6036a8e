"""drafter.adaptive: what SGLang does with `--speculative-adaptive` for this profile.

SGLang's resolution turns adaptive off with nothing but a log warning when the algorithm, top-k
or another feature does not support it (specserve/adaptive.py says which), and fails at start
when the steps are not one of the config's candidates. Both are decided here before anything
starts, in SGLang's own words.
"""

from __future__ import annotations

from specserve.adaptive import (
    AdaptiveConfigError,
    ServerFlags,
    candidate_steps,
    load_config,
    start_steps,
    unsupported_reason,
)
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Drafter, Profile
from specserve.profile.sglang import Contract
from specserve.upstream import PINNED_VERSION

ADAPTIVE_FLAG = "--speculative-adaptive"
# Features `adaptive_unsupported_reason` refuses that a profile can only turn on in extra_args.
_EXTRA_FLAGS = {
    "multi_layer_eagle": "--enable-multi-layer-eagle",
    "two_batch_overlap": "--enable-two-batch-overlap",
    "pdmux": "--enable-pdmux",
}


def _given(extra_args: tuple[str, ...], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in extra_args)


def server_flags(profile: Profile) -> ServerFlags:
    extra = profile.server.extra_args
    return ServerFlags(
        dp_attention=profile.parallelism.enable_dp_attention,
        **{name: _given(extra, flag) for name, flag in _EXTRA_FLAGS.items()},
    )


def adaptive_kept(profile: Profile) -> bool:
    """Whether SGLang keeps adaptive on for this profile: `_maybe_disable_adaptive` turns it
    off, with a log warning, for the same settings in every verified version (0.5.23 words one
    reason differently; its platform-specific refusals concern no CUDA worker)."""
    d = profile.speculative
    if d is None or not d.adaptive:
        return False
    # The version only picks the wording of the reason, never whether there is one.
    reason = unsupported_reason(d.algorithm, d.eagle_topk, server_flags(profile), PINNED_VERSION)
    return reason is None


def adaptive_runs(profile: Profile, contract: Contract) -> bool:
    """Whether SGLang `contract.version` keeps adaptive on for this profile after resolution."""
    d = profile.speculative
    if d is None or not d.adaptive or contract.option(ADAPTIVE_FLAG) is None:
        return False
    reason = unsupported_reason(d.algorithm, d.eagle_topk, server_flags(profile), contract.version)
    return reason is None


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
