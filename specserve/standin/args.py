"""The stand-in's command line, generated from SGLang's real option table, and its resolution.

The parser is built from `specserve.upstream.sglang_contract(version).options`, the table that
`scripts/sglang/extract_contract.py` extracts from SGLang's own `prepare_server_args` parser: the
same flags, aliases, `nargs`, choices, value types, store_true / --no- switches, deprecated
actions (with upstream's warning) and `allow_abbrev`, so the stand-in accepts exactly what that
SGLang accepts (`--cuda-graph-max-bs` is "ambiguous" here too) and rejects the rest with
argparse's exit 2. The version is SPECSERVE_STANDIN_SGLANG_VERSION (knobs.py), default the pinned
one. Stand-in-only settings are environment variables, never flags.

`resolve` then applies the few resolution rules of SGLang's `arg_groups/speculative_hook.py`
that change what the stand-in simulates (algorithm upper-casing and the NEXTN alias, the
48-request cap under speculation, tree parameters chosen per target architecture, top-k 1 forcing
draft tokens = steps + 1, the block drafters' `_handle_dflash` / `_handle_dspark`: blocks.py)
and the CUDA-graph switches that turn decode graphs off. What SGLang
would reject later, at resolution, the stand-in rejects with a one-line ResolutionError (exit 1).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from specserve.adaptive import (
    DISABLED_WARNING,
    AdaptiveConfigError,
    ServerFlags,
    candidate_steps,
    load_config,
    start_steps,
    unsupported_reason,
)
from specserve.profile import uno
from specserve.profile.algorithms import FROZEN_KV_MTP_DRAFTERS
from specserve.profile.tree import NGRAM_DEFAULT_DRAFT_TOKENS
from specserve.standin import STANDIN_NAME, STANDIN_NOTICE
from specserve.standin.blocks import (
    BLOCK_ALGORITHMS,
    estimate_recorder_on,
    ragged_verify_mode,
    resolve_dflash,
    resolve_dspark,
)
from specserve.upstream import Option, SGLangContract, sglang_contract

# Algorithms whose speculative_hook handler is `_handle_eagle_family` (after NEXTN -> EAGLE).
EAGLE_FAMILY: tuple[str, ...] = ("EAGLE", "EAGLE3", "STANDALONE")
# Algorithms the stand-in's behaviour model simulates; others (plugins) parse, but the stand-in
# refuses to pretend to run them. FROZEN_KV_MTP and UNO print the EAGLE family's decode line
# (report_decode_stats tells only DSPARK and no speculation apart).
SIMULATED_ALGORITHMS: tuple[str, ...] = (
    *EAGLE_FAMILY, "NGRAM", *BLOCK_ALGORITHMS, "FROZEN_KV_MTP", "UNO"
)
# `_handle_eagle_family`: targets whose checkpoint carries its own MTP/NEXTN draft layer, so an
# unset --speculative-draft-model-path becomes --model-path (SGLang 0.5.21 and 0.5.23).
BUNDLED_DRAFT_ARCHITECTURES: frozenset[str] = frozenset(
    {
        "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM",
        "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM",
        "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM",
        "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "HYV3ForCausalLM",
        "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration",
    }
)  # fmt: skip
# Upstream's warnings, verbatim (speculative_hook.py), logged at start when they apply.
CAP_WARNING = (
    "Max running requests is reset to {cap} for speculative decoding. You can override this by "
    "explicitly setting --max-running-requests."
)
TOPK1_WARNING = (
    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
    "speculative_eagle_topk == 1"
)
FROZEN_KV_MTP_MIXED_CHUNK_WARNING = (
    "Mixed chunked prefill is disabled because of using Frozen-KV MTP speculative decoding."
)
FROZEN_KV_MTP_EAGLE3_ERROR = (
    "Gemma4AssistantForCausalLM draft requires --speculative-algorithm NEXTN or EAGLE; EAGLE3 is "
    "not supported for this draft architecture."
)
NGRAM_DRAFT_WARNING = (
    "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
    "You can override this by explicitly setting --speculative-num-draft-tokens."
)


class ResolutionError(ValueError):
    """The argv parses, but SGLang's resolution (or the stand-in's model) cannot run it."""


class OptionTableError(RuntimeError):
    """The option table holds an action or value type the stand-in cannot reproduce."""


# -- value types, by the name of upstream's argparse `type` callable ------------------------------
# Each converter keeps upstream's function name: argparse prints it in "invalid <name> value".


def human_readable_int(value: str) -> int:
    """sglang.srt.utils.common.human_readable_int: 1k, 25.6k, 1Mi, ... (case-sensitive)."""
    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * iec[suffix]
        return int(Decimal(number) * si[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        ) from None


def nullable_str(value: str) -> str | None:
    return None if not value or value == "None" else value


def loads(value: str) -> Any:
    return json.loads(value)


def json_list_type(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        ) from None


def parse_cuda_graph_backend_arg(raw: str) -> str:
    """0.5.23's converter: the retired backend is refused before the choices are checked."""
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError(
            "tc_piecewise was removed; select breakable, full, or disabled"
        )
    return raw


def _cuda_graph_config_type(check_backend: bool) -> Callable[[str], dict[str, Any]]:
    """--cuda-graph-config's converter: a JSON object of phase -> settings object. The backend
    check exists where the version has parse_cuda_graph_backend_arg (0.5.23). Upstream also
    checks each phase's keys against a per-version list the option table does not carry; the
    stand-in does not."""

    def parse_cuda_graph_config_arg(raw: str) -> dict[str, Any]:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}"
            )
        for phase, settings in parsed.items():
            if str(phase) not in ("decode", "prefill"):
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config: unknown phase '{phase}', expected one of "
                    "('decode', 'prefill')"
                )
            if not isinstance(settings, dict):
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config['{phase}'] must be a JSON object, got "
                    f"{type(settings).__name__}"
                )
            if check_backend and "backend" in settings:
                parse_cuda_graph_backend_arg(settings["backend"])
        return parsed

    return parse_cuda_graph_config_arg


def value_types(contract: SGLangContract) -> dict[str | None, Callable[[str], Any] | None]:
    """Converters by upstream's type function name, as that version defines them."""
    check_backend = any(o.type_name == "parse_cuda_graph_backend_arg" for o in contract.options)
    return {
        None: None,
        "str": str,
        "int": int,
        "float": float,
        "human_readable_int": human_readable_int,
        "nullable_str": nullable_str,
        "loads": loads,
        "json_list_type": json_list_type,
        "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
        "parse_cuda_graph_config_arg": _cuda_graph_config_type(check_backend),
    }


def _deprecated_warning(option_string: str, new_flag: str | None) -> None:
    # Upstream's print_deprecated_warning: logger.warning in bold yellow, before logging is
    # configured, so Python's last-resort handler writes the bare message to stderr.
    replacement = f" Use '{new_flag}' instead." if new_flag else ""
    message = (
        f"'{option_string}' is deprecated and will be removed in a future release.{replacement}"
    )
    print(f"\033[1;33m{message}\033[0m", file=sys.stderr)


def _deprecated_action(opt: Option) -> type[argparse.Action]:
    """DeprecatedStoreTrueAction / DeprecatedStoreConstAction / DeprecatedAliasStoreAction."""

    class Deprecated(argparse.Action):
        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            _deprecated_warning(option_string or opt.flags[0], opt.new_flag)
            # Store-true/const actions record that the old switch was given; an alias keeps
            # the value. (The const a StoreConst action writes is not in the table: True.)
            stored = values if opt.action == "DeprecatedAliasStoreAction" else True
            setattr(namespace, self.dest, stored)

    return Deprecated


def _add_option(
    parser: argparse.ArgumentParser,
    opt: Option,
    types: dict[str | None, Callable[[str], Any] | None],
) -> None:
    kwargs: dict[str, Any] = {"dest": opt.dest, "default": opt.default, "help": opt.help}
    if opt.required:
        kwargs["required"] = True
    flags = list(opt.flags)
    action = opt.action
    if action == "store_true":
        parser.add_argument(*flags, action="store_true", **kwargs)
        return
    if action == "boolean_optional":
        # argparse derives the --no- spellings itself from the positive ones.
        positive = [f for f in flags if not f.startswith("--no-")]
        parser.add_argument(*positive, action=argparse.BooleanOptionalAction, **kwargs)
        return
    if opt.type_name not in types:
        raise OptionTableError(
            f"{flags[0]}: value type {opt.type_name!r} is unknown to the stand-in; "
            "add a converter to specserve/standin/args.py value_types"
        )
    value_type = types[opt.type_name]
    if action in ("DeprecatedStoreTrueAction", "DeprecatedStoreConstAction",
                  "DeprecatedAliasStoreAction"):  # fmt: skip
        nargs = 0 if not opt.takes_value else opt.nargs
        parser.add_argument(
            *flags, action=_deprecated_action(opt), nargs=nargs, choices=opt.choices,
            type=value_type if opt.takes_value else None, **kwargs,
        )  # fmt: skip
        return
    if action not in ("store", "LoRAPathAction"):
        raise OptionTableError(
            f"{flags[0]}: argparse action {action!r} is unknown to the stand-in; "
            "teach specserve/standin/args.py _add_option how SGLang's action behaves"
        )
    if value_type is not None:
        kwargs["type"] = value_type
    if opt.choices is not None:
        kwargs["choices"] = list(opt.choices)
    if opt.nargs is not None:
        kwargs["nargs"] = opt.nargs
    parser.add_argument(*flags, **kwargs)


def build_parser(contract: SGLangContract) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=STANDIN_NAME,
        allow_abbrev=contract.allow_abbrev,
        description=(
            f"{STANDIN_NOTICE}. Accepts exactly the flags of SGLang {contract.version}'s "
            "sglang.launch_server (generated from its option table). Stand-in-only knobs are "
            "SPECSERVE_STANDIN_* environment variables (docs/standin.md)."
        ),
    )
    types = value_types(contract)
    for opt in contract.options:
        _add_option(parser, opt, types)
    return parser


# -- resolution -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpecConfig:
    """Speculative parameters after upstream's resolution rules."""

    algorithm: str
    draft_model_path: str | None
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    adaptive: bool = False
    """--speculative-adaptive after resolution: steps (and draft tokens) change at run time."""
    adaptive_slots: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Batch size -> candidate steps and knobs (specserve.adaptive.load_config), when adaptive."""
    ragged_verify_mode: str = "static"
    """DSPARK: SGLANG_RAGGED_VERIFY_MODE (static, cap-accept, compact), read at start as SGLang
    reads it; "static" for every other algorithm, whose verify is never capped."""
    block_estimate: bool = False
    """DSPARK: whether SGLang's block-accept estimator runs (its env knobs), so decode lines end
    their speculative part with `est uncap acc len`."""

    @property
    def block(self) -> bool:
        """A block drafter, or UNO's linear mode: one draft step proposes the whole block of
        draft tokens - 1."""
        return self.algorithm in BLOCK_ALGORITHMS or (
            self.algorithm == "UNO" and self.eagle_topk == 1)  # fmt: skip


@dataclass(frozen=True)
class StandinArgs:
    """The parsed and resolved arguments the stand-in runs with."""

    sglang_version: str
    model_path: str
    served_model_name: str
    host: str
    port: int
    api_key: str | None
    tp_size: int
    dp_size: int
    pp_size: int
    ep_size: int
    attn_cp_size: int
    moe_dp_size: int
    enable_dp_attention: bool
    spec: SpecConfig | None
    decode_cuda_graph: bool
    """Whether decode batches may run in CUDA graphs (False: every way upstream turns them off)."""
    enable_metrics: bool
    decode_log_interval: int
    context_length: int | None
    max_running_requests: int | None
    """As resolved upstream: the user's value, or 48 under speculation, else None (memory)."""
    cuda_graph_max_bs: int | None
    """The decode graph's max batch size (`--cuda-graph-max-bs-decode`), None = default."""
    target_architecture: str | None
    resolved: dict[str, Any] = field(default_factory=dict)
    """Every option's value after resolution, secrets included: upstream's resolved_dict()."""
    launch_command: str = ""
    """`" ".join(argv)`: upstream's `ServerArgs.launch_command`, the API key included."""
    warnings: tuple[str, ...] = ()
    """Upstream's resolution warnings that apply, verbatim, for the start-up log."""
    custom_labels: tuple[str, ...] = ()
    """`--tokenizer-metrics-allowed-custom-labels`: the names a request's header may set."""
    custom_labels_header: str = ""
    """`--tokenizer-metrics-custom-labels-header`: the header the OpenAI routes read them from."""

    @property
    def raw(self) -> dict[str, Any]:
        return self.resolved


def architectures(path: str | None) -> list[str]:
    """`architectures` from `<path>/config.json`, or [] when there is no readable config."""
    if not path:
        return []
    try:
        doc = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    archs = doc.get("architectures") if isinstance(doc, dict) else None
    return [str(a) for a in archs] if isinstance(archs, list) else []


def _algorithm(contract: SGLangContract, name: str) -> str:
    """SpeculativeAlgorithm.from_string: upper-case, then builtins and aliases."""
    upper = name.upper()
    facts = contract.facts["speculative_algorithm"]
    aliases: dict[str, str] = facts["aliases"]
    if upper in aliases:
        return aliases[upper]
    if upper not in facts["builtins"]:
        raise ResolutionError(f"Unknown speculative algorithm name: {name}")
    if upper not in SIMULATED_ALGORITHMS:
        raise ResolutionError(
            f"--speculative-algorithm {name}: SGLang {contract.version} serves it, but the "
            f"stand-in only simulates {', '.join(SIMULATED_ALGORITHMS)} (and the NEXTN alias)"
        )
    return upper


def _adaptive(
    contract: SGLangContract, ns: argparse.Namespace, algorithm: str, warnings: list[str]
) -> dict[int, dict[str, Any]] | None:
    """speculative_hook's `_maybe_disable_adaptive`: the config's slots while adaptive stays on,
    None when it was not asked for or resolution turns it off (with upstream's warning)."""
    if not getattr(ns, "speculative_adaptive", False):
        return None
    flags = ServerFlags(
        dp_attention=bool(ns.enable_dp_attention) or getattr(ns, "attn_dp_size", 1) > 1,
        multi_layer_eagle=bool(getattr(ns, "enable_multi_layer_eagle", False)),
        two_batch_overlap=bool(getattr(ns, "enable_two_batch_overlap", False)),
        pdmux=bool(getattr(ns, "enable_pdmux", False)),
    )
    reason = unsupported_reason(algorithm, ns.speculative_eagle_topk, flags, contract.version)
    if reason is not None:
        warnings.append(DISABLED_WARNING.format(reason=reason))
        return None
    try:
        return load_config(getattr(ns, "speculative_adaptive_config", None))
    except AdaptiveConfigError as exc:
        raise ResolutionError(f"--speculative-adaptive-config: {exc}") from None


def _spec_config(
    contract: SGLangContract, ns: argparse.Namespace, arch: str | None, warnings: list[str]
) -> SpecConfig | None:
    if ns.speculative_algorithm is None:
        return None
    algorithm = _algorithm(contract, ns.speculative_algorithm)
    steps = ns.speculative_num_steps
    topk = ns.speculative_eagle_topk
    draft = ns.speculative_num_draft_tokens
    draft_path = ns.speculative_draft_model_path
    algorithm = _frozen_kv_mtp_alias(algorithm, draft_path)
    if algorithm == "FROZEN_KV_MTP":
        return _frozen_kv_mtp_spec(ns, draft_path, warnings)
    slots = _adaptive(contract, ns, algorithm, warnings)
    if algorithm in BLOCK_ALGORITHMS:  # adaptive is EAGLE-only: _adaptive turned it off
        return _block_spec(contract.version, ns, algorithm, warnings)
    if algorithm == "UNO":
        return _uno_spec(ns, warnings)
    if slots is not None:
        # `_init_adaptive_speculative_params`: top-k 1, steps a candidate, draft = steps + 1.
        try:
            steps = start_steps(steps, candidate_steps(slots))
        except ValueError as exc:
            raise ResolutionError(str(exc)) from None
        topk, draft = 1 if topk is None else topk, steps + 1
    if algorithm == "NGRAM":
        # _handle_ngram: top-k is the BFS breadth; 12 draft tokens unless given.
        topk = ns.speculative_ngram_max_bfs_breadth
        if draft is None:
            draft = NGRAM_DEFAULT_DRAFT_TOKENS
            warnings.append(NGRAM_DRAFT_WARNING)
        if steps is None:
            steps = draft // topk
        return SpecConfig(algorithm, None, steps, topk, draft)
    if draft_path is None and algorithm == "EAGLE" and arch in BUNDLED_DRAFT_ARCHITECTURES:
        draft_path = ns.model_path
    if draft_path is None:
        raise ResolutionError(
            f"--speculative-algorithm {ns.speculative_algorithm} needs "
            "--speculative-draft-model-path (the drafter's weights)"
        )
    given = {"num_steps": steps, "eagle_topk": topk, "num_draft_tokens": draft}
    if all(v is None for v in given.values()):
        # _auto_choose_speculative_params, by the target's architectures[0].
        steps, topk, draft = contract.default_tree(arch or "", algorithm)
    elif any(v is None for v in given.values()):
        unset = ", ".join(k for k, v in given.items() if v is None)
        raise ResolutionError(
            f"--speculative-{unset.replace('_', '-')} unset while the other tree parameters are "
            "set (SGLang fails on this); set --speculative-num-steps, --speculative-eagle-topk "
            "and --speculative-num-draft-tokens together, or none"
        )
    assert steps is not None and topk is not None and draft is not None
    for name, value in (("num-steps", steps), ("eagle-topk", topk)):
        if value < 1:
            raise ResolutionError(f"--speculative-{name} must be >= 1, got {value}")
    if topk == 1 and draft != steps + 1:
        warnings.append(TOPK1_WARNING)
        draft = steps + 1
    if draft < 2:
        raise ResolutionError(f"--speculative-num-draft-tokens must be >= 2, got {draft}")
    if slots is not None:
        return SpecConfig(algorithm, draft_path, steps, topk, draft, True, slots)
    return SpecConfig(algorithm, draft_path, steps, topk, draft)


def _frozen_kv_mtp_alias(algorithm: str, draft_path: str | None) -> str:
    """`_resolve_speculative_algorithm_alias`: EAGLE (and NEXTN, already EAGLE) with a Gemma-4
    assistant drafter runs as FROZEN_KV_MTP; EAGLE3 with one is refused."""
    if not any(a in FROZEN_KV_MTP_DRAFTERS for a in architectures(draft_path)):
        return algorithm
    if algorithm == "EAGLE3":
        raise ResolutionError(FROZEN_KV_MTP_EAGLE3_ERROR)
    return "FROZEN_KV_MTP" if algorithm == "EAGLE" else algorithm


def _frozen_kv_mtp_spec(
    ns: argparse.Namespace, draft_path: str | None, warnings: list[str]
) -> SpecConfig:
    """`_handle_frozen_kv_mtp`: the tree as given (no default, no top-k 1 adjustment)."""
    steps, topk, draft = ns.speculative_num_steps, ns.speculative_eagle_topk, (
        ns.speculative_num_draft_tokens)  # fmt: skip
    if draft_path is None or steps is None or topk is None or draft is None:
        # SGLang resolves it with the tree unset and its worker then has none to draft with.
        raise ResolutionError(
            "--speculative-algorithm FROZEN_KV_MTP: SGLang picks no tree for it "
            "(_handle_frozen_kv_mtp) and needs the drafter; the stand-in simulates it with "
            "--speculative-draft-model-path, --speculative-num-steps, --speculative-eagle-topk "
            "and --speculative-num-draft-tokens all given"
        )
    if getattr(ns, "enable_mixed_chunk", False):
        warnings.append(FROZEN_KV_MTP_MIXED_CHUNK_WARNING)
    return SpecConfig("FROZEN_KV_MTP", draft_path, steps, topk, draft)


def _uno_spec(ns: argparse.Namespace, warnings: list[str]) -> SpecConfig:
    """`_handle_uno` (specserve/profile/uno.py has its rules and words), device aside: the
    target drafts through a LoRA, verifying Q (--speculative-num-draft-tokens) a pass, in one
    step at top-k 1 (linear mode) or as a tree; no running-request cap."""

    def given(name: str, default: Any = None) -> Any:
        return getattr(ns, name, default)

    def refuse(said: str) -> None:
        raise ResolutionError(said)

    if ns.speculative_draft_model_path is not None:
        refuse(uno.NO_DRAFT_PATH)
    if given("uno_lora_path") is None:
        refuse(uno.NEEDS_LORA)
    if given("enable_deterministic_inference"):
        refuse(uno.NO_DETERMINISTIC)
    if given("enable_strict_thinking"):
        refuse(uno.NO_STRICT_THINKING)
    q = ns.speculative_num_draft_tokens
    if q is None or q < 1:
        refuse(uno.NEEDS_Q)
    k = 1 if ns.speculative_eagle_topk is None else ns.speculative_eagle_topk
    if k < 1:
        refuse(f"UNO requires --speculative-eagle-topk to be at least 1, got {k}.")
    steps = ns.speculative_num_steps
    if k > 1:
        if steps is None:
            refuse(uno.TREE_NEEDS_STEPS)
        if steps < 1:
            refuse(f"UNO tree mode requires --speculative-num-steps to be positive, got {steps}.")
        said = uno.tree_refusal(q, k, steps)
        if said is not None:
            refuse(said)
        if given("enable_pdmux"):
            refuse("UNO tree mode does not yet support PDMux.")
        if given("enable_two_batch_overlap"):
            refuse("UNO tree mode does not yet support two-batch overlap.")
        if (given("speculative_accept_threshold_single", 1.0),
                given("speculative_accept_threshold_acc", 1.0)) != (1.0, 1.0):  # fmt: skip
            refuse("UNO tree mode reuses EAGLE target-only sampling and requires both "
                   "speculative accept thresholds to be 1.0.")  # fmt: skip
    else:
        for name in ("speculative_num_steps", "speculative_eagle_topk"):
            if given(name) not in (None, 1):
                warnings.append(uno.LINEAR_OVERRIDE.format(field=name, value=given(name)))
        steps = 1
    if (ns.tp_size, ns.pp_size) != (1, 1):
        refuse(uno.ONE_GPU)
    if ns.enable_dp_attention or given("attn_dp_size", 1) > 1 or given("attn_cp_size", 1) != 1:
        refuse(uno.NO_DP_ATTENTION)
    if given("enable_lora") or given("lora_paths"):
        refuse(uno.NO_MULTI_LORA)
    if given("speculative_use_rejection_sampling"):
        refuse(uno.NO_REJECTION_SAMPLING)
    if given("enable_mixed_chunk"):
        warnings.append(uno.MIXED_CHUNK_OFF)
    # Where the argv names no backend SGLang picks the GPU's default; the stand-in has no GPU.
    prefill = given("prefill_attention_backend") or given("attention_backend")
    decode = given("decode_attention_backend") or given("attention_backend")
    if (prefill, decode) != (uno.FA3, uno.FA3):
        refuse(uno.NEEDS_FA3.format(prefill=prefill, decode=decode))
    assert q is not None and steps is not None
    return SpecConfig("UNO", None, steps, k, q)


def _block_spec(
    version: str, ns: argparse.Namespace, algorithm: str, warnings: list[str]
) -> SpecConfig:
    """_handle_dflash / _handle_dspark (blocks.py): one step of top-k 1 verifying a block."""
    env = os.environ
    handler = resolve_dflash if algorithm == "DFLASH" else resolve_dspark
    try:
        block = handler(ns, version, warnings, env)
        if algorithm != "DSPARK":
            return SpecConfig(algorithm, block.draft_model_path, 1, 1, block.num_draft_tokens)
        mode, estimate = ragged_verify_mode(env), estimate_recorder_on(env)
    except ValueError as exc:
        raise ResolutionError(str(exc)) from None
    return SpecConfig(
        algorithm, block.draft_model_path, 1, 1, block.num_draft_tokens,
        ragged_verify_mode=mode, block_estimate=estimate,
    )  # fmt: skip


def _decode_cuda_graph(ns: argparse.Namespace) -> bool:
    """False when any of upstream's switches turns decode CUDA graphs off."""
    config = getattr(ns, "cuda_graph_config", None) or {}
    decode = config.get("decode") if isinstance(config, dict) else None
    return not (
        ns.disable_cuda_graph
        or getattr(ns, "disable_decode_cuda_graph", False)
        or getattr(ns, "cuda_graph_backend_decode", None) == "disabled"
        or (isinstance(decode, dict) and decode.get("backend") == "disabled")
    )


def resolve(contract: SGLangContract, ns: argparse.Namespace, argv: list[str]) -> StandinArgs:
    """Apply the resolution rules the stand-in simulates; ResolutionError when it cannot run."""
    for name in ("tp_size", "dp_size", "pp_size", "ep_size", "decode_log_interval"):
        value = getattr(ns, name)
        if value < 1:
            raise ResolutionError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if not 1 <= ns.port <= 65535:
        raise ResolutionError(f"--port must be 1..65535, got {ns.port}")
    allowed = tuple(getattr(ns, "tokenizer_metrics_allowed_custom_labels", None) or ())
    header = getattr(ns, "tokenizer_metrics_custom_labels_header", None) or ""
    if allowed and not header:
        # validation_hook's check, the same words in 0.5.21 and 0.5.23.
        raise ResolutionError(
            "Please set --tokenizer-metrics-custom-labels-header when setting "
            "--tokenizer-metrics-allowed-custom-labels."
        )
    archs = architectures(ns.model_path)
    arch = archs[0] if archs else None
    warnings: list[str] = []
    spec = _spec_config(contract, ns, arch, warnings)
    max_running = ns.max_running_requests
    by_handler = contract.facts["max_running_requests_cap"]["by_handler"]
    handler = None if spec is None else (
        f"_handle_{spec.algorithm.lower()}"
        if spec.algorithm in ("NGRAM", "FROZEN_KV_MTP", "UNO", *BLOCK_ALGORITHMS)
        else "_handle_eagle_family"
    )  # fmt: skip
    # _handle_uno sets no cap (SGLang sizes the running requests from the KV pool).
    if spec is not None and max_running is None and handler in by_handler:
        max_running = int(by_handler[handler])
        # The block handlers warn last (after their steps/top-k/block warnings).
        warnings.insert(len(warnings) if spec.block else 0, CAP_WARNING.format(cap=max_running))
    resolved = dict(sorted(vars(ns).items()))
    resolved["max_running_requests"] = max_running
    if spec is not None:
        resolved.update(
            speculative_algorithm=spec.algorithm,
            speculative_draft_model_path=spec.draft_model_path,
            speculative_num_steps=spec.num_steps,
            speculative_eagle_topk=spec.eagle_topk,
            speculative_num_draft_tokens=spec.num_draft_tokens,
            speculative_adaptive=spec.adaptive,
        )
    return StandinArgs(
        sglang_version=contract.version,
        model_path=ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        host=ns.host,
        port=ns.port,
        api_key=ns.api_key,
        tp_size=ns.tp_size,
        dp_size=ns.dp_size,
        pp_size=ns.pp_size,
        ep_size=ns.ep_size,
        attn_cp_size=getattr(ns, "attn_cp_size", 1),
        moe_dp_size=getattr(ns, "moe_dp_size", 1),
        enable_dp_attention=bool(ns.enable_dp_attention) or getattr(ns, "attn_dp_size", 1) > 1,
        spec=spec,
        decode_cuda_graph=_decode_cuda_graph(ns),
        enable_metrics=ns.enable_metrics,
        decode_log_interval=ns.decode_log_interval,
        context_length=ns.context_length,
        max_running_requests=max_running,
        cuda_graph_max_bs=getattr(ns, "cuda_graph_max_bs_decode", None),
        target_architecture=arch,
        resolved=resolved,
        launch_command=" ".join(argv),
        warnings=tuple(warnings),
        custom_labels=allowed,
        custom_labels_header=header,
    )


def prepare_server_args(argv: Sequence[str], version: str | None = None) -> argparse.Namespace:
    """Parse only, as SGLang's `sglang.srt.server_args.prepare_server_args` does before any
    resolution: argparse's usage error and exit 2 for an argv SGLang `version` refuses. What
    `specserve-launch --dry-run` runs (specserve/launch/server_parser.py)."""
    from specserve.standin.knobs import sglang_version

    return build_parser(sglang_contract(version or sglang_version())).parse_args(list(argv))


def parse_args(argv: Sequence[str] | None = None, version: str | None = None) -> StandinArgs:
    """Parse as SGLang `version` would (exit 2 on a usage error), then resolve."""
    from specserve.standin.knobs import sglang_version

    argv = list(sys.argv[1:] if argv is None else argv)
    contract = sglang_contract(version or sglang_version())
    ns = build_parser(contract).parse_args(argv)
    return resolve(contract, ns, argv)
