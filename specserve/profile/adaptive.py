"""Whether SGLang keeps `drafter.adaptive` on for a profile (`--speculative-adaptive`).

SGLang's resolution turns adaptive off with nothing but a log warning when the algorithm, top-k
or another feature does not support it (specserve/adaptive.py says which). The tree the server
starts with (tree.py), the facts (facts.py) and the check (checks/adaptive.py) all need the
answer, so it is decided here, below all three.
"""

from __future__ import annotations

from specserve.adaptive import ServerFlags, unsupported_reason
from specserve.profile.model import Profile
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
