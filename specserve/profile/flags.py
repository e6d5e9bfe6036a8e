"""SGLang launch_server flags the profile owns, with the profile field that sets each.

Every spelling here is one SGLang's own parser registers (the option's flag and its aliases, as
`specserve.upstream` records them per version; `tests/profile/test_profile_flags.py` holds this
table to that data). `extra_args` may not repeat any of these: a second, hand-written value would
silently win or lose depending on argparse order.
"""

from __future__ import annotations

# SGLang's option dest -> the profile field that sets it. Every flag of such an option, aliases
# included, is owned (OWNED_FLAGS below lists them; the test derives them from the real tables).
OWNED_DESTS: dict[str, str] = {
    "model_path": "target.path",
    "trust_remote_code": "target.trust_remote_code",
    "tool_call_parser": "target.tool_call_parser",
    "reasoning_parser": "target.reasoning_parser",
    "context_length": "target.context_length",
    "served_model_name": "target.served_model_name",
    "speculative_algorithm": "drafter.algorithm",
    "speculative_draft_model_path": "drafter.path",
    "speculative_num_steps": "drafter.num_steps",
    "speculative_eagle_topk": "drafter.eagle_topk",
    "speculative_num_draft_tokens": "drafter.num_draft_tokens",
    "tp_size": "parallelism.tp",
    "dp_size": "parallelism.dp",
    "enable_dp_attention": "parallelism.enable_dp_attention",
    # 0.5.23+: `--attn-dp-size N` replaces `--dp-size N --enable-dp-attention`.
    "attn_dp_size": "parallelism.enable_dp_attention",
    "ep_size": "parallelism.ep",
    "host": "server.host",
    "port": "server.port",
    "mem_fraction_static": "server.mem_fraction_static",
    "max_running_requests": "server.max_running_requests",
    "cuda_graph_max_bs_decode": "server.cuda_graph_max_bs",
    "num_continuous_decode_steps": "server.num_continuous_decode_steps",
    "disable_custom_all_reduce": "server.disable_custom_all_reduce",
    "enable_metrics": "server.enable_metrics",
    "disable_cuda_graph": "server.disable_cuda_graph",
    "api_key": "server.api_key",
    "decode_log_interval": "logging.decode_log_interval",
}

OWNED_FLAGS: dict[str, str] = {
    "--model-path": "target.path",
    "--model": "target.path",
    "--trust-remote-code": "target.trust_remote_code",
    "--tool-call-parser": "target.tool_call_parser",
    "--reasoning-parser": "target.reasoning_parser",
    "--context-length": "target.context_length",
    "--served-model-name": "target.served_model_name",
    "--speculative-algorithm": "drafter.algorithm",
    "--speculative-draft-model-path": "drafter.path",
    "--speculative-draft-model": "drafter.path",
    "--speculative-num-steps": "drafter.num_steps",
    "--speculative-eagle-topk": "drafter.eagle_topk",
    "--speculative-num-draft-tokens": "drafter.num_draft_tokens",
    "--tp-size": "parallelism.tp",
    "--tensor-parallel-size": "parallelism.tp",
    "--dp-size": "parallelism.dp",
    "--data-parallel-size": "parallelism.dp",
    "--enable-dp-attention": "parallelism.enable_dp_attention",
    "--attn-dp-size": "parallelism.enable_dp_attention",
    "--attention-data-parallel-size": "parallelism.enable_dp_attention",
    "--ep-size": "parallelism.ep",
    "--expert-parallel-size": "parallelism.ep",
    "--ep": "parallelism.ep",
    "--host": "server.host",
    "--port": "server.port",
    "--mem-fraction-static": "server.mem_fraction_static",
    "--max-running-requests": "server.max_running_requests",
    "--cuda-graph-max-bs-decode": "server.cuda_graph_max_bs",
    "--num-continuous-decode-steps": "server.num_continuous_decode_steps",
    "--disable-custom-all-reduce": "server.disable_custom_all_reduce",
    "--enable-metrics": "server.enable_metrics",
    "--disable-cuda-graph": "server.disable_cuda_graph",
    "--api-key": "server.api_key",
    "--decode-log-interval": "logging.decode_log_interval",
}

# Not owned (a user may pick a graph backend or batch sizes by hand), but each can turn decode
# CUDA graphs off, so checks/server.py reads them; the renderer emits the first two when
# server.disable_cuda_graph is allowed.
DECODE_GRAPH_BACKEND_FLAG = "--cuda-graph-backend-decode"
PREFILL_GRAPH_BACKEND_FLAG = "--cuda-graph-backend-prefill"
DISABLE_DECODE_GRAPH_FLAG = "--disable-decode-cuda-graph"
GRAPH_CONFIG_FLAG = "--cuda-graph-config"
GRAPH_FLAGS: frozenset[str] = frozenset(
    {
        DECODE_GRAPH_BACKEND_FLAG,
        PREFILL_GRAPH_BACKEND_FLAG,
        DISABLE_DECODE_GRAPH_FLAG,
        GRAPH_CONFIG_FLAG,
        "--disable-cuda-graph",
    }
)


def flag_spelling(arg: str) -> str | None:
    """`--foo-bar=1` -> `--foo-bar`, exactly as written; None for values (not starting --)."""
    if not arg.startswith("--"):
        return None
    return arg.split("=", 1)[0]


def flag_name(arg: str) -> str | None:
    """`--foo_bar=1` -> `--foo-bar`; None for values (anything not starting with --)."""
    spelled = flag_spelling(arg)
    return None if spelled is None else "--" + spelled[2:].replace("_", "-")


def arg_value(args: tuple[str, ...], i: int) -> str | None:
    """The value written for the flag at args[i]: after `=`, else the next word not a flag."""
    arg = args[i]
    if "=" in arg:
        return arg.split("=", 1)[1]
    if i + 1 < len(args) and not args[i + 1].startswith("--"):
        return args[i + 1]
    return None
