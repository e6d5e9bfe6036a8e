"""Decode CUDA graphs stay on unless the profile explicitly allows turning them off.

The field notes (docs/design/origins.md) measured 56.7 tok/s without CUDA graphs against 74.9
tok/s with them. SGLang decides the decode graph in two steps, the same in 0.5.21 and 0.5.23:
- the graph flags, resolved in sglang/srt/arg_groups/cuda_graph_hook.py::parse_cuda_graph_config,
  lowest precedence first: the deprecated `--disable-cuda-graph` (both phases),
  `--disable-decode-cuda-graph`, `--cuda-graph-backend-decode disabled`, and a
  `--cuda-graph-config` JSON whose `decode.backend` is `disabled`; the last one written wins;
- then the hooks that run after it and turn decode graphs off for other options (`GRAPHS_OFF`):
  a `torch_native` or `flex_attention` backend, tensor-dump and msProbe debugging, DeepEP's normal
  mode, multi-item scoring, a PD prefill worker (unless the decode backend is chosen explicitly),
  DWDP. Most of them override an explicit `--cuda-graph-backend-decode full`.
The contract suite (tests/contract/test_startup_refusals.py) resolves every option of each
verified version's table with SGLang's real code and fails when one turns decode graphs off that
`GRAPHS_OFF` does not name, so the state below is the one SGLang resolves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from specserve.profile.argview import ArgvView, attention_backend, profile_view
from specserve.profile.flags import (
    DECODE_GRAPH_BACKEND_FLAG,
    DISABLE_DECODE_GRAPH_FLAG,
    GRAPH_CONFIG_FLAG,
    GRAPH_FLAGS,
    arg_value,
    flag_spelling,
)
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile
from specserve.profile.sglang import Contract

DISABLED = "disabled"
PHASES: tuple[str, ...] = ("decode", "prefill")  # cuda_graph_config.Phase.ALL


@dataclass(frozen=True)
class DecodeGraph:
    backend: str  # what SGLang resolves for the decode phase
    where: str  # the profile field that decided it
    how: str  # the words that decided it
    why: str = ""  # what SGLang says when a hook turns it off (its log line, or its code)


@dataclass(frozen=True)
class GraphOff:
    """A resolution hook that sets the decode phase's backend to `disabled` when `when` holds."""

    dests: tuple[str, ...]  # the options whose words decide it (the first one is named)
    when: Callable[[ArgvView], bool]
    says: str  # SGLang's log line, or what its code does where it logs nothing
    hook: str
    # True: only while the decode backend is not chosen explicitly (SGLang checks
    # `(Phase.DECODE, "backend") in _cuda_graph_config_locked` first).
    unless_chosen: bool = False


GRAPHS_OFF: tuple[GraphOff, ...] = (
    GraphOff(
        ("attention_backend", "prefill_attention_backend", "decode_attention_backend"),
        lambda a: attention_backend(a) == "torch_native",
        "Cuda graph is disabled because of using torch native attention backend",
        "attention_hook.py::handle_attention_backend_compatibility",
    ),
    GraphOff(
        ("attention_backend", "prefill_attention_backend", "decode_attention_backend"),
        lambda a: attention_backend(a) == "flex_attention",
        "Cuda graph is disabled because of using torch Flex Attention backend",
        "attention_hook.py::handle_attention_backend_compatibility",
    ),
    GraphOff(
        ("debug_tensor_dump_output_folder",),
        lambda a: a["debug_tensor_dump_output_folder"] is not None,
        "Cuda graph and server warmup are disabled because of using tensor dump mode",
        "serving_hook.py::handle_other_validations",
    ),
    GraphOff(
        ("msprobe_dump_config",),
        lambda a: a["msprobe_dump_config"] is not None,
        "When msProbe is enabled, cuda graph is disabled because msProbe only supports dump in "
        "eager mode",
        "serving_hook.py::handle_other_validations",
    ),
    GraphOff(
        ("deepep_mode", "moe_a2a_backend"),
        lambda a: a["moe_a2a_backend"] == "deepep" and a["deepep_mode"] == "normal",
        "Cuda graph is disabled because deepep_mode=`normal`",
        "moe_hook.py::handle_a2a_moe",
    ),
    GraphOff(
        ("enable_mis",),
        lambda a: bool(a["enable_mis"]),
        "CUDA graph is disabled because --enable-mis is set.",
        "attention_hook.py::handle_multi_item_scoring",
    ),
    GraphOff(
        ("disaggregation_mode",),
        lambda a: a["disaggregation_mode"] == "prefill",
        "a PD prefill worker runs no decode: SGLang disables the decode phase's graph without a "
        "log line",
        "cuda_graph_hook.py::apply_cuda_graph_disaggregation_roles",
        unless_chosen=True,
    ),
    GraphOff(
        ("dwdp_size",),
        lambda a: isinstance(a["dwdp_size"], int) and a["dwdp_size"] > 1,
        "DWDP enabled: ... disable_cuda_graph=True",
        "parallel_hook.py::handle_dwdp",
    ),
)


def graphs_off(view: ArgvView) -> list[GraphOff]:
    """The `GRAPHS_OFF` hooks that fire for this argv (whether or not the backend is chosen)."""
    return [g for g in GRAPHS_OFF if all(view.known(d) for d in g.dests) and g.when(view)]


def _config_backend(raw: str, backends: list[str]) -> tuple[str | None, str | None]:
    """(decode backend the JSON sets or None, problem) as parse_cuda_graph_config_arg sees it."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"is not JSON ({exc})"
    if not isinstance(parsed, dict):
        return None, f"must be a JSON object, got {type(parsed).__name__}"
    for phase, settings in parsed.items():
        if phase not in PHASES:
            return None, f"has unknown phase {phase!r}; expected one of {', '.join(PHASES)}"
        if not isinstance(settings, dict):
            return None, f"[{phase!r}] must be a JSON object"
        backend = settings.get("backend")
        if backend is not None and backend not in backends:
            return None, (
                f"[{phase!r}].backend {backend!r} is not allowed; allowed: {', '.join(backends)}"
            )
    decode = parsed.get("decode") or {}
    backend = decode.get("backend")
    return (str(backend) if backend is not None else None), None


def resolve_decode_graph(profile: Profile, contract: Contract) -> tuple[DecodeGraph, list[Issue]]:
    """The decode backend SGLang would resolve from the profile, and malformed graph settings."""
    srv = profile.server
    backend_opt = contract.option(DECODE_GRAPH_BACKEND_FLAG)
    backends = [str(c) for c in (getattr(backend_opt, "choices", None) or ())]
    state = DecodeGraph("full", "", "SGLang's default")
    if srv.disable_cuda_graph:
        state = DecodeGraph(DISABLED, "server.disable_cuda_graph", "disable_cuda_graph: true")
    issues: list[Issue] = []
    # Precedence ranks of parse_cuda_graph_config; equal ranks: the later word wins (argparse).
    ranked: dict[int, DecodeGraph] = {}
    args = srv.extra_args
    for i, arg in enumerate(args):
        spelled = flag_spelling(arg)
        where = f"server.extra_args[{i}]"
        if spelled == "--disable-cuda-graph":
            ranked[0] = DecodeGraph(DISABLED, where, spelled)
        elif spelled == DISABLE_DECODE_GRAPH_FLAG:
            ranked[1] = DecodeGraph(DISABLED, where, spelled)
        elif spelled == DECODE_GRAPH_BACKEND_FLAG:
            value = arg_value(args, i)
            if value is not None and value in backends:
                ranked[2] = DecodeGraph(value, where, f"{spelled} {value}")
        elif spelled == GRAPH_CONFIG_FLAG:
            raw = arg_value(args, i)
            backend, problem = _config_backend(raw or "", backends)
            if problem is not None:
                issues.append(
                    error(
                        where,
                        f"{GRAPH_CONFIG_FLAG} {problem}; SGLang {contract.version} refuses it",
                        'write a JSON object of phases, e.g. \'{"decode": {"max_bs": 64}}\'',
                    )
                )
            elif backend is not None:
                how = f"{GRAPH_CONFIG_FLAG} decode.backend {backend}"
                ranked[3] = DecodeGraph(backend, where, how)
    if ranked and srv.disable_cuda_graph:
        first = min(i for i, a in enumerate(args) if flag_spelling(a) in GRAPH_FLAGS)
        issues.append(
            error(
                f"server.extra_args[{first}]",
                "extra_args set CUDA-graph backends while server.disable_cuda_graph is true; "
                "whichever argparse reads last would win",
                "keep one: remove the CUDA-graph flags from extra_args, or set "
                "server.disable_cuda_graph: false",
            )
        )
    if ranked:
        state = ranked[max(ranked)]
    view = profile_view(profile, contract)
    if state.backend == DISABLED or view is None:
        return state, issues
    chosen = any(rank >= 2 for rank in ranked)  # a backend written for the decode phase
    for hook in graphs_off(view):
        if hook.unless_chosen and chosen:
            continue
        given = [d for d in hook.dests if view.given(d)] or [hook.dests[0]]
        how = " ".join(view.words(d) for d in given)
        why = f"SGLang {contract.version}'s {hook.hook}: {hook.says}"
        return DecodeGraph(DISABLED, view.where(given[0]), how, why), issues
    return state, issues


def decode_graph_issues(profile: Profile, contract: Contract) -> list[Issue]:
    state, issues = resolve_decode_graph(profile, contract)
    if state.backend != DISABLED:
        return issues
    because = f"; {state.why}" if state.why else ""
    where = state.where or "server.disable_cuda_graph"
    if not profile.server.allow_disable_cuda_graph:
        fix = (
            "keep CUDA graphs on; for a debugging run set server.disable_cuda_graph: true and "
            "server.allow_disable_cuda_graph: true"
        )
        if where.startswith("server.extra_args"):
            fix = (
                f"remove {state.how} from extra_args; for a debugging run use "
                "server.disable_cuda_graph: true with server.allow_disable_cuda_graph: true"
            )
        issues.append(
            error(
                where,
                f"decode CUDA graphs would be disabled ({state.how}{because}); the field notes "
                "measured 56.7 tok/s without them against 74.9 tok/s with them",
                fix,
            )
        )
    else:
        issues.append(
            warning(
                where,
                f"decode CUDA graphs are disabled ({state.how}{because}; allowed by "
                "allow_disable_cuda_graph); decode will be much slower and the cuda-graph alert "
                "will fire",
                "turn them back on after debugging",
            )
        )
    return issues
