"""SGLang launch_server flags the profile owns, with the profile field that sets each.

Names checked against sgl-project/sglang python/sglang/srt/server_args.py (ServerArgs fields map
to `--field-name`; aliases registered there are listed too). `extra_args` may not repeat any of
these: a second, hand-written value would silently win or lose depending on argparse order.
"""

from __future__ import annotations

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
    "--tp": "parallelism.tp",
    "--tensor-parallel-size": "parallelism.tp",
    "--dp-size": "parallelism.dp",
    "--dp": "parallelism.dp",
    "--data-parallel-size": "parallelism.dp",
    "--enable-dp-attention": "parallelism.enable_dp_attention",
    "--ep-size": "parallelism.ep",
    "--ep": "parallelism.ep",
    "--expert-parallel-size": "parallelism.ep",
    "--host": "server.host",
    "--port": "server.port",
    "--mem-fraction-static": "server.mem_fraction_static",
    "--cuda-graph-max-bs": "server.cuda_graph_max_bs",
    "--num-continuous-decode-steps": "server.num_continuous_decode_steps",
    "--disable-custom-all-reduce": "server.disable_custom_all_reduce",
    "--enable-metrics": "server.enable_metrics",
    "--disable-cuda-graph": "server.disable_cuda_graph",
    "--api-key": "server.api_key",
    "--decode-log-interval": "logging.decode_log_interval",
}


def flag_name(arg: str) -> str | None:
    """`--foo_bar=1` -> `--foo-bar`; None for values (anything not starting with --)."""
    if not arg.startswith("--"):
        return None
    return "--" + arg[2:].split("=", 1)[0].replace("_", "-")
