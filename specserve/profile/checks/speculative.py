"""Speculative decoding: the algorithm must match the drafter, and the drafter must fit the target.

The seeds lost days to `--speculative-algorithm EAGLE` with an EAGLE-3 drafter: SGLang only turns
on aux hidden-state capture for the exact value EAGLE3, so the drafter silently received 7168-wide
final-layer states and `accept len` sat at 1.00. These checks refuse that before anything starts.
"""

from __future__ import annotations

from specserve.profile.checks.adaptive import adaptive_runs, check_adaptive
from specserve.profile.checks.context import ModelContext
from specserve.profile.hfconfig import ModelConfig
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Drafter, Profile
from specserve.profile.sglang import Contract, speculative_running_cap

NEEDS_DRAFT_MODEL: frozenset[str] = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})
TREE_PARAMS: tuple[str, ...] = ("num_steps", "eagle_topk", "num_draft_tokens")
# SGLang's llama_eagle3 fc layer takes exactly three concatenated target hidden states.
EAGLE3_AUX_LAYERS = 3


def _is_eagle3_arch(cfg: ModelConfig, contract: Contract) -> bool:
    # EAGLE-3 drafter classes share no suffix (LlamaForCausalLMEagle3, Eagle3DeepseekV2ForCausalLM
    # for lightseekorg/kimi-k2.5-eagle3-mla): the list is the target version's model registry.
    return any(a in contract.eagle3_drafter_architectures for a in cfg.architectures)


def _is_eagle2_arch(cfg: ModelConfig, contract: Contract) -> bool:
    return any(a in contract.eagle_drafter_architectures for a in cfg.architectures)


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
    if d.algorithm in NEEDS_DRAFT_MODEL and not d.path:
        issues.append(
            error(
                "drafter.path",
                f"algorithm {d.algorithm} needs a draft model and none is given",
                "set drafter.path to the drafter's directory or hub id",
            )
        )
    if d.algorithm == "NGRAM":
        if d.path:
            issues.append(
                warning(
                    "drafter.path",
                    "NGRAM drafts from an n-gram cache; the draft model path is ignored",
                    "remove drafter.path",
                )
            )
        return issues
    issues += check_adaptive(profile, contract)
    # Adaptive resolution fills an unset top-k (1) and draft tokens (steps + 1) itself.
    if given and len(given) != len(TREE_PARAMS) and not adaptive_runs(profile, contract):
        missing = [n for n in TREE_PARAMS if n not in given]
        issues.append(
            error(
                "drafter." + missing[0],
                f"{', '.join(sorted(given))} set but {', '.join(missing)} not; SGLang then fills "
                "the rest with defaults chosen for a different tree",
                "set num_steps, eagle_topk and num_draft_tokens together (e.g. 3 / 1 / 4), or none",
            )
        )
    steps, drafts = d.num_steps, d.num_draft_tokens
    if d.eagle_topk == 1 and steps is not None and drafts is not None and drafts != steps + 1:
        issues.append(
            error(
                "drafter.num_draft_tokens",
                f"with eagle_topk 1 the draft is a chain of num_steps + 1 = {steps + 1} "
                f"tokens, but num_draft_tokens is {drafts} (SGLang overrides it)",
                f"set num_draft_tokens: {steps + 1}, or raise eagle_topk",
            )
        )
    return issues


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
    eagle3 = _is_eagle3_arch(drafter, contract)
    if eagle3 and spec.algorithm != "EAGLE3":
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
    elif _is_eagle2_arch(drafter, contract) and spec.algorithm == "EAGLE3":
        issues.append(
            error(
                "drafter.algorithm",
                f"the drafter's config.json declares {archs} (an EAGLE / EAGLE-2 drafter, no aux "
                "hidden-state fusion) but the algorithm is EAGLE3",
                "set drafter.algorithm: EAGLE, or use an EAGLE-3 drafter",
            )
        )
    elif spec.algorithm == "EAGLE3" and not eagle3:
        known = ", ".join(sorted(contract.eagle3_drafter_architectures))
        issues.append(
            warning(
                "drafter.algorithm",
                f"algorithm is EAGLE3 but the drafter's config.json declares {archs}, none of "
                f"the EAGLE-3 drafter classes SGLang {contract.version} serves ({known})",
                "check that drafter.path is an EAGLE-3 drafter",
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
