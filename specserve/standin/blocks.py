"""DFLASH and DSPARK, SGLang's block drafters, resolved as SGLang resolves them.

Read from `_handle_dflash` / `_handle_dspark` in sglang/srt/arg_groups/speculative_hook.py (0.5.21
and 0.5.23), `parse_dflash_draft_config` (speculative/dflash_utils.py),
`parse_dspark_draft_config` / `read_draft_checkpoint_config` (dspark_components/dspark_config.py)
and `read_ragged_verify_mode` (speculative/ragged_verify.py). The checks run in upstream's order
and refuse in upstream's words (a ValueError, as upstream raises; args.py turns it into a
ResolutionError). Both handlers start by refusing a device other than CUDA/NPU(/XPU): the
stand-in runs on a CPU on purpose and imitates a CUDA server, so it skips that check.

What a block drafter runs: one draft step of top-k 1 (upstream forces both to 1, with a warning
when given otherwise) that proposes a whole block; the verify window is the draft-token count:
DFLASH's block size, DSPARK's gamma + 1.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specserve.standin.knobs import sglang_env_bool

BLOCK_ALGORITHMS: tuple[str, ...] = ("DFLASH", "DSPARK")
# RaggedVerifyMode's values (ragged_verify.py, the same in 0.5.21 and 0.5.23).
RAGGED_VERIFY_MODES: tuple[str, ...] = ("static", "cap-accept", "compact")
# dflash_utils / dspark_config defaults where the drafter's config says nothing.
DFLASH_DEFAULT_BLOCK_SIZE = 16
DEFAULT_DSPARK_GAMMA = 7
# checkpoint_bundles_dspark_draft: a target config.json with one of these carries the drafter.
DSPARK_BUNDLE_KEYS: tuple[str, ...] = (
    "dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids",
)  # fmt: skip
DSPARK_DRAFT_SUBFOLDER = "dspark"  # 0.5.23's _DSPARK_DRAFT_SUBFOLDER


@dataclass(frozen=True)
class BlockResolution:
    draft_model_path: str
    num_draft_tokens: int


def ragged_verify_mode(env: Mapping[str, str] | None = None) -> str:
    """read_ragged_verify_mode: SGLANG_RAGGED_VERIFY_MODE, default "static", else refused."""
    env = os.environ if env is None else env
    value = env.get("SGLANG_RAGGED_VERIFY_MODE", "static")
    if value not in RAGGED_VERIFY_MODES:
        expected = ", ".join(repr(m) for m in RAGGED_VERIFY_MODES)
        raise ValueError(f"invalid SGLANG_RAGGED_VERIFY_MODE={value!r}; expected one of {expected}")
    return value


def estimate_recorder_on(env: Mapping[str, str] | None = None) -> bool:
    """create_block_accept_estimate_recorder builds DSPARK's block-accept estimator (whose
    `est uncap acc len` the decode line then carries) when a path or an online interval is set."""
    env = os.environ if env is None else env
    raw = env.get("SGLANG_DSPARK_BLOCK_ACCEPT_ONLINE_INTERVAL", "")
    try:
        interval = int(raw) if raw else 0
    except ValueError:
        raise ValueError(f'"{raw}" is not a valid integer value') from None  # EnvInt.parse
    return bool(env.get("SGLANG_DSPARK_BLOCK_ACCEPT_ESTIMATE_PATH")) or interval > 0


def _config(path: str | None) -> dict[str, Any]:
    """`<path>/config.json`; raises where upstream's get_config would (no such file)."""
    if not path:
        raise OSError("no drafter path")
    doc = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{path}/config.json is not a JSON object")
    return doc


def _from_drafter_config(
    read: Callable[[Mapping[str, Any]], int | None], path: str | None, warnings: list[str],
    failure: str,
) -> int | None:
    """`read` of the drafter's config.json; where that fails, None and upstream's warning
    (`failure`, then the error): both handlers catch every failure there."""
    try:
        return read(_config(path))
    except Exception as exc:  # upstream catches every failure here, and so warns
        warnings.append(f"{failure} Error: {exc}")
        return None


def _positive_int(value: Any, field_name: str) -> int | None:
    """dflash_utils._parse_optional_int(min_value=1)."""
    if value is None:
        return None
    try:
        parsed = int(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Invalid {field_name}={value!r}.") from exc
    if parsed < 1:
        raise ValueError(f"{field_name} must be positive, got {parsed}.")
    return parsed


def dflash_block_size(config: Mapping[str, Any]) -> int | None:
    """parse_dflash_draft_config's block size: `dflash_config.block_size`, else the top-level
    `block_size` (current checkpoints). Only this field is read; upstream also validates the
    others (layer ids, mask token, ...), which the stand-in does not."""
    nested = config.get("dflash_config")
    nested = nested if isinstance(nested, dict) else {}
    return _positive_int(nested.get("block_size", config.get("block_size")), "DFLASH block_size")


def dspark_gamma(config: Mapping[str, Any]) -> int | None:
    """parse_dspark_draft_config's gamma: the prefixed `dspark_block_size`, else the DFLASH
    block size (published DSPARK drafters nest it under dflash_config)."""
    prefixed = config.get("dspark_block_size")
    return int(prefixed) if prefixed is not None else dflash_block_size(config)


def attention_dp(ns: argparse.Namespace, version: str) -> bool:
    """Whether the DP-attention checks of the handlers apply. 0.5.21 reads enable_dp_attention
    (DSPARK: with dp_size > 1); 0.5.23 reads the resolved attn_dp_size, which
    --enable-dp-attention --dp-size N makes N."""
    dp_attention = bool(ns.enable_dp_attention) and ns.dp_size > 1
    if version == "0.5.21":
        return dp_attention
    return dp_attention or getattr(ns, "attn_dp_size", 1) > 1


def _steps_topk_one(ns: argparse.Namespace, name: str, warnings: list[str]) -> None:
    """Both handlers force one step of top-k 1, warning when told otherwise."""
    for field in ("num_steps", "eagle_topk"):
        value = getattr(ns, f"speculative_{field}")
        if value is not None and int(value) != 1:
            warnings.append(
                f"{name} only supports speculative_{field} == 1; overriding "
                f"speculative_{field}={value} to 1."
            )


def resolve_dflash(
    ns: argparse.Namespace, version: str, warnings: list[str], env: Mapping[str, str]
) -> BlockResolution:
    """_handle_dflash, device check aside."""
    if version == "0.5.21":
        if ns.enable_dp_attention:
            raise ValueError(
                "Currently DFLASH speculative decoding does not support dp attention on "
                "non-NPU devices."
            )
    elif attention_dp(ns, version):
        if not ns.enable_dp_lm_head:
            raise ValueError("DFLASH with dp attention requires --enable-dp-lm-head.")
        if ns.attn_cp_size != 1:
            raise ValueError("DFLASH with dp attention does not support context parallel.")
        if sglang_env_bool(env, "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION"):
            raise ValueError(
                "DFLASH with dp attention requires SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION=0."
            )
    if ns.pp_size != 1:
        raise ValueError("Currently DFLASH speculative decoding only supports pp_size == 1.")
    draft_path = ns.speculative_draft_model_path
    if draft_path is None:
        raise ValueError(
            "DFLASH speculative decoding requires setting --speculative-draft-model-path."
        )
    _steps_topk_one(ns, "DFLASH", warnings)
    block, draft = ns.speculative_dflash_block_size, ns.speculative_num_draft_tokens
    if block is not None:
        if int(block) <= 0:
            raise ValueError(
                f"DFLASH requires --speculative-dflash-block-size to be positive, got {block}."
            )
        if draft is not None and int(draft) != int(block):
            raise ValueError(
                "Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set "
                "but they differ. For DFLASH they must match. "
                f"speculative_num_draft_tokens={draft}, speculative_dflash_block_size={block}."
            )
        draft = int(block)
    if draft is None:
        # Upstream swallows any failure to read the drafter's config and defaults to 16.
        draft = _from_drafter_config(
            dflash_block_size, draft_path, warnings,
            "Failed to infer DFLASH block_size from draft model config; defaulting "
            "speculative_num_draft_tokens to 16.",
        )  # fmt: skip
        if draft is None:
            draft = DFLASH_DEFAULT_BLOCK_SIZE
            warnings.append(
                f"speculative_num_draft_tokens is not set; defaulting to {draft} for DFLASH."
            )
    window = ns.speculative_draft_window_size
    if window is not None and window < int(draft):
        raise ValueError(
            "--speculative-draft-window-size must be >= --speculative-num-draft-tokens "
            f"(block_size). window_size={window}, block_size={draft}."
        )
    return BlockResolution(draft_path, int(draft))


def _dspark_dp_checks(ns: argparse.Namespace, version: str, env: Mapping[str, str]) -> None:
    if not attention_dp(ns, version):
        return
    if not ns.enable_dp_lm_head:
        raise ValueError("DSpark with dp attention requires --enable-dp-lm-head.")
    backend = ns.moe_a2a_backend
    if backend not in ("none", "megamoe", "mori"):
        raise ValueError(
            "DSpark with dp attention supports moe_a2a_backend 'none' (built-in TP MoE), "
            f"'megamoe', or 'mori', got {backend!r}."
        )
    coordination = version != "0.5.21" and sglang_env_bool(
        env, "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION"
    )
    if (backend != "none" or coordination) and ragged_verify_mode(env) != "static":
        if version == "0.5.21":
            raise ValueError(
                f"DSpark with dp attention + moe_a2a_backend={backend!r} requires "
                "SGLANG_RAGGED_VERIFY_MODE=static."
            )
        raise ValueError(
            "DSpark DP MoE or prefill coordination requires SGLANG_RAGGED_VERIFY_MODE=static."
        )
    if ns.attn_cp_size > 1:
        raise ValueError(
            "DSpark with dp attention does not support context parallel "
            f"(attn_cp_size={ns.attn_cp_size})."
        )
    spec_backend = ns.speculative_moe_a2a_backend
    if spec_backend is not None and spec_backend != backend:
        raise ValueError(
            "DSpark ignores --speculative-moe-a2a-backend; with dp attention it must match the "
            f"target moe_a2a_backend={backend!r} (got {spec_backend!r})."
        )


def _dspark_draft_path(ns: argparse.Namespace, version: str, warnings: list[str]) -> str:
    """The drafter: given, bundled in the target (its config.json has dspark_* keys), in 0.5.23
    a local `<model>/dspark/` subfolder (upstream also asks the Hub; the stand-in does not)."""
    if ns.speculative_draft_model_path is not None:
        return str(ns.speculative_draft_model_path)
    try:
        target = _config(ns.model_path)
    except (OSError, ValueError):
        target = {}
    if any(target.get(key) is not None for key in DSPARK_BUNDLE_KEYS):
        warnings.append(
            "DSpark draft weights are bundled in the target checkpoint; defaulting "
            f"--speculative-draft-model-path to --model-path ({ns.model_path})."
        )
        return str(ns.model_path)
    subfolder = Path(ns.model_path) / DSPARK_DRAFT_SUBFOLDER
    if version != "0.5.21" and (subfolder / "config.json").is_file():
        warnings.append(
            f"DSpark draft found in the target checkpoint's {DSPARK_DRAFT_SUBFOLDER}/ "
            f"subfolder; defaulting --speculative-draft-model-path to {subfolder}."
        )
        return str(subfolder)
    raise ValueError(
        "DSpark dense speculative decoding requires setting --speculative-draft-model-path."
    )


def resolve_dspark(
    ns: argparse.Namespace, version: str, warnings: list[str], env: Mapping[str, str]
) -> BlockResolution:
    """_handle_dspark, device check aside."""
    _dspark_dp_checks(ns, version, env)
    if ns.pp_size != 1 and ns.disaggregation_mode != "prefill":
        raise ValueError(
            "DSpark pipeline parallelism requires PD prefill; "
            "decode and non-disaggregated serving require pp_size == 1."
        )
    draft_path = _dspark_draft_path(ns, version, warnings)
    _steps_topk_one(ns, "DSpark", warnings)
    config_gamma = _from_drafter_config(
        dspark_gamma, draft_path, warnings,
        "Failed to read DSpark draft config; preserving explicit/default gamma resolution.",
    )  # fmt: skip
    block, draft = ns.speculative_dspark_block_size, ns.speculative_num_draft_tokens
    gamma: int | None
    if block is not None:
        if int(block) <= 0:
            raise ValueError(
                f"DSpark requires --speculative-dspark-block-size to be positive, got {block}."
            )
        gamma = int(block)
    else:
        gamma = config_gamma
        if gamma is None and draft is None:
            gamma = DEFAULT_DSPARK_GAMMA
            warnings.append(f"DSpark gamma is not set; defaulting to {gamma}.")
    if gamma is not None:
        window = gamma + 1
        if draft is not None and int(draft) != window:
            raise ValueError(
                "DSpark speculative_num_draft_tokens must equal gamma + 1 "
                f"(= {window} for gamma={gamma}), but got speculative_num_draft_tokens={draft}."
            )
        draft = window
    if draft is None:  # unreachable as upstream is written; kept as upstream keeps it
        raise ValueError(
            "DSpark could not resolve speculative_num_draft_tokens; set "
            "--speculative-dspark-block-size (= gamma)."
        )
    if int(draft) < 2:
        raise ValueError(
            f"DSpark speculative_num_draft_tokens must be >= 2 (= gamma + 1), got {draft}."
        )
    ragged_verify_mode(env)  # upstream reads it last, refusing a value it does not know
    return BlockResolution(draft_path, int(draft))
