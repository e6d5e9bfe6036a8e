"""What SGLang refuses at start, refused by `check` first, in SGLang's own words.

SGLang's launcher runs `ServerArgs.resolve_once()` (the hooks of `srt/arg_groups/`) and then
`check_server_args` (`arg_groups/validation_hook.py`) before it loads anything; an assertion or
raise there ends the start with a traceback on a node that was drained for it. Each rule of
`REFUSALS` is one of those refusals whose condition the profile's argv decides on any host (the
option values as `render` writes them, `specserve/profile/argview.py`): the words are SGLang's
message, `hook` says where it raises. The contract suite (tests/contract/test_startup_refusals.py)
resolves every option of the table, for every verified version, on the shipped profiles' argvs
with SGLang's real code, and fails when SGLang refuses one with words no rule here has (or when
a rule refuses what SGLang accepts); the refusals that only a GPU, the model's own files or a
value that exists only where the server runs decide are listed there, each with its reason
(docs/sglang-contract.md, "Start-time refusals").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from specserve.profile.argview import ArgvView, attention_backend, profile_view
from specserve.profile.issues import Issue, error
from specserve.profile.model import Profile
from specserve.profile.sglang import Contract

Words = str | Callable[[ArgvView], str]

# logging's level names, as SGLang resolves --log-level: getattr(logging, value.upper()).
LOG_LEVELS: tuple[str, ...] = tuple(
    name for name in logging.getLevelNamesMapping() if isinstance(getattr(logging, name), int)
)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


@dataclass(frozen=True)
class Refusal:
    """One start-time refusal of SGLang: `when` holds -> SGLang stops with `words`."""

    dest: str  # the option the issue names (its flag, where the profile writes it)
    words: Words  # SGLang's message (a leading part of it), formatted from the view
    when: Callable[[ArgvView], bool]
    hook: str  # where SGLang raises: arg_groups/<file>::<function>
    fix: str
    since: str | None = None  # first verified version that refuses it (None: all that have it)
    until: str | None = None  # last one
    # What check prints where SGLang's message is empty (a bare `assert`); `words` is "" then.
    says: str | None = None
    # extra_args words that make SGLang refuse, and words added to them that satisfy the rule:
    # the contract suite resolves both on every shipped profile.
    trigger: tuple[str, ...] = ()
    passes: tuple[str, ...] = ()
    # Another check reports this refusal with more to say (the contract suite still holds the
    # rule to SGLang's words): `check_startup` leaves it to that one, so it is said once.
    reported_by: str | None = None

    def applies_to(self, view: ArgvView) -> bool:
        version = _version_key(view.contract.version)
        if self.since is not None and version < _version_key(self.since):
            return False
        if self.until is not None and version > _version_key(self.until):
            return False
        return view.known(self.dest) and self.when(view)

    def text(self, view: ArgvView) -> str:
        return self.words(view) if callable(self.words) else self.words


@dataclass(frozen=True)
class Hit:
    rule: Refusal
    words: str  # SGLang's words for this view ("" for a bare assertion)
    where: str  # the profile field that wrote the flag
    flag: str


# --- what the conditions read -------------------------------------------------------------


def _algorithm(a: ArgvView) -> str:
    """The resolved algorithm: upper case, NEXTN as EAGLE (SGLang's alias)."""
    name = str(a["speculative_algorithm"] or "").upper()
    return "EAGLE" if name == "NEXTN" else name


def _speculates(a: ArgvView) -> bool:
    return a["speculative_algorithm"] is not None


def _attn_dp(a: ArgvView) -> int:
    """Attention-DP groups: 0.5.23's --attn-dp-size, 0.5.21's --dp-size with DP attention."""
    if a.known("attn_dp_size") and (a["attn_dp_size"] or 1) > 1:
        return int(a["attn_dp_size"])
    return int(a["dp_size"] or 1) if a["enable_dp_attention"] else 1


def _backends(a: ArgvView) -> tuple[object, object]:
    """(prefill, decode) attention backends as written (model_override_base.attention_backends_of):
    None where the GPU's default decides."""
    base = a["attention_backend"]
    return a["prefill_attention_backend"] or base, a["decode_attention_backend"] or base


def _topk(a: ArgvView) -> int | None:
    value = a["speculative_eagle_topk"]
    return value if isinstance(value, int) else None


def _tree(a: ArgvView) -> bool:
    """A tree draft (top-k > 1) that the argv writes."""
    return _speculates(a) and (_topk(a) or 1) > 1


def _grpc(a: ArgvView) -> bool:
    return a["grpc_port"] is not None


def _native_grpc(a: ArgvView) -> bool:
    """SGLang's native gRPC server: a port without the legacy SMG mode, which takes precedence."""
    return _grpc(a) and not (a["smg_grpc_mode"] or a["grpc_mode"])


def _num(a: ArgvView, dest: str, default: int = 0) -> int:
    value = a[dest]
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _given_true(dest: str) -> Callable[[ArgvView], bool]:
    return lambda a: bool(a[dest])


_DP_FIX = "turn DP attention on (parallelism.enable_dp_attention, parallelism.dp), or remove {flag}"
_SPEC_FIX = "remove {flag}, or turn speculation off (drafter.algorithm: none)"
_PAGE_TREE_BACKENDS = ("flashinfer", "fa3", "triton")
_DETERMINISTIC_BACKENDS = ("ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton")
_MODELOPT = ("modelopt", "modelopt_fp4", "modelopt_fp8", "modelopt_mixed", "nvfp4_online")
_BUCKET_RULES = ("tse", "default", "custom")
# --quantization choices the parser offers that the model config's QUANTIZATION_METHODS does
# not hold (0.5.21 and 0.5.23): configs/model_config.py::_verify_quantization refuses them for
# every model (one whose checkpoint names another method is refused one check earlier).
_UNKNOWN_QUANTIZATION = ("gptq", "mlx_q4", "mlx_q8", "mxfp4")


def _tp_lm_head_words(a: ArgvView) -> str:
    if a.known("attn_dp_size"):
        return "--enable-tp-lm-head-all-to-all requires attention DP (--attn-dp-size)."
    return "Please enable dp attention when setting enable_tp_lm_head_all_to_all."


def _tbo_words(a: ArgvView) -> str:
    needed = (
        "attention DP (--attn-dp-size)" if a.known("attn_dp_size") else ("--enable-dp-attention")
    )
    return (
        "When enabling two batch overlap without an EP a2a backend (moe_a2a_backend='none'), "
        f"{needed} is required"
    )


def _pplx_words(a: ArgvView) -> str:
    if a.known("attn_dp_size"):
        return (
            "moe_a2a_backend='pplx' requires attention DP with at least 2 groups "
            "(--attn-dp-size >= 2)."
        )
    return (
        "moe_a2a_backend='pplx' requires --enable-dp-attention with at least 2 DP groups "
        "(--dp-size >= 2)."
    )


def _flashinfer_a2a_words(a: ArgvView) -> str:
    if a.known("attn_dp_size"):
        return "Flashinfer MoE A2A requires --attn-dp-size equal to --tp-size"
    return "Flashinfer MoE A2A is only supported with dp_size == tp_size and --enable-dp-attention"


def _json_error(text: object) -> str | None:
    """What json.loads says about `text` as SGLang's resolution reports it, or None."""
    try:
        json.loads(str(text))
    except json.JSONDecodeError as exc:
        return f"JSONDecodeError: {exc}"
    return None


def _bucket_rule(dest: str) -> Callable[[ArgvView], bool]:
    def bad(a: ArgvView) -> bool:
        rule = a[dest]
        return isinstance(rule, list) and bool(rule) and rule[0] not in _BUCKET_RULES

    return bad


def _bucket_words(dest: str) -> Callable[[ArgvView], str]:
    flag = "--" + dest.replace("_", "-")
    return lambda a: (
        f"Unsupported {flag} rule type: {a[dest][0]!r}. Must be one of: 'tse', 'default', 'custom'"
    )


def _flashinfer_a2a_fits(a: ArgvView) -> bool:
    """moe_hook.py's topology rule: DP attention over every TP rank (0.5.23 also lets Muse Spark
    layernorm-SP through, an architecture check cannot see: not refused here)."""
    if not a.known("attn_dp_size"):
        return bool(a["enable_dp_attention"]) and a["dp_size"] == a["tp_size"]
    groups = _attn_dp(a)
    return (groups > 1 and groups == a["tp_size"]) or bool(a["enable_layernorm_sp"])


def _quant_comm_words(a: ArgvView) -> str:
    if a["tp_size"] == 1:
        return "Communications quantization is only used with tp_size != 1"
    return "Communications quantization is only supported for NPU device"


REFUSALS: tuple[Refusal, ...] = (
    # --- speculation -----------------------------------------------------------------------
    Refusal(
        "attention_backend",
        "Speculative decoding is currently not supported with Flex Attention backend",
        lambda a: attention_backend(a) == "flex_attention" and _speculates(a),
        "attention_hook.py::handle_attention_backend_compatibility",
        "use another --attention-backend (or leave it to SGLang), or turn speculation off",
        trigger=("--attention-backend", "flex_attention"),
    ),
    Refusal(
        "weight_cache_mode",
        "--weight-cache-mode is not supported together with speculative decoding "
        "(--speculative-algorithm): the weight cache daemon does not export the draft model's "
        "weights.",
        lambda a: a["weight_cache_mode"] not in (None, "off") and _speculates(a),
        "model_path_hook.py::handle_load_format",
        _SPEC_FIX,
        trigger=("--weight-cache-mode", "client"),
    ),
    Refusal(
        "enable_lmcache",
        "LMCacheUnifiedRadixCache does not yet support speculative decoding",
        lambda a: bool(a["enable_lmcache"]) and not a["disable_radix_cache"] and _speculates(a),
        "kv_cache_hook.py::handle_cache_compatibility",
        _SPEC_FIX,
        trigger=("--enable-lmcache",),
    ),
    Refusal(
        "enable_lmcache",
        "--enable-lmcache requires radix cache to be enabled",
        lambda a: bool(a["enable_lmcache"]) and bool(a["disable_radix_cache"]),
        "kv_cache_hook.py::handle_cache_compatibility",
        "remove --disable-radix-cache, or remove --enable-lmcache",
        trigger=("--enable-lmcache", "--disable-radix-cache"),
    ),
    Refusal(
        "speculative_use_rejection_sampling",
        "--speculative-use-rejection-sampling requires --speculative-eagle-topk=1.",
        lambda a: (
            bool(a["speculative_use_rejection_sampling"])
            and _algorithm(a) in ("EAGLE", "EAGLE3")
            and (_topk(a) or 1) != 1
        ),
        "speculative_hook.py::_handle_eagle_family",
        "set drafter.eagle_topk: 1 (a chain), or remove {flag}",
        trigger=("--speculative-use-rejection-sampling",),
    ),
    Refusal(
        "enable_linear_replayssm_spec",
        "--enable-linear-replayssm-spec requires a linear draft chain "
        "(--speculative-eagle-topk in {None, 1})",
        lambda a: bool(a["enable_linear_replayssm_spec"]) and _topk(a) not in (None, 1),
        "attention_hook.py::handle_linear_attn_backend",
        "set drafter.eagle_topk: 1 (a chain), or remove {flag}",
        trigger=("--enable-linear-replayssm-spec",),
    ),
    Refusal(
        "pp_size",
        "Pipeline parallelism currently only supports EAGLE (non-multi-layer) speculative decoding",
        lambda a: (
            _num(a, "pp_size", 1) > 1
            and _speculates(a)
            and _algorithm(a) != "DSPARK"
            and not (_algorithm(a) == "EAGLE" and not a["enable_multi_layer_eagle"])
        ),
        "validation_hook.py::check_pipeline_parallel_compat",
        "remove {flag} (pipeline parallelism), or use drafter.algorithm EAGLE / NEXTN",
        trigger=("--pp-size", "2"),
    ),
    Refusal(
        "speculative_moe_runner_backend",
        lambda a: (
            f"--speculative-moe-runner-backend {a['speculative_moe_runner_backend']} is "
            "not supported: the LoRA MoE runner serves adapter traffic on the target model"
        ),
        lambda a: (
            _speculates(a) and str(a["speculative_moe_runner_backend"] or "").startswith("lora")
        ),
        "lora_hook.py::check_lora_moe_runner_args",
        "use a non-LoRA --speculative-moe-runner-backend, or remove {flag}",
        since="0.5.23",
        trigger=("--speculative-moe-runner-backend", "lora_triton"),
    ),
    Refusal(
        "speculative_moe_a2a_backend",
        "DeepEP v2 MoE is not validated as a speculative draft backend. Select another "
        "--speculative-moe-a2a-backend.",
        lambda a: (
            (
                a["speculative_moe_a2a_backend"]
                or (a["moe_a2a_backend"] if _speculates(a) and _algorithm(a) != "NGRAM" else None)
            )
            == "deepep_v2"
        ),
        "moe_hook.py::validate_deepep_v2_speculative_draft",
        "select another --speculative-moe-a2a-backend",
        trigger=("--speculative-moe-a2a-backend", "deepep_v2"),
    ),
    Refusal(
        "speculative_draft_sink_size",
        "--speculative-draft-sink-size requires --speculative-draft-window-size.",
        lambda a: (
            a["speculative_draft_sink_size"] is not None
            and _num(a, "speculative_draft_sink_size") >= 0
            and a["speculative_draft_window_size"] is None
        ),
        "speculative_hook.py::handle_speculative_decoding",
        "add --speculative-draft-window-size N, or remove {flag}",
        trigger=("--speculative-draft-sink-size", "2"),
        passes=("--speculative-draft-window-size", "64"),
    ),
    Refusal(
        "speculative_use_block_verification",
        "--speculative-use-block-verification only supports EAGLE / EAGLE3 / NEXTN / DFLASH / "
        "DSPARK.",
        lambda a: (
            bool(a["speculative_use_block_verification"])
            and _algorithm(a) not in ("EAGLE", "EAGLE3", "DFLASH", "DSPARK")
        ),
        "speculative_hook.py::handle_speculative_decoding",
        "use EAGLE / EAGLE3 / NEXTN speculation, or remove {flag}",
        trigger=("--speculative-use-block-verification",),
    ),
    Refusal(
        "speculative_skip_dp_mlp_sync",
        lambda a: (
            "--speculative-skip-dp-mlp-sync is only supported with speculative_algorithm "
            f"== EAGLE, got {a['speculative_algorithm']}."
        ),
        lambda a: bool(a["speculative_skip_dp_mlp_sync"]) and _algorithm(a) != "EAGLE",
        "speculative_hook.py::handle_speculative_decoding",
        "use drafter.algorithm EAGLE (or NEXTN), or remove {flag}",
        trigger=("--speculative-skip-dp-mlp-sync",),
    ),
    Refusal(
        "enable_return_aux_hidden_states",
        lambda a: (
            "--enable-return-aux-hidden-states needs --speculative-algorithm EAGLE3, "
            f"DFLASH or DSPARK to name the capture convention, got {a['speculative_algorithm']!r}."
        ),
        lambda a: (
            bool(a["enable_return_aux_hidden_states"])
            and str(a["speculative_algorithm"] or "").upper() not in ("EAGLE3", "DFLASH", "DSPARK")
        ),
        "validation_hook.py::handle_aux_hidden_state_capture",
        "remove {flag}: it turns the server into an aux-hidden-state capture, not a speculative "
        "server",
        trigger=("--enable-return-aux-hidden-states",),
    ),
    Refusal(
        "enable_return_aux_hidden_states",
        "--enable-return-aux-hidden-states captures without a draft; drop "
        "--speculative-draft-model-path.",
        lambda a: (
            bool(a["enable_return_aux_hidden_states"])
            and str(a["speculative_algorithm"] or "").upper() in ("EAGLE3", "DFLASH", "DSPARK")
            and a["speculative_draft_model_path"] is not None
        ),
        "validation_hook.py::handle_aux_hidden_state_capture",
        "remove {flag}: it turns the server into an aux-hidden-state capture, not a speculative "
        "server",
        trigger=("--enable-return-aux-hidden-states",),
    ),
    Refusal(
        "return_aux_hidden_state_layer_ids",
        "--return-aux-hidden-state-layer-ids requires --enable-return-aux-hidden-states.",
        lambda a: (
            a["return_aux_hidden_state_layer_ids"] is not None
            and not a["enable_return_aux_hidden_states"]
        ),
        "validation_hook.py::handle_aux_hidden_state_capture",
        "remove {flag}",
        trigger=("--return-aux-hidden-state-layer-ids", "2"),
    ),
    Refusal(
        "speculative_eagle_topk",
        lambda a: (
            "speculative_eagle_topk > 1 with page_size > 1 is only supported on "
            f"{_PAGE_TREE_BACKENDS}; got attention_backend={a['attention_backend']!r}."
        ),
        lambda a: (
            _tree(a)
            and _num(a, "page_size", 1) > 1
            and a["attention_backend"] is not None
            and a["attention_backend"] not in _PAGE_TREE_BACKENDS
        ),
        "speculative_hook.py::_handle_eagle_family",
        "use --attention-backend flashinfer, fa3 or triton for a tree draft with pages, or "
        "drafter.eagle_topk: 1, or page size 1",
        trigger=("--attention-backend", "torch_native", "--page-size", "2"),
    ),
    # --- attention -------------------------------------------------------------------------
    Refusal(
        "enable_mis",
        "Multi-item scoring requires flashinfer attention backend for custom attention mask "
        "support. Please set --attention-backend flashinfer when using --enable-mis.",
        lambda a: bool(a["enable_mis"]) and _backends(a) != ("flashinfer", "flashinfer"),
        "attention_hook.py::handle_multi_item_scoring",
        "add --attention-backend flashinfer to extra_args (SGLang's default backend for the GPU "
        "may be another), or remove {flag}",
        trigger=("--enable-mis",),
        passes=("--attention-backend", "flashinfer"),
    ),
    Refusal(
        "prefill_attention_backend",
        "CuteDSL MLA only supports decoding for now",
        lambda a: a["prefill_attention_backend"] == "cutedsl_mla",
        "overrides.py::_cutedsl_prefill_backend_fill",
        "use cutedsl_mla as --decode-attention-backend only",
        trigger=("--prefill-attention-backend", "cutedsl_mla"),
    ),
    Refusal(
        "linear_attn_decode_backend",
        "--linear-attn-decode-backend flashkda is not supported: FlashKDA is prefill-only.",
        lambda a: a["linear_attn_decode_backend"] == "flashkda",
        "attention_hook.py::handle_linear_attn_backend",
        "use --linear-attn-prefill-backend flashkda (decode stays on triton)",
        trigger=("--linear-attn-decode-backend", "flashkda"),
    ),
    Refusal(
        "enable_deterministic_inference",
        lambda a: (
            f"Currently only {list(_DETERMINISTIC_BACKENDS)} attention backends are "
            "supported for deterministic inference, but you explicitly specified "
            f"'{a['attention_backend']}'."
        ),
        lambda a: (
            (bool(a["enable_deterministic_inference"]) or a["rl_on_policy_target"])
            and a["attention_backend"] is not None
            and a["attention_backend"] not in _DETERMINISTIC_BACKENDS
        ),
        "overrides.py::_deterministic_attention_backend",
        f"use --attention-backend one of {', '.join(_DETERMINISTIC_BACKENDS)}, or leave it to "
        "SGLang",
        trigger=("--enable-deterministic-inference", "--attention-backend", "torch_native"),
        passes=("--attention-backend", "triton"),
    ),
    Refusal(
        "enable_page_major_kv_layout",
        "--enable-page-major-kv-layout without --enable-unified-memory is temporarily unsupported",
        lambda a: bool(a["enable_page_major_kv_layout"]) and not a["enable_unified_memory"],
        "kv_cache_hook.py::handle_page_major_kv_layout",
        "add --enable-unified-memory, or remove {flag}",
        trigger=("--enable-page-major-kv-layout",),
    ),
    # --- parallelism -----------------------------------------------------------------------
    Refusal(
        "enable_tp_lm_head_all_to_all",
        _tp_lm_head_words,
        lambda a: bool(a["enable_tp_lm_head_all_to_all"]) and _attn_dp(a) <= 1,
        "overrides.py::_dp_lm_head_validation",
        _DP_FIX,
        trigger=("--enable-tp-lm-head-all-to-all",),
    ),
    Refusal(
        "enable_two_batch_overlap",
        _tbo_words,
        lambda a: (
            bool(a["enable_two_batch_overlap"])
            and a["moe_a2a_backend"] == "none"
            and _attn_dp(a) <= 1
        ),
        "validation_hook.py::check_two_batch_overlap",
        "choose an EP --moe-a2a-backend or turn DP attention on, or remove {flag}",
        trigger=("--enable-two-batch-overlap",),
    ),
    Refusal(
        "moe_a2a_backend",
        _pplx_words,
        lambda a: a["moe_a2a_backend"] == "pplx" and _attn_dp(a) < 2,
        "moe_hook.py::handle_a2a_moe",
        _DP_FIX,
        trigger=("--moe-a2a-backend", "pplx"),
    ),
    Refusal(
        "moe_a2a_backend",
        _flashinfer_a2a_words,
        lambda a: a["moe_a2a_backend"] == "flashinfer" and not _flashinfer_a2a_fits(a),
        "moe_hook.py::handle_a2a_moe",
        "turn DP attention on with dp equal to tp, or use another --moe-a2a-backend",
        trigger=("--moe-a2a-backend", "flashinfer"),
    ),
    Refusal(
        "flashinfer_a2a_dispatch_type",
        "--flashinfer-a2a-dispatch-type requires --moe-a2a-backend flashinfer.",
        lambda a: (
            a["moe_a2a_backend"] != "flashinfer"
            and a["flashinfer_a2a_dispatch_type"] not in (None, "auto")
        ),
        "moe_hook.py::handle_a2a_moe",
        "remove {flag}",
        trigger=("--flashinfer-a2a-dispatch-type", "bf16"),
    ),
    Refusal(
        "attn_cp_size",
        "tp_size must be divisible by attn_cp_size",
        lambda a: _num(a, "attn_cp_size", 1) > 1 and a["tp_size"] % a["attn_cp_size"] != 0,
        "parallel_hook.py::handle_context_parallelism",
        "use an --attn-cp-size that divides parallelism.tp",
        trigger=("--attn-cp-size", "3"),
    ),
    Refusal(
        "moe_dp_size",
        "tp_size must be divisible by moe_dp_size",
        lambda a: _num(a, "moe_dp_size", 1) > 1 and a["tp_size"] % a["moe_dp_size"] != 0,
        "parallel_hook.py::handle_context_parallelism",
        "use a --moe-dp-size that divides parallelism.tp",
        trigger=("--moe-dp-size", "3"),
    ),
    Refusal(
        "moe_dp_size",
        "attn_cp_size != moe_dp_size is only supported when moe_dp_size == 1",
        lambda a: (
            _num(a, "moe_dp_size", 1) > 1
            and a["tp_size"] % a["moe_dp_size"] == 0
            and _num(a, "attn_cp_size", 1) != a["moe_dp_size"]
        ),
        "parallel_hook.py::handle_context_parallelism",
        "set --attn-cp-size equal to --moe-dp-size, or remove {flag}",
        trigger=("--moe-dp-size", "2"),
    ),
    Refusal(
        "moe_dense_tp_size",
        "moe_dense_tp_size only supports None, 1, or tp_size currently",
        lambda a: a["moe_dense_tp_size"] not in (None, 1, a["tp_size"]),
        "validation_hook.py::check_server_args",
        "use --moe-dense-tp-size 1, or parallelism.tp",
        trigger=("--moe-dense-tp-size", "3"),
    ),
    Refusal(
        "dwdp_size",
        lambda a: f"dwdp_size ({a['dwdp_size']}) must equal tp_size ({a['tp_size']})",
        lambda a: _num(a, "dwdp_size", 1) > 1 and a["dwdp_size"] != a["tp_size"],
        "parallel_hook.py::handle_dwdp",
        "set --dwdp-size to parallelism.tp, or remove {flag}",
        trigger=("--dwdp-size", "3"),
    ),
    Refusal(
        "dwdp_size",
        "DWDP does not support speculative decoding (MTP/draft workers)",
        lambda a: (
            _num(a, "dwdp_size", 1) > 1
            and a["dwdp_size"] == a["tp_size"]
            and a["disaggregation_mode"] in ("null", "prefill")
            and not a["enable_eplb"]
            and _speculates(a)
        ),
        "parallel_hook.py::handle_dwdp",
        _SPEC_FIX,
        trigger=("--dwdp-size", "8"),
    ),
    Refusal(
        "enable_quant_communications",
        _quant_comm_words,
        _given_true("enable_quant_communications"),
        "validation_hook.py::check_server_args",
        "remove {flag}: communications quantization runs on Ascend NPUs only",
        trigger=("--enable-quant-communications",),
    ),
    Refusal(
        "enable_eplb",
        "",
        lambda a: (
            bool(a["enable_eplb"]) and a["ep_join_mode"] != "scale" and _num(a, "ep_size", 1) <= 1
        ),
        "parallel_hook.py::handle_eplb_and_dispatch",
        "set parallelism.ep above 1, or remove {flag}",
        says="`assert resolved_view(server_args).ep_size > 1` fails (an AssertionError with no "
        "message): expert-parallel load balancing needs expert parallelism",
        trigger=("--enable-eplb",),
    ),
    Refusal(
        "ep_dispatch_algorithm",
        lambda a: (
            f"--ep-dispatch-algorithm {a['ep_dispatch_algorithm']} picks a different "
            "physical replica per rank, which only holds up when an a2a backend routes each token "
            "to a single rank."
        ),
        lambda a: a["ep_dispatch_algorithm"] in ("static", "lp") and a["moe_a2a_backend"] == "none",
        "parallel_hook.py::handle_eplb_and_dispatch",
        "use --ep-dispatch-algorithm dynamic with --moe-a2a-backend none",
        trigger=("--ep-dispatch-algorithm", "static"),
    ),
    Refusal(
        "ep_join_mode",
        "--elastic-ep-join-mode requires --elastic-ep-backend to be set.",
        lambda a: a["ep_join_mode"] is not None and a["elastic_ep_backend"] is None,
        "parallel_hook.py::handle_elastic_ep",
        "add --elastic-ep-backend, or remove {flag}",
        trigger=("--elastic-ep-join-mode", "recover"),
    ),
    Refusal(
        "ep_join_rank_offset",
        "--elastic-ep-join-rank-offset is only valid with --elastic-ep-join-mode scale.",
        lambda a: _num(a, "ep_join_rank_offset") != 0 and a["ep_join_mode"] != "scale",
        "parallel_hook.py::handle_elastic_ep",
        "remove {flag}",
        trigger=("--elastic-ep-join-rank-offset", "1"),
    ),
    Refusal(
        "max_ep_size",
        "--max-ep-size requires --elastic-ep-backend to be set.",
        lambda a: a["max_ep_size"] is not None and a["elastic_ep_backend"] is None,
        "parallel_hook.py::handle_elastic_ep",
        "add --elastic-ep-backend, or remove {flag}",
        trigger=("--max-ep-size", "2"),
    ),
    Refusal(
        "elastic_ep_initial_size",
        "--elastic-ep-initial-size is only valid for an Elastic EP deployment with "
        "--max-ep-size larger than its local TP size.",
        lambda a: (
            a["elastic_ep_initial_size"] is not None
            and not (
                a["elastic_ep_backend"] is not None
                and a["max_ep_size"] is not None
                and _num(a, "max_ep_size") > a["tp_size"]
            )
        ),
        "parallel_hook.py::handle_elastic_ep",
        "remove {flag}",
        trigger=("--elastic-ep-initial-size", "2"),
    ),
    Refusal(
        "enable_prefill_cp",
        "--cp-strategy must be set when --enable-prefill-cp is enabled.",
        lambda a: bool(a["enable_prefill_cp"]) and a["cp_strategy"] is None,
        "parallel_hook.py::handle_context_parallelism",
        "add --cp-strategy zigzag (or interleave), or remove {flag}",
        trigger=("--enable-prefill-cp",),
    ),
    Refusal(
        "dcp_comm_backend",
        lambda a: (
            f"--dcp-comm-backend {a['dcp_comm_backend']} only affects the decode "
            "context-parallel attention reduction and therefore requires --dcp-size / "
            "--decode-context-parallel-size > 1"
        ),
        lambda a: a["dcp_comm_backend"] in ("a2a", "fi_a2a") and _num(a, "dcp_size", 1) <= 1,
        "parallel_hook.py::handle_decode_context_parallelism",
        "remove {flag}",
        trigger=("--dcp-comm-backend", "a2a"),
    ),
    Refusal(
        "dcp_replicate_q_proj",
        "--dcp-replicate-q-proj requires --dcp-size > 1.",
        lambda a: bool(a["dcp_replicate_q_proj"]) and _num(a, "dcp_size", 1) <= 1,
        "parallel_hook.py::handle_decode_context_parallelism",
        "remove {flag}",
        trigger=("--dcp-replicate-q-proj",),
    ),
    # --- disaggregation, caches ------------------------------------------------------------
    Refusal(
        "enable_kv_cache_sharding",
        "--enable-kv-cache-sharding is only supported on PD prefill workers",
        lambda a: bool(a["enable_kv_cache_sharding"]) and a["disaggregation_mode"] != "prefill",
        "kv_shard_hook.py::handle_kv_cache_sharding",
        "remove {flag}: KV sharding is for PD-disaggregated prefill workers",
        trigger=("--enable-kv-cache-sharding",),
    ),
    Refusal(
        "enable_kv_cache_sharding",
        "KV sharding supports speculative decoding only for GLM DSA single-layer NextN MTP with "
        "EAGLE and topk=1.",
        lambda a: (
            bool(a["enable_kv_cache_sharding"])
            and a["disaggregation_mode"] == "prefill"
            and _speculates(a)
            and not (
                _algorithm(a) == "EAGLE" and _topk(a) == 1 and not a["enable_multi_layer_eagle"]
            )
        ),
        "kv_shard_hook.py::handle_kv_cache_sharding",
        "remove {flag}, or turn speculation off",
        trigger=("--enable-kv-cache-sharding", "--disaggregation-mode", "prefill"),
    ),
    Refusal(
        "disaggregation_decode_retraction_backup",
        "--disaggregation-decode-retraction-backup=host_pool is only supported on a PD decode "
        "server.",
        lambda a: (
            (
                a["disaggregation_decode_retraction_backup"] == "host_pool"
                or (
                    a.given("disaggregation_decode_host_receive_threshold")
                    and float(a["disaggregation_decode_host_receive_threshold"]) < 1
                )
            )
            and a["disaggregation_mode"] != "decode"
        ),
        "kv_cache_hook.py::handle_cache_compatibility",
        "remove {flag}: it is for PD-disaggregated decode servers",
        trigger=("--disaggregation-decode-retraction-backup", "host_pool"),
    ),
    Refusal(
        "disaggregation_decode_enable_offload_kvcache",
        "The argument disaggregation-decode-enable-offload-kvcache is only supported for decode "
        "side.",
        lambda a: (
            bool(a["disaggregation_decode_enable_offload_kvcache"])
            and a["disaggregation_mode"] != "decode"
        ),
        "kv_cache_hook.py::handle_cache_compatibility",
        "remove {flag}: it is for PD-disaggregated decode servers",
        trigger=("--disaggregation-decode-enable-offload-kvcache",),
    ),
    Refusal(
        "disaggregation_decode_allocation_policy",
        "--disaggregation-decode-allocation-policy prefill_complete does not yet support "
        "aggregated serving",
        lambda a: (
            a["disaggregation_decode_allocation_policy"] == "prefill_complete"
            and a["disaggregation_mode"] not in ("prefill", "decode")
        ),
        "pd_disaggregation_hook.py::_validate_prefill_complete",
        "remove {flag}: it is for PD-disaggregated servers",
        trigger=("--disaggregation-decode-allocation-policy", "prefill_complete"),
    ),
    Refusal(
        "prefill_kv_cache_dequant_dtype",
        "--prefill-kv-cache-dequant-dtype applies only with --kv-cache-dtype=nvfp4.",
        lambda a: (
            a["kv_cache_dtype"] != "nvfp4"
            and a["prefill_kv_cache_dequant_dtype"] not in (None, "auto")
        ),
        "kv_cache_hook.py::handle_nvfp4_prefill_kv_dequant_dtype",
        "set server.kv_cache_dtype: nvfp4, or remove {flag}",
        trigger=("--prefill-kv-cache-dequant-dtype", "fp8_e4m3"),
    ),
    Refusal(
        "prefill_only_disable_kv_cache",
        "--prefill-only-disable-kv-cache currently requires --is-embedding.",
        lambda a: bool(a["prefill_only_disable_kv_cache"]) and not a["is_embedding"],
        "kv_cache_hook.py::validate_prefill_only_disable_kv_cache_args",
        "remove {flag}: it is for embedding servers",
        trigger=("--prefill-only-disable-kv-cache",),
    ),
    Refusal(
        "enable_prefix_mm_cache",
        "--enable-prefix-mm-cache requires --encoder-only to be enabled",
        lambda a: bool(a["enable_prefix_mm_cache"]) and not a["encoder_only"],
        "pd_disaggregation_hook.py::handle_encoder_disaggregation",
        "remove {flag}: it is for encoder-only servers",
        trigger=("--enable-prefix-mm-cache",),
    ),
    Refusal(
        "enable_linker_mla_dedup",
        "--enable-linker-mla-dedup requires the Mooncake linker.",
        lambda a: (
            bool(a["enable_linker_mla_dedup"])
            and not (
                a["enable_unified_cache_external_linker"]
                and a["unified_cache_external_linker_backend"] == "mooncake"
            )
        ),
        "hicache_hook.py::handle_hicache",
        "add --enable-unified-cache-external-linker (Mooncake), or remove {flag}",
        trigger=("--enable-linker-mla-dedup",),
    ),
    Refusal(
        "radix_eviction_policy",
        "--radix-eviction-policy tlru needs 'threshold' greater than 'next_prompt_estimate' in "
        "--radix-eviction-policy-config, got 0 <= 0",
        lambda a: (
            a["radix_eviction_policy"] == "tlru" and a["radix_eviction_policy_config"] is None
        ),
        "kv_cache_hook.py::handle_cache_compatibility",
        "add --radix-eviction-policy-config with a threshold above next_prompt_estimate",
        trigger=("--radix-eviction-policy", "tlru"),
    ),
    Refusal(
        "enable_megamoe_for_layernorm_sp",
        "--enable-megamoe-for-layernorm-sp requires --enable-layernorm-sp.",
        lambda a: bool(a["enable_megamoe_for_layernorm_sp"]) and not a["enable_layernorm_sp"],
        "layernorm_sp_hook.py::handle_layernorm_sp",
        "remove {flag}",
        trigger=("--enable-megamoe-for-layernorm-sp",),
    ),
    Refusal(
        "enable_mamba_cache_stochastic_rounding",
        lambda a: (
            "Stochastic rounding for the Mamba SSM cache requires --mamba-ssm-dtype "
            f"float16, got {a['mamba_ssm_dtype']!r}."
        ),
        lambda a: (
            bool(a["enable_mamba_cache_stochastic_rounding"]) and a["mamba_ssm_dtype"] != "float16"
        ),
        "mamba_hook.py::handle_mamba_backend",
        "add --mamba-ssm-dtype float16, or remove {flag}",
        trigger=("--enable-mamba-cache-stochastic-rounding",),
    ),
    Refusal(
        "mamba_max_states_per_path",
        lambda a: (
            "--mamba-max-states-per-path must be -1 (unlimited) or a positive integer, "
            f"got {a['mamba_max_states_per_path']}."
        ),
        lambda a: (
            isinstance(a["mamba_max_states_per_path"], int)
            and (a["mamba_max_states_per_path"] == 0 or a["mamba_max_states_per_path"] < -1)
        ),
        "mamba_hook.py::handle_mamba_backend",
        "use -1 (unlimited) or a positive integer",
        trigger=("--mamba-max-states-per-path", "0"),
    ),
    # --- serving ---------------------------------------------------------------------------
    Refusal(
        "grpc_port",
        "--grpc-port is incompatible with --api-key/--admin-api-key: the native gRPC listener "
        "bypasses HTTP auth middleware.",
        lambda a: _native_grpc(a) and bool(a["api_key"] or a["admin_api_key"]),
        "serving_hook.py::handle_deprecated_args",
        "remove {flag} (SGLang's gRPC listener has no API-key check), or server.api_key",
        trigger=("--grpc-port", "50051"),
        passes=("--smg-grpc-mode",),
        # It names what the gRPC server would serve, and sees SGLANG_GRPC_PORT as well.
        reported_by="checks/secrets.py",
    ),
    Refusal(
        "sidecar",
        "--sidecar requires --grpc-port or SGLANG_GRPC_PORT.",
        lambda a: a["sidecar"] is not None and bool(str(a["sidecar"]).strip()) and not _grpc(a),
        "serving_hook.py::handle_deprecated_args",
        "remove {flag}",
        trigger=("--sidecar", "specserve-probe"),
    ),
    Refusal(
        "sidecar_args",
        "--sidecar-args requires --sidecar.",
        lambda a: a["sidecar_args"] is not None and a["sidecar"] is None,
        "serving_hook.py::handle_deprecated_args",
        "remove {flag}",
        trigger=("--sidecar-args", "[]"),
    ),
    Refusal(
        "ssl_keyfile",
        "--ssl-keyfile requires --ssl-certfile to be specified as well.",
        lambda a: bool(a["ssl_keyfile"]) and not a["ssl_certfile"],
        "serving_hook.py::handle_ssl_validation",
        "add --ssl-certfile, or remove {flag}",
        trigger=("--ssl-keyfile", "key.pem"),
    ),
    Refusal(
        "ssl_certfile",
        "--ssl-certfile requires --ssl-keyfile to be specified as well.",
        lambda a: bool(a["ssl_certfile"]) and not a["ssl_keyfile"],
        "serving_hook.py::handle_ssl_validation",
        "add --ssl-keyfile, or remove {flag}",
        trigger=("--ssl-certfile", "cert.pem"),
    ),
    Refusal(
        "ssl_ca_certs",
        "--ssl-ca-certs has no effect without --ssl-certfile and --ssl-keyfile.",
        lambda a: bool(a["ssl_ca_certs"]) and not a["ssl_certfile"] and not a["ssl_keyfile"],
        "serving_hook.py::handle_ssl_validation",
        "add --ssl-certfile and --ssl-keyfile, or remove {flag}",
        trigger=("--ssl-ca-certs", "ca.pem"),
    ),
    Refusal(
        "ssl_keyfile_password",
        "--ssl-keyfile-password has no effect without --ssl-certfile and --ssl-keyfile.",
        lambda a: (
            bool(a["ssl_keyfile_password"]) and not a["ssl_certfile"] and not a["ssl_keyfile"]
        ),
        "serving_hook.py::handle_ssl_validation",
        "add --ssl-certfile and --ssl-keyfile, or remove {flag}",
        trigger=("--ssl-keyfile-password", "secret"),
    ),
    Refusal(
        "enable_ssl_refresh",
        "--enable-ssl-refresh requires --ssl-certfile and --ssl-keyfile to be specified.",
        lambda a: bool(a["enable_ssl_refresh"]) and not (a["ssl_certfile"] and a["ssl_keyfile"]),
        "serving_hook.py::handle_ssl_validation",
        "add --ssl-certfile and --ssl-keyfile, or remove {flag}",
        trigger=("--enable-ssl-refresh",),
    ),
    Refusal(
        "enable_http_worker_reuseport",
        "--enable-http-worker-reuseport requires --tokenizer-worker-num > 1 and has no effect "
        "with --enable-http2.",
        lambda a: (
            bool(a["enable_http_worker_reuseport"])
            and (_num(a, "tokenizer_worker_num", 1) == 1 or bool(a["enable_http2"]))
        ),
        "serving_hook.py::handle_ssl_validation",
        "add --tokenizer-worker-num 2 or more, or remove {flag}",
        trigger=("--enable-http-worker-reuseport",),
    ),
    Refusal(
        "retraction_policy",
        "--retraction-policy priority requires --enable-priority-scheduling",
        lambda a: a["retraction_policy"] == "priority" and not a["enable_priority_scheduling"],
        "validation_hook.py::check_server_args",
        "add --enable-priority-scheduling, or remove {flag}",
        trigger=("--retraction-policy", "priority"),
        passes=("--enable-priority-scheduling",),
    ),
    Refusal(
        "export_metrics_to_file",
        "--export-metrics-to-file-dir is required when --export-metrics-to-file is enabled",
        lambda a: bool(a["export_metrics_to_file"]) and a["export_metrics_to_file_dir"] is None,
        "validation_hook.py::check_server_args",
        "add --export-metrics-to-file-dir DIR, or remove {flag}",
        trigger=("--export-metrics-to-file",),
    ),
    Refusal(
        "load_publish_endpoint",
        "--load-publish-endpoint requires --kv-events-config",
        lambda a: bool(a["load_publish_endpoint"]) and not a["kv_events_config"],
        "validation_hook.py::check_load_publish_args",
        "add --kv-events-config, or remove {flag}",
        trigger=("--load-publish-endpoint", "tcp://127.0.0.1:5557"),
    ),
    Refusal(
        "kv_canary_sweep_interval",
        "--kv-canary-sweep-interval requires --kv-canary in {log, raise}",
        lambda a: _num(a, "kv_canary_sweep_interval") > 0 and a["kv_canary"] == "none",
        "validation_hook.py::check_server_args",
        "add --kv-canary log (or raise), or remove {flag}",
        trigger=("--kv-canary-sweep-interval", "1"),
        passes=("--kv-canary", "log"),
    ),
    Refusal(
        "enable_lora",
        "When no initial --lora-paths is provided, you need to specify both --max-lora-rank and "
        "--lora-target-modules for LoRA initialization.",
        lambda a: (
            bool(a["enable_lora"])
            and not a["lora_paths"]
            and not (a["max_lora_rank"] and a["lora_target_modules"])
        ),
        "lora_hook.py::check_lora_server_args",
        "add --max-lora-rank and --lora-target-modules (or --lora-paths), or remove {flag}",
        trigger=("--enable-lora",),
    ),
    Refusal(
        "moe_runner_backend",
        lambda a: (
            f"--moe-runner-backend {a['moe_runner_backend']} requires --enable-lora (or "
            "--lora-paths)"
        ),
        lambda a: (
            str(a["moe_runner_backend"] or "").startswith("lora")
            and not a["enable_lora"]
            and not a["lora_paths"]
        ),
        "lora_hook.py::check_lora_moe_runner_args",
        "add --enable-lora, or use another --moe-runner-backend",
        since="0.5.23",
        trigger=("--moe-runner-backend", "lora_triton"),
    ),
    Refusal(
        "enable_pdmux",
        "PD-Multiplexing is not compatible with chunked prefill.",
        lambda a: (
            bool(a["enable_pdmux"])
            and _num(a, "pp_size", 1) == 1
            and a["chunked_prefill_size"] != -1
        ),
        "validation_hook.py::check_server_args",
        "add --chunked-prefill-size -1, or remove {flag}",
        trigger=("--enable-pdmux",),
    ),
    Refusal(
        "quantize_and_serve",
        "quantize_and_serve requires ModelOpt quantization",
        lambda a: bool(a["quantize_and_serve"]) and a["quantization"] not in _MODELOPT,
        "configs/model_config.py::_validate_quantize_and_serve_config",
        f"add --quantization (one of {', '.join(_MODELOPT)}), or remove {{flag}}",
        trigger=("--quantize-and-serve",),
    ),
    Refusal(
        "quantization",
        lambda a: f"Unknown quantization method: {a['quantization']}.",
        lambda a: a["quantization"] in _UNKNOWN_QUANTIZATION,
        "configs/model_config.py::_verify_quantization",
        "remove {flag} (the checkpoint's own quantization_config is used), or use a method "
        "SGLang's error lists",
        trigger=("--quantization", "gptq"),
    ),
    Refusal(
        "json_model_override_args",
        lambda a: _json_error(a["json_model_override_args"]) or "",
        lambda a: (
            a.given("json_model_override_args")
            and _json_error(a["json_model_override_args"]) is not None
        ),
        "configs/model_config.py::ModelConfig.__init__",
        "write {flag} as a JSON object, e.g. '{{\"max_position_embeddings\": 65536}}'",
        trigger=("--json-model-override-args", "not-json"),
    ),
    Refusal(
        "prompt_tokens_buckets",
        _bucket_words("prompt_tokens_buckets"),
        _bucket_rule("prompt_tokens_buckets"),
        "validation_hook.py::validate_buckets_rule",
        "start {flag} with tse, default or custom",
        trigger=("--prompt-tokens-buckets", "linear"),
    ),
    Refusal(
        "generation_tokens_buckets",
        _bucket_words("generation_tokens_buckets"),
        _bucket_rule("generation_tokens_buckets"),
        "validation_hook.py::validate_buckets_rule",
        "start {flag} with tse, default or custom",
        trigger=("--generation-tokens-buckets", "linear"),
    ),
    Refusal(
        "log_level",
        lambda a: f"module 'logging' has no attribute '{str(a['log_level']).upper()}'",
        lambda a: str(a["log_level"]).upper() not in LOG_LEVELS,
        "server_args.py::prepare_server_args",
        "use one of logging's levels: debug or info (warning and above silence the decode "
        "lines, checks/logs.py)",
        trigger=("--log-level", "verbose"),
    ),
)


def start_refusals(view: ArgvView) -> list[Hit]:
    """Every rule of `REFUSALS` SGLang `view.contract.version` stops on for this argv."""
    hits = []
    for rule in REFUSALS:
        if rule.applies_to(view):
            hits.append(Hit(rule, rule.text(view), view.where(rule.dest), view.flag(rule.dest)))
    return hits


def check_startup(profile: Profile, contract: Contract) -> list[Issue]:
    view = profile_view(profile, contract)
    if view is None:
        return []
    issues = []
    for hit in start_refusals(view):
        if hit.rule.reported_by:
            continue
        said = hit.words or hit.rule.says or ""
        issues.append(
            error(
                hit.where,
                f"SGLang {contract.version} refuses to start ({hit.rule.hook}): {said}",
                hit.rule.fix.format(flag=hit.flag),
            )
        )
    return issues
