"""Speculative decoding: the algorithm must match the drafter, and the drafter must fit the target.

The first hand deployment (the field notes) lost days to `--speculative-algorithm EAGLE` with an
EAGLE-3 drafter: SGLang only turns on aux hidden-state capture for the exact value EAGLE3, so the
drafter silently received 7168-wide final-layer states and `accept len` sat at 1.00. These checks
refuse that before anything starts.
"""

from __future__ import annotations

from specserve.profile.adaptive import adaptive_runs
from specserve.profile.algorithms import BLOCK_ALGORITHMS, FROZEN_KV_MTP_DRAFTERS
from specserve.profile.checks.adaptive import check_adaptive
from specserve.profile.checks.context import ModelContext
from specserve.profile.checks.uno import stray_uno_lora, uno_issues
from specserve.profile.hfconfig import ModelConfig
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Drafter, Profile
from specserve.profile.sglang import Contract, speculative_running_cap
from specserve.profile.tree import architecture_dependent, block_draft_tokens
from specserve.upstream.contract import DRAFTER_ALGORITHMS

NEEDS_DRAFT_MODEL: frozenset[str] = frozenset({"EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP"})
# Each block drafter's own size field (the other algorithms never read it) and the name SGLang's
# messages give the algorithm.
BLOCK_SIZE_FIELD: dict[str, str] = {"DFLASH": "dflash_block_size", "DSPARK": "dspark_block_size"}
_SGLANG_NAME: dict[str, str] = {"DFLASH": "DFLASH", "DSPARK": "DSpark"}
# What `_handle_dflash` / `_handle_dspark` use when neither the block size nor the draft-token
# count is given and the drafter's config.json has no block size (DSPARK: DEFAULT_DSPARK_GAMMA).
BLOCK_DEFAULT: dict[str, int] = {"DFLASH": 16, "DSPARK": 7}
DP_LM_HEAD_FLAG = "--enable-dp-lm-head"
# NGRAM's own fields (fields.py) and the max BFS breadth SGLang defaults to (fields/spec.py).
NGRAM_KNOBS: tuple[str, ...] = (
    "ngram_min_bfs_breadth",
    "ngram_max_bfs_breadth",
    "ngram_match_type",
    "ngram_max_trie_depth",
    "ngram_capacity",
)
NGRAM_DEFAULT_MAX_BFS_BREADTH = 10
TREE_PARAMS: tuple[str, ...] = ("num_steps", "eagle_topk", "num_draft_tokens")
# SGLang's llama_eagle3 fc layer takes exactly three concatenated target hidden states.
EAGLE3_AUX_LAYERS = 3


def _params_set(d: Drafter) -> dict[str, int]:
    return {name: v for name in TREE_PARAMS if (v := getattr(d, name)) is not None}


def _running_cap_issues(profile: Profile, contract: Contract) -> list[Issue]:
    spec = profile.speculative
    if spec is None or profile.server.max_running_requests is not None:
        return []
    cap = speculative_running_cap(contract, spec.algorithm)
    if cap is None:
        return []
    return [
        warning(
            "server.max_running_requests",
            f"unset with {spec.algorithm}: SGLang {contract.version} then caps running requests "
            f"at {cap} (speculative_hook.py) while a non-speculative run has no such cap, so "
            f"speed comparisons above {cap} concurrent requests are not like for like",
            f"set server.max_running_requests explicitly (e.g. {cap}, SGLang's speculative "
            "default); the baseline run uses the same value",
        )
    ]


# What _handle_eagle_family (arg_groups/speculative_hook.py, 0.5.21 and 0.5.23) does with a tree
# the profile sets only part of; tests/contract/test_partial_tree.py resolves each case.
_TOPK_COMPARED = "TypeError: '>' not supported between instances of 'NoneType' and 'int'"


def _partial_tree_issue(d: Drafter, contract: Contract) -> Issue:
    given = _params_set(d)
    missing = [n for n in TREE_PARAMS if n not in given]
    version = contract.version
    fix = "set num_steps, eagle_topk and num_draft_tokens together (e.g. 3 / 1 / 4), or none"
    if d.num_steps is None:
        what = (
            f"SGLang {version} refuses to start: with num_steps unset it asserts that "
            "eagle_topk and num_draft_tokens are unset too (an AssertionError with no message) "
            "before choosing its own tree"
        )
    elif d.eagle_topk is None:
        what = (
            f"SGLang {version} fails at start with {_TOPK_COMPARED} (it compares the unset "
            "top-k with 1)"
        )
    elif d.eagle_topk == 1:
        what = (
            f"SGLang {version} then sets num_draft_tokens to num_steps + 1 = {d.num_steps + 1} "
            "itself (a chain), which the profile does not say"
        )
        fix = f"set drafter.num_draft_tokens: {d.num_steps + 1}"
    else:
        what = (
            f"SGLang {version} leaves num_draft_tokens unset (None: resolution fills it only "
            f"for a top-k 1 chain) for a tree of top-k {d.eagle_topk}"
        )
    return error(
        "drafter." + missing[0],
        f"{', '.join(sorted(given))} set but {', '.join(missing)} not: {what}",
        fix,
    )


def check_speculative(profile: Profile, contract: Contract) -> list[Issue]:
    d = profile.drafter
    if d is None:
        return []
    issues: list[Issue] = _running_cap_issues(profile, contract)
    given = _params_set(d)
    if not d.enabled:
        if given or d.path:
            issues.append(
                error(
                    "drafter.algorithm",
                    "algorithm is none but drafter.path / speculative parameters are set; "
                    "they would be silently ignored",
                    "set the algorithm (EAGLE3 for an EAGLE-3 drafter) or remove the drafter block",
                )
            )
        return issues
    issues += _stray_block_sizes(d) + _stray_ngram_knobs(d) + stray_uno_lora(d)
    if d.algorithm == "UNO":
        return issues + check_adaptive(profile, contract) + uno_issues(profile, contract)
    if d.algorithm in BLOCK_ALGORITHMS:
        return issues + _block_issues(profile, contract)
    if d.algorithm in NEEDS_DRAFT_MODEL and not d.path:
        issues.append(
            error(
                "drafter.path",
                f"algorithm {d.algorithm} needs a draft model and none is given",
                "set drafter.path to the drafter's directory or hub id",
            )
        )
    # Adaptive first: SGLang turns it off for NGRAM as for any algorithm but EAGLE / EAGLE3.
    issues += check_adaptive(profile, contract)
    if d.algorithm == "NGRAM":
        return issues + _ngram_issues(d, contract)
    # Adaptive resolution fills an unset top-k (1) and draft tokens (steps + 1) itself.
    if given and len(given) != len(TREE_PARAMS) and not adaptive_runs(profile, contract):
        issues.append(_partial_tree_issue(d, contract))
    if d.algorithm == "FROZEN_KV_MTP":
        issues += _frozen_kv_mtp_tree_issues(d, contract)
    steps, drafts = d.num_steps, d.num_draft_tokens
    if d.eagle_topk == 1 and steps is not None and drafts is not None and drafts != steps + 1:
        does = (
            "SGLang's Frozen-KV MTP worker takes it as given and picks num_draft_tokens - 1 of "
            "the num_steps drafted tokens (organize_draft_results)"
            if d.algorithm == "FROZEN_KV_MTP"
            else "SGLang overrides it"
        )
        issues.append(
            error(
                "drafter.num_draft_tokens",
                f"with eagle_topk 1 the draft is a chain of num_steps + 1 = {steps + 1} "
                f"tokens, but num_draft_tokens is {drafts} ({does})",
                f"set num_draft_tokens: {steps + 1}, or raise eagle_topk",
            )
        )
    return issues


def _frozen_kv_mtp_tree_issues(d: Drafter, contract: Contract) -> list[Issue]:
    """`_handle_frozen_kv_mtp` (0.5.21, 0.5.23) sets only the 48-request cap and turns mixed
    chunked prefill off: the tree is the profile's or none, and the worker reads all three."""
    if not _params_set(d):
        return [
            error(
                "drafter.num_steps",
                f"unset with FROZEN_KV_MTP: SGLang {contract.version} leaves "
                "speculative_num_steps, speculative_eagle_topk and "
                "speculative_num_draft_tokens unset for it (_handle_frozen_kv_mtp picks no "
                "tree, unlike the EAGLE family's per-architecture defaults), and its worker "
                "(speculative/frozen_kv_mtp_worker_v2.py) drafts num_steps tokens",
                "set drafter.num_steps, eagle_topk and num_draft_tokens (e.g. 3, 1, 4)",
            )
        ]
    if d.eagle_topk is not None and d.eagle_topk > 1:
        return [
            warning(
                "drafter.eagle_topk",
                f"{d.eagle_topk} with FROZEN_KV_MTP: SGLang's worker then needs a triton or "
                'trtllm_mha draft attention backend and refuses any other at start ("Frozen-KV '
                'MTP topk > 1 currently supports triton and trtllm_mha attention backends, got '
                '<backend>.")',
                "set eagle_topk: 1, or pick one of those backends in server.extra_args "
                "(--speculative-draft-attention-backend)",
            )
        ]
    return []


def _frozen_kv_mtp_issue(algorithm: str, architecture: str, version: str) -> Issue:
    """A Gemma-4 assistant drafter given another algorithm than FROZEN_KV_MTP: the profile says
    what runs."""
    if algorithm in ("EAGLE", "NEXTN"):
        problem = (
            f"the drafter's config.json declares {architecture}: SGLang {version} runs it as "
            f'FROZEN_KV_MTP, not {algorithm}, saying so only in an info log ("Detected '
            "Gemma4AssistantForCausalLM draft; promoting --speculative-algorithm "
            f'{algorithm} to FROZEN_KV_MTP."), and leaves its draft tree unset'
        )
    elif algorithm == "EAGLE3":
        problem = (
            f"the drafter's config.json declares {architecture}: SGLang {version} refuses to "
            'start: "Gemma4AssistantForCausalLM draft requires --speculative-algorithm NEXTN or '
            'EAGLE; EAGLE3 is not supported for this draft architecture."'
        )
    else:
        problem = (
            f"the drafter's config.json declares {architecture}, a Gemma-4 assistant drafter "
            f"that SGLang {version} runs only as FROZEN_KV_MTP (given EAGLE or NEXTN), not as "
            f"{algorithm}"
        )
    return error(
        "drafter.algorithm",
        problem,
        "set drafter.algorithm: FROZEN_KV_MTP (with its tree: num_steps, eagle_topk, "
        "num_draft_tokens), or use a drafter for " + algorithm,
    )


def _ngram_issues(d: Drafter, contract: Contract) -> list[Issue]:
    """NGRAM: what `_handle_ngram` (0.5.21 and 0.5.23) does with the EAGLE fields, and the draft
    model path nothing of NGRAM loads (speculative/ngram_worker.py drafts from its cache)."""
    version = contract.version
    issues: list[Issue] = []
    if d.path:
        issues.append(
            error(
                "drafter.path",
                f"NGRAM drafts from an n-gram cache of the tokens served: SGLang {version} loads "
                "no draft model and ignores the path silently (its resolution only reads the "
                "directory's config.json, failing where it has none)",
                "remove drafter.path",
            )
        )
    breadth = d.ngram_max_bfs_breadth or NGRAM_DEFAULT_MAX_BFS_BREADTH
    if d.eagle_topk is not None and d.eagle_topk != breadth:
        issues.append(
            error(
                "drafter.eagle_topk",
                f"{d.eagle_topk} with NGRAM: SGLang {version} replaces the top-k with "
                f"--speculative-ngram-max-bfs-breadth ({breadth}) without a word "
                "(`_handle_ngram`)",
                "remove drafter.eagle_topk; set drafter.ngram_max_bfs_breadth for the branches",
            )
        )
    return issues


def _stray_ngram_knobs(d: Drafter) -> list[Issue]:
    """NGRAM's cache knobs given to another algorithm: only NGRAM reads them."""
    if d.algorithm == "NGRAM":
        return []
    return [
        error(
            f"drafter.{name}",
            f"{value} with {d.algorithm}: only SGLang's NGRAM reads "
            f"--speculative-{name.replace('_', '-')} (`_handle_ngram`, ngram_worker.py); "
            f"{d.algorithm} ignores it silently",
            f"remove drafter.{name}, or set drafter.algorithm: NGRAM",
        )
        for name in NGRAM_KNOBS
        if (value := getattr(d, name)) is not None
    ]


def _stray_block_sizes(d: Drafter) -> list[Issue]:
    """A block size given to another algorithm: only its own handler reads it."""
    issues: list[Issue] = []
    for algorithm, name in BLOCK_SIZE_FIELD.items():
        value = getattr(d, name)
        if value is not None and d.algorithm != algorithm:
            flag = "--speculative-" + name.replace("_", "-")
            issues.append(
                error(
                    f"drafter.{name}",
                    f"{value} with {d.algorithm}: only SGLang's {algorithm} reads {flag} "
                    f'("{algorithm} only." in its help); {d.algorithm} ignores it silently',
                    f"remove drafter.{name}, or set drafter.algorithm: {algorithm}",
                )
            )
    return issues


def _block_issues(profile: Profile, contract: Contract) -> list[Issue]:
    """DFLASH / DSPARK: what `_handle_dflash` / `_handle_dspark` (arg_groups/speculative_hook.py,
    0.5.21 and 0.5.23) refuse, and what they change with only a log warning; in their words."""
    d = profile.speculative
    assert d is not None
    algorithm, version = d.algorithm, contract.version
    name = _SGLANG_NAME[algorithm]
    issues: list[Issue] = check_adaptive(profile, contract)
    if not d.path:
        issues.append(_block_path_issue(algorithm, version))
    for field in ("num_steps", "eagle_topk"):
        value = getattr(d, field)
        if value is not None and value != 1:
            dest = f"speculative_{field}"
            issues.append(
                error(
                    f"drafter.{field}",
                    f"{value} with {algorithm}: SGLang {version} runs one draft step of top-k 1 "
                    f'and overrides it, saying so only in a log warning: "{name} only supports '
                    f'{dest} == 1; overriding {dest}={value} to 1."',
                    f"remove drafter.{field} ({algorithm} drafts a whole block in one step)",
                )
            )
    draft = d.num_draft_tokens
    if algorithm == "DFLASH":
        block = d.dflash_block_size
        if block is not None and draft is not None and draft != block:
            issues.append(
                error(
                    "drafter.num_draft_tokens",
                    f'SGLang {version} refuses to start: "Both --speculative-num-draft-tokens and '
                    "--speculative-dflash-block-size are set but they differ. For DFLASH they "
                    f'must match." (num_draft_tokens {draft}, dflash_block_size {block})',
                    f"remove drafter.num_draft_tokens (the block size is the count), or set it "
                    f"to {block}",
                )
            )
    else:
        block = d.dspark_block_size
        if block is not None and draft is not None and draft != block + 1:
            issues.append(
                error(
                    "drafter.num_draft_tokens",
                    f'SGLang {version} refuses to start: "DSpark speculative_num_draft_tokens '
                    f"must equal gamma + 1 (= {block + 1} for gamma={block}), but got "
                    f'speculative_num_draft_tokens={draft}."',
                    f"remove drafter.num_draft_tokens, or set it to {block + 1}",
                )
            )
        elif block is None and draft is not None and draft < 2:
            issues.append(
                error(
                    "drafter.num_draft_tokens",
                    f'SGLang {version} refuses to start: "DSpark speculative_num_draft_tokens '
                    f'must be >= 2 (= gamma + 1), got {draft}."',
                    "set drafter.dspark_block_size (gamma) instead",
                )
            )
    return issues + _block_dp_issues(profile, contract)


def _block_path_issue(algorithm: str, version: str) -> Issue:
    if algorithm == "DFLASH":
        return error(
            "drafter.path",
            f'unset: SGLang {version} refuses to start: "DFLASH speculative decoding requires '
            'setting --speculative-draft-model-path."',
            "set drafter.path to the DFLASH drafter's directory or hub id",
        )
    where = "dspark_* keys in its config.json"
    if version != "0.5.21":  # 0.5.23 also looks for a dspark/ subfolder of the target
        where += " or a dspark/ subfolder"
    return error(
        "drafter.path",
        f"unset: SGLang {version} then takes the draft from the target checkpoint only where "
        f'that bundles one ({where}), and otherwise refuses to start: "DSpark dense '
        'speculative decoding requires setting --speculative-draft-model-path."; the profile '
        "names the drafter so that check can read its config",
        "set drafter.path (target.path itself for a checkpoint that bundles its DSpark draft)",
    )


def _block_dp_issues(profile: Profile, contract: Contract) -> list[Issue]:
    par = profile.parallelism
    algorithm, version = profile.speculative.algorithm, contract.version  # type: ignore[union-attr]
    lm_head = any(a == DP_LM_HEAD_FLAG for a in profile.server.extra_args)
    if not par.enable_dp_attention:
        return []
    if algorithm == "DFLASH" and version == "0.5.21":
        problem = (
            "Currently DFLASH speculative decoding does not support dp attention on non-NPU "
            "devices."
        )
        fix = "turn parallelism.enable_dp_attention off, or target SGLang 0.5.23"
    elif lm_head or (algorithm == "DSPARK" and par.dp == 1):
        return []  # DSPARK's DP checks apply from an attention-DP size of 2
    else:
        problem = f"{_SGLANG_NAME[algorithm]} with dp attention requires {DP_LM_HEAD_FLAG}."
        fix = f"add {DP_LM_HEAD_FLAG} to server.extra_args, or turn DP attention off"
    return [
        error(
            "parallelism.enable_dp_attention",
            f'with {algorithm}: SGLang {version} refuses to start: "{problem}"',
            fix,
        )
    ]


def drafter_block_size(drafter: ModelConfig, algorithm: str) -> int | None:
    """The block size SGLang reads from a block drafter's config.json (dflash_utils
    `parse_dflash_draft_config`: `dflash_config.block_size`, else a top-level `block_size`;
    DSPARK's gamma: a top-level `dspark_block_size` first); None where it has none."""
    raw = drafter.raw
    nested = raw.get("dflash_config")
    block = (nested if isinstance(nested, dict) else {}).get("block_size", raw.get("block_size"))
    if algorithm == "DSPARK" and raw.get("dspark_block_size") is not None:
        block = raw["dspark_block_size"]
    return block if isinstance(block, int) and not isinstance(block, bool) else None


# model_config.py `_config_draft_model` (0.5.21 and 0.5.23): a DeepSeek-V4 checkpoint carrying
# any of these keys loads as DeepseekV4ForCausalLMDSpark under DSPARK.
_DSPARK_BUNDLE_KEYS = ("dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id",
                       "dspark_target_layer_ids")  # fmt: skip


def _bundles_dspark(drafter: ModelConfig) -> bool:
    return drafter.architectures[:1] == ["DeepseekV4ForCausalLM"] and any(
        drafter.raw.get(k) is not None for k in _DSPARK_BUNDLE_KEYS
    )


def _block_drafter_issues(
    profile: Profile, drafter: ModelConfig, kind: str | None, contract: Contract
) -> list[Issue]:
    """A block algorithm's drafter: one of its registry classes, and its block size against the
    profile's."""
    d = profile.speculative
    assert d is not None
    algorithm, version = d.algorithm, contract.version
    archs = ", ".join(drafter.architectures) or "no architectures"
    if kind is None and not (algorithm == "DSPARK" and _bundles_dspark(drafter)):
        known = ", ".join(sorted(x.architecture for x in contract.block_drafters[algorithm]))
        return [
            error(
                "drafter.algorithm",
                f"algorithm is {algorithm} but the drafter's config.json declares {archs}, none "
                f"of the {algorithm} drafter classes SGLang {version} serves ({known})",
                f"point drafter.path at a {algorithm} drafter (one of {known})",
            )
        ]
    read = drafter_block_size(drafter, algorithm)
    if read is None:
        return []
    if algorithm == "DFLASH":
        count = block_draft_tokens(algorithm, d.dflash_block_size, None, d.num_draft_tokens)
        if count is not None and count != read:
            return [
                warning(
                    "drafter.dflash_block_size",
                    f"{count}, but the drafter's config.json says block_size {read}: SGLang "
                    f'{version} runs {count} and says so only in a log warning: "DFLASH block '
                    f"size mismatch: using speculative_num_draft_tokens={count} but draft "
                    f'config block_size={read}."',
                    f"set drafter.dflash_block_size: {read} (the block the drafter was trained "
                    "with) unless a different window is meant",
                )
            ]
        return []
    if d.dspark_block_size is None and d.num_draft_tokens is not None:
        if d.num_draft_tokens != read + 1:
            return [
                error(
                    "drafter.num_draft_tokens",
                    f"the drafter's config.json gives gamma {read}: SGLang {version} refuses to "
                    'start: "DSpark speculative_num_draft_tokens must equal gamma + 1 '
                    f"(= {read + 1} for gamma={read}), but got "
                    f'speculative_num_draft_tokens={d.num_draft_tokens}."',
                    f"set drafter.dspark_block_size: {read} and remove num_draft_tokens",
                )
            ]
    elif d.dspark_block_size is not None and d.dspark_block_size != read:
        return [
            warning(
                "drafter.dspark_block_size",
                f"{d.dspark_block_size}, but the drafter's config.json gives gamma {read}: "
                f"SGLang {version} runs gamma {d.dspark_block_size} and says so only in a log "
                f'warning: "DSpark gamma mismatch: using gamma={d.dspark_block_size} (from '
                f"speculative_num_draft_tokens={d.dspark_block_size + 1}) but draft config "
                f'block_size={read}."',
                f"set drafter.dspark_block_size: {read} (the gamma the drafter was trained "
                "with) unless a different one is meant",
            )
        ]
    return []


DSPARK_MARKOV_HEAD_TYPES: tuple[str, ...] = ("vanilla", "gated", "rnn")


def _dspark_nested(raw: dict[str, object], version: str) -> dict[str, object]:
    """`_get_dspark_config`: `dspark_config`; from 0.5.23 over `dflash_config`, where published
    DSpark drafters nest their fields (0.5.21 reads `dspark_config` alone)."""
    merged: dict[str, object] = {}
    keys = ("dspark_config",) if version == "0.5.21" else ("dflash_config", "dspark_config")
    for key in keys:
        value = raw.get(key)
        if isinstance(value, dict):
            merged.update(value)
    return merged


def dspark_config_issues(
    raw: dict[str, object], target_vocab: int | None, version: str
) -> list[Issue]:
    """What SGLang's DSpark worker refuses at load in a drafter's config.json
    (dspark_config.py `parse_dspark_draft_config` + `resolve_runtime_config`, called by
    dspark_worker_v2.py). Resolution reads the same file but swallows these errors with a
    warning, so the server gets as far as loading weights before it fails."""
    nested = _dspark_nested(raw, version)
    text = raw.get("text_config")
    text = text if isinstance(text, dict) else raw
    dflash = raw.get("dflash_config")
    dflash = dflash if isinstance(dflash, dict) else {}

    def pick(prefixed: str, key: str, default: object = None) -> object:
        if raw.get(prefixed) is not None:
            return raw[prefixed]
        return nested.get(key, text.get(key, raw.get(key, default)))

    uses_prefixed = any(raw.get(f"dspark_{k}") is not None
                        for k in ("block_size", "markov_rank", "noise_token_id",
                                  "target_layer_ids"))  # fmt: skip
    base_mask = dflash.get("mask_token_id", raw.get("mask_token_id"))
    rank = pick("dspark_markov_rank", "markov_rank", 0)
    head = pick("dspark_markov_head_type", "markov_head_type")
    mask = pick("dspark_noise_token_id", "mask_token_id", base_mask)
    said: str | None = None
    note = ""
    if isinstance(rank, int) and rank < 0:
        said = f"DSpark markov_rank must be >= 0, got {rank}."
    elif not isinstance(rank, int) or rank == 0:
        said = f"DSpark draft requires markov_rank > 0; got markov_rank={rank or 0}."
        if version == "0.5.21" and isinstance(dflash.get("markov_rank"), int):
            note = "; SGLang 0.5.21 does not read dflash_config.markov_rank (0.5.23 does)"
    elif head is None and not uses_prefixed:
        said = "DSpark requires markov_head_type when markov_rank > 0, got None."
    elif head is not None and str(head).lower() not in DSPARK_MARKOV_HEAD_TYPES:
        said = (
            f"Unsupported DSpark markov_head_type={str(head).lower()!r}. "
            f"Supported: {DSPARK_MARKOV_HEAD_TYPES}."
        )
    elif mask is None:
        said = "DSpark requires mask_token_id to be set in the draft model config."
    elif isinstance(mask, int) and target_vocab is not None and mask >= target_vocab:
        said = f"DSpark mask_token_id={mask} is outside the target vocab size {target_vocab}."
    if said is None:
        return []
    return [
        error(
            "drafter.path",
            f'SGLang {version} fails loading this DSpark drafter: "{said}" (its resolution '
            f"reads the same config.json but only logs the error){note}",
            "use a DSpark drafter whose config.json SGLang can run (dspark_config.py)",
        )
    ]


def _block_size_unknown(profile: Profile, ctx: ModelContext, contract: Contract) -> list[Issue]:
    """A block drafter's draft-token count must follow from the profile alone."""
    d = profile.speculative
    assert d is not None
    if block_draft_tokens(d.algorithm, d.dflash_block_size, d.dspark_block_size,
                          d.num_draft_tokens) is not None:  # fmt: skip
        return []
    field = BLOCK_SIZE_FIELD[d.algorithm]
    read = drafter_block_size(ctx.drafter, d.algorithm) if ctx.drafter else None
    default = BLOCK_DEFAULT[d.algorithm]
    if read is not None:
        said = f"; this drafter's says {read}"
        fix = f"set drafter.{field}: {read}"
    else:
        said = ""
        fix = f"set drafter.{field} to the drafter's block size (its config.json's block_size)"
    return [
        error(
            f"drafter.{field}",
            f"unset, and num_draft_tokens too: SGLang {contract.version} then reads the block "
            f"size from the drafter's config.json ({default} where it has none){said}, so the "
            "draft-token count is unknown where the drafter's files are not, and the exporter's "
            "draft-token gauge and draft acceptance, the alert SpecDecodeAcceptAboveDraftTokens "
            "and the gate's accept-length ceiling go without it",
            fix,
        )
    ]


def _aux_layer_issues(drafter: ModelConfig, target_layers: int) -> list[Issue]:
    eagle_cfg = drafter.raw.get("eagle_config")
    ids = eagle_cfg.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle_cfg, dict) else None
    if ids is None:
        # SGLang's default when the drafter does not say: [2, N//2, N-3], always inside N >= 4.
        if target_layers < 4:
            return [
                error(
                    "drafter.path",
                    f"the target has {target_layers} layers; SGLang's default aux layers "
                    "[2, N//2, N-3] do not fit",
                    "use a target with at least 4 layers or a drafter with explicit "
                    "eagle_config.eagle_aux_hidden_state_layer_ids",
                )
            ]
        return []
    issues: list[Issue] = []
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        return [
            error(
                "drafter.path",
                f"eagle_config.eagle_aux_hidden_state_layer_ids is {ids!r}, not a list of integers",
                "fix the drafter's config.json",
            )
        ]
    # SGLang captures the input of layer id+1, so an id is usable only while id + 1 < N.
    bad = [i for i in ids if i < 0 or i + 1 >= target_layers]
    if bad:
        issues.append(
            error(
                "drafter.path",
                f"drafter aux hidden-state layer ids {bad} are outside the target's "
                f"{target_layers} layers (usable ids are 0..{target_layers - 2}); this drafter "
                "was trained for a different target",
                "use the drafter trained for this target model",
            )
        )
    if len(ids) != EAGLE3_AUX_LAYERS:
        issues.append(
            warning(
                "drafter.path",
                f"drafter lists {len(ids)} aux hidden-state layers; SGLang's EAGLE-3 fusion "
                f"layer expects {EAGLE3_AUX_LAYERS}",
                "check that this drafter is a standard EAGLE-3 drafter",
            )
        )
    return issues


def _shape_issues(drafter: ModelConfig, target: ModelConfig) -> list[Issue]:
    issues: list[Issue] = []
    t_hidden = target.int_field("hidden_size")
    d_hidden = drafter.raw.get("target_hidden_size") or drafter.raw.get("hidden_size")
    if t_hidden is not None and isinstance(d_hidden, int) and d_hidden != t_hidden:
        issues.append(
            error(
                "drafter.path",
                f"drafter expects target hidden size {d_hidden} but the target's is {t_hidden}",
                "use the drafter trained for this target model",
            )
        )
    t_vocab = target.int_field("vocab_size")
    d_vocab = drafter.raw.get("vocab_size")
    d_draft_vocab = drafter.raw.get("draft_vocab_size", d_vocab)
    if t_vocab is not None and isinstance(d_draft_vocab, int) and d_draft_vocab > t_vocab:
        issues.append(
            error(
                "drafter.path",
                f"drafter draft_vocab_size {d_draft_vocab} is larger than the target's "
                f"vocab_size {t_vocab}: it can propose token ids the target does not have",
                "use the drafter trained for this target model",
            )
        )
    if t_vocab is not None and isinstance(d_vocab, int) and d_vocab != t_vocab:
        issues.append(
            warning(
                "drafter.path",
                f"drafter vocab_size {d_vocab} differs from the target's {t_vocab}; token ids "
                "may not line up",
                "check that drafter and target share a tokenizer",
            )
        )
    return issues


def check_drafter_config(profile: Profile, ctx: ModelContext, contract: Contract) -> list[Issue]:
    spec = profile.speculative
    drafter = ctx.drafter
    if spec is None or drafter is None:
        return []
    issues: list[Issue] = []
    archs = ", ".join(drafter.architectures) or "no architectures"
    kind = _drafter_kind(drafter, spec.algorithm, contract)
    frozen = [a for a in drafter.architectures if a in FROZEN_KV_MTP_DRAFTERS]
    if frozen and spec.algorithm == "FROZEN_KV_MTP":
        return []
    if frozen:
        return [_frozen_kv_mtp_issue(spec.algorithm, frozen[0], contract.version)]
    if spec.algorithm == "FROZEN_KV_MTP":
        return [
            error(
                "drafter.algorithm",
                f"FROZEN_KV_MTP but the drafter's config.json declares {archs}: SGLang "
                f"{contract.version} runs FROZEN_KV_MTP with a Gemma-4 assistant drafter "
                f"({', '.join(FROZEN_KV_MTP_DRAFTERS)}), the only kind it promotes to it",
                "point drafter.path at a Gemma-4 assistant drafter, or pick the algorithm for "
                "this drafter",
            )
        ]
    if spec.algorithm in BLOCK_ALGORITHMS:
        if kind in (None, spec.algorithm):
            issues = _block_drafter_issues(profile, drafter, kind, contract)
            if spec.algorithm == "DSPARK":
                vocab = ctx.target.int_field("vocab_size") if ctx.target else None
                broken = dspark_config_issues(drafter.raw, vocab, contract.version)
                if broken:  # resolution then drops the gamma cross-check: SGLang refuses none
                    issues = [i for i in issues if i.field != "drafter.num_draft_tokens"]
                issues += broken
            return issues
        assert kind is not None
        return [_other_family_issue(spec.algorithm, archs, kind, drafter, contract)]
    if kind == "EAGLE3" and spec.algorithm != "EAGLE3":
        issues.append(
            error(
                "drafter.algorithm",
                f"the drafter's config.json declares {archs} (an EAGLE-3 drafter) but the "
                f"algorithm is {spec.algorithm}; only EAGLE3 makes SGLang capture the target's aux "
                "hidden states, otherwise the fusion layer is skipped silently and accept "
                "length stays at 1.00",
                "set drafter.algorithm: EAGLE3",
            )
        )
    elif kind == "EAGLE" and spec.algorithm == "EAGLE3":
        issues.append(
            error(
                "drafter.algorithm",
                f"the drafter's config.json declares {archs} (an EAGLE / EAGLE-2 drafter, no aux "
                "hidden-state fusion) but the algorithm is EAGLE3",
                "set drafter.algorithm: EAGLE, or use an EAGLE-3 drafter",
            )
        )
    elif kind is not None and spec.algorithm not in DRAFTER_ALGORITHMS[kind]:
        issues.append(_other_family_issue(spec.algorithm, archs, kind, drafter, contract))
    elif kind is None and spec.algorithm in ("EAGLE", "NEXTN", "STANDALONE"):
        issues += _no_draft_class_issues(spec.algorithm, drafter, archs, contract)
    elif spec.algorithm == "EAGLE3" and kind is None:
        known = ", ".join(sorted(contract.eagle3_drafter_architectures))
        issues.append(
            error(
                "drafter.algorithm",
                f"algorithm is EAGLE3 but the drafter's config.json declares {archs}, none of "
                f"the EAGLE-3 drafter classes SGLang {contract.version} serves ({known}): "
                "SGLang would load it without the aux hidden-state fusion EAGLE3 needs",
                f"point drafter.path at an EAGLE-3 drafter (one of {known})",
            )
        )
    target = ctx.target
    if target is None:
        return issues
    layers = target.int_field("num_hidden_layers")
    if spec.algorithm == "EAGLE3" and layers is not None:
        issues += _aux_layer_issues(drafter, layers)
    if spec.algorithm in ("EAGLE", "EAGLE3"):
        issues += _shape_issues(drafter, target)
    return issues


def _model_type(drafter: ModelConfig) -> str | None:
    value = drafter.text.get("model_type", drafter.raw.get("model_type"))
    return value if isinstance(value, str) else None


def _drafter_kind(drafter: ModelConfig, algorithm: str, contract: Contract) -> str | None:
    """The registry family of what SGLang loads for this drafter: its own class, or (a target
    given as drafter) the class `_config_draft_model` rewrites architectures[0] to; where that
    rewrite offers several, the one the algorithm takes."""
    own = next(filter(None, map(contract.drafter_kind, drafter.architectures)), None)
    if own is not None or not drafter.architectures:
        return own
    loaded = contract.draft_classes(drafter.architectures[0], _model_type(drafter))
    kinds = [k for c in loaded if (k := contract.drafter_kind(c)) is not None]
    # DeepseekV4 -> DSpark needs the dspark keys in its config (checkpoint_bundles_dspark_draft).
    kinds = [k for k in kinds if k != "DSPARK" or _bundles_dspark(drafter)]
    return next((k for k in kinds if algorithm in DRAFTER_ALGORITHMS[k]), next(iter(kinds), None))


def _no_draft_class_issues(
    algorithm: str, drafter: ModelConfig, archs: str, contract: Contract
) -> list[Issue]:
    """EAGLE / NEXTN / STANDALONE with a drafter of no draft family: either a class SGLang does
    not serve (its registry falls back to the Transformers backend) or, for EAGLE / NEXTN, a
    plain model SGLang serves as a target."""
    v = contract.version
    eagle = sorted(contract.eagle_drafter_architectures)
    mtp = sorted(contract.mtp_drafter_architectures)
    takes = (
        f"EAGLE / NEXTN take an EAGLE drafter ({', '.join(eagle)}), MTP / NextN layers "
        f"({', '.join(mtp)}), or a target SGLang loads as its own MTP layers "
        f"({', '.join(contract.draft_class_sources())})"
    )
    if not any(a in contract.served_architectures for a in drafter.architectures):
        if algorithm == "STANDALONE":
            return [
                error(
                    "drafter.path",
                    f"the drafter's config.json declares {archs}, no class SGLang {v} serves: "
                    "its model registry falls back to TransformersForCausalLM "
                    "(srt/models/registry.py _normalize_archs), which loads only what Hugging "
                    "Face transformers knows, without SGLang's own kernels",
                    "use a draft LM whose architectures[0] SGLang serves (e.g. "
                    "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)",
                )
            ]
        return [
            error(
                "drafter.path",
                f"the drafter's config.json declares {archs}, no class SGLang {v} serves: its "
                "model registry falls back to TransformersForCausalLM (srt/models/registry.py "
                f"_normalize_archs), a plain causal LM that {algorithm} would draft with from "
                f"token ids alone; {takes}",
                "point drafter.path at one of those, or set drafter.algorithm: STANDALONE for "
                "a small draft LM",
            )
        ]
    if algorithm == "STANDALONE":
        return []
    return [
        error(
            "drafter.algorithm",
            f"the drafter's config.json declares {archs}, a model SGLang {v} serves as a target, "
            f"not a draft class: given {algorithm} its EAGLE worker loads it as the draft model, "
            "swaps in the target's embedding and LM head (speculative/eagle_worker_v2.py) and "
            f"drafts from token ids alone, without the target's hidden states; {takes}",
            "set drafter.algorithm: STANDALONE for a small draft LM, or point drafter.path at "
            "an EAGLE drafter or MTP layers",
        )
    ]


def check_tree_known(profile: Profile, ctx: ModelContext, contract: Contract) -> list[Issue]:
    """The draft-token count must follow from the profile alone (specserve/profile/tree.py): a
    tree left to SGLang needs target.architecture, which must be config.json's where that is
    readable (SGLang picks by the real one)."""
    declared = profile.target.architecture
    real = ctx.target.architectures[0] if ctx.target and ctx.target.architectures else None
    if declared is not None and real is not None and declared != real:
        return [
            error(
                "target.architecture",
                f"{declared} but the target's config.json says {real}",
                f"set target.architecture: {real}",
            )
        ]
    if profile.speculative is not None and profile.speculative.algorithm in BLOCK_ALGORITHMS:
        return _block_size_unknown(profile, ctx, contract)
    if not architecture_dependent(profile) or declared is not None:
        return []
    if real is not None:
        steps, topk, draft = contract.default_tree(real, profile.speculative.algorithm)  # type: ignore[union-attr]
        choice = f"; for {real} SGLang {contract.version} runs steps / top-k / draft tokens "
        choice += f"{steps} / {topk} / {draft}"
        fix = f"set target.architecture: {real}, or set the tree (num_steps: {steps}, "
        fix += f"eagle_topk: {topk}, num_draft_tokens: {draft})"
    else:
        choice = ""
        fix = (
            "set target.architecture to architectures[0] of the target's config.json, or set "
            "drafter.num_steps, eagle_topk and num_draft_tokens"
        )
    return [
        error(
            "target.architecture",
            "unset while the drafter's tree is left to SGLang, which picks it by the target's "
            "architecture: the draft-token count is then unknown where the model's files are "
            "not, and the exporter's draft-token gauge and draft acceptance, the alert "
            f"SpecDecodeAcceptAboveDraftTokens and the gate's accept-length ceiling go without "
            f"it{choice}",
            fix,
        )
    ]


def _other_family_issue(
    algorithm: str, archs: str, kind: str, drafter: ModelConfig, contract: Contract
) -> Issue:
    """A drafter of another algorithm's registry family: named with the algorithm that loads it."""
    takes = DRAFTER_ALGORITHMS[kind]
    module = next(filter(None, map(contract.drafter_module, drafter.architectures)), "?")
    # Every family's algorithm is a profile choice (DRAFTER_ALGORITHMS: the first is canonical).
    fix = f"set drafter.algorithm: {takes[0]}"
    return error(
        "drafter.algorithm",
        f"the drafter's config.json declares {archs}, a {kind} drafter of SGLang "
        f"{contract.version} ({module}), which {' / '.join(takes)} loads, but the algorithm is "
        f"{algorithm}",
        fix,
    )
