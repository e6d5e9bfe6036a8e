"""Which SGLang version a profile is checked and rendered for, and the facts read from its code.

The version decides flags (0.5.23 replaced `--dp-size N --enable-dp-attention` with
`--attn-dp-size N`, removed `--cuda-graph-tc-compiler`), the option table `extra_args` is checked
against, and the EAGLE drafter classes `check` recognises. It comes from, in order: an explicit
option (`specserve check/render --sglang-version`), the image's `SPECSERVE_SGLANG_VERSION`
(docker/sglang/Dockerfile sets it), else the pinned version of versions.yaml. The facts are
`specserve.upstream`'s committed data, extracted from that version's own code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from specserve.profile.algorithms import speculates
from specserve.upstream import PINNED_VERSION, VERIFIED_VERSIONS, sglang_contract
from specserve.upstream import SGLangContract as Contract

__all__ = [
    "VERSION_ENV",
    "Contract",
    "SglangVersionError",
    "continuous_decode_steps_read",
    "resolve_version",
    "sglang_contract",
    "speculative_running_cap",
]

VERSION_ENV = "SPECSERVE_SGLANG_VERSION"

# Which handler of sglang/srt/arg_groups/speculative_hook.py applies each supported algorithm's
# default running-request cap (spec_info.SpeculativeAlgorithm.handle_server_args dispatches;
# NEXTN is an alias of EAGLE).
_CAP_HANDLER: dict[str, str] = {
    "EAGLE": "_handle_eagle_family",
    "EAGLE3": "_handle_eagle_family",
    "NEXTN": "_handle_eagle_family",
    "STANDALONE": "_handle_eagle_family",
    "NGRAM": "_handle_ngram",
    "DFLASH": "_handle_dflash",
    "DSPARK": "_handle_dspark",
    "FROZEN_KV_MTP": "_handle_frozen_kv_mtp",
    # _handle_uno sets no cap: SGLang sizes the running requests from the KV pool, as without
    # speculation (the contract data has no entry for it, so the cap below is None).
    "UNO": "_handle_uno",
}


class SglangVersionError(ValueError):
    """The requested SGLang version has no verified contract data."""


def resolve_version(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The SGLang version to target; SglangVersionError names the verified ones otherwise."""
    env = os.environ if environ is None else environ
    from_env = env.get(VERSION_ENV) or None
    version = explicit or from_env or PINNED_VERSION
    if version not in VERIFIED_VERSIONS:
        source = "--sglang-version" if explicit else VERSION_ENV
        raise SglangVersionError(
            f"SGLang {version} (from {source}) is not a verified version; verified: "
            f"{', '.join(VERIFIED_VERSIONS)}. Fix: target one of those, or add the version "
            "(docs/sglang-contract.md)"
        )
    return version


def speculative_running_cap(contract: Contract, algorithm: str | None) -> int | None:
    """max_running_requests SGLang sets when speculation with `algorithm` is on and it is unset
    (48 for every supported algorithm but UNO in 0.5.21 and 0.5.23); None without speculation
    or a cap."""
    if not speculates(algorithm):
        return None
    by_handler: dict[str, int] = contract.facts["max_running_requests_cap"]["by_handler"]
    handler = _CAP_HANDLER.get(algorithm.upper(), "_handle_eagle_family")
    cap = by_handler.get(handler)
    return int(cap) if cap is not None else None


def continuous_decode_steps_read(contract: Contract) -> bool:
    """Whether any code of that SGLang reads num_continuous_decode_steps (none in 0.5.21/0.5.23:
    the field is declared in arg_groups/fields/schedule.py and listed in field_order.py only)."""
    return bool(contract.facts["num_continuous_decode_steps_readers"])
