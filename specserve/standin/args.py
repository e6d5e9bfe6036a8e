"""The stand-in's command line: `sglang.launch_server`'s flag names, so a profile renders one argv.

Flags keep upstream's spellings and aliases (`--tp-size`/`--tensor-parallel-size`, ...). The
ones the behaviour model reads are typed; the rest are accepted and reported by
/get_server_info so that any argv a profile renders for SGLang also starts the stand-in. An
unknown flag is an argparse error (exit 2), as with SGLang. Stand-in-only knobs are environment
variables (specserve.standin.knobs), never flags, so the flag surface stays SGLang's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specserve.standin import STANDIN_NOTICE

SPEC_ALGORITHMS: tuple[str, ...] = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
# Algorithms whose drafter reads the target's hidden states (EAGLE family).
EAGLE_FAMILY: tuple[str, ...] = ("EAGLE", "EAGLE3", "NEXTN")

# Flags that take a value and that the stand-in only records (upstream names, default None).
_VALUE_FLAGS: tuple[str, ...] = (
    "--tokenizer-path",
    "--tokenizer-mode",
    "--load-format",
    "--dtype",
    "--kv-cache-dtype",
    "--quantization",
    "--revision",
    "--download-dir",
    "--chat-template",
    "--completion-template",
    "--json-model-override-args",
    "--max-running-requests",
    "--max-total-tokens",
    "--chunked-prefill-size",
    "--max-prefill-tokens",
    "--schedule-policy",
    "--schedule-conservativeness",
    "--page-size",
    "--stream-interval",
    "--random-seed",
    "--watchdog-timeout",
    "--dist-timeout",
    "--base-gpu-id",
    "--gpu-id-step",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
    "--attention-backend",
    "--prefill-attention-backend",
    "--decode-attention-backend",
    "--sampling-backend",
    "--grammar-backend",
    "--moe-a2a-backend",
    "--moe-runner-backend",
    "--cuda-graph-bs",
    "--torch-compile-max-bs",
    "--log-level",
    "--log-level-http",
    "--log-requests-level",
    "--device",
    "--speculative-draft-model-revision",
    "--speculative-accept-threshold-single",
    "--speculative-accept-threshold-acc",
    "--speculative-token-map",
    "--speculative-attention-mode",
    "--speculative-draft-load-format",
    "--warmups",
    "--kv-events-config",
    "--bucket-time-to-first-token",
    "--bucket-inter-token-latency",
    "--bucket-e2e-request-latency",
    "--prompt-tokens-buckets",
    "--generation-tokens-buckets",
    "--file-storage-path",
    "--hicache-ratio",
    "--hicache-size",
    "--disaggregation-mode",
    "--model-loader-extra-config",
    "--mm-attention-backend",
    "--api-key-file",
    "--admin-api-key",
)

# Boolean switches that the stand-in only records (upstream names).
_SWITCHES: tuple[str, ...] = (
    "--skip-tokenizer-init",
    "--enable-p2p-check",
    "--enable-torch-compile",
    "--enable-mixed-chunk",
    "--disable-radix-cache",
    "--disable-overlap-schedule",
    "--disable-cuda-graph-padding",
    "--enable-dp-lm-head",
    "--enable-cache-report",
    "--enable-hierarchical-cache",
    "--enable-request-time-stats-logging",
    "--collect-tokens-histogram",
    "--enable-metrics-for-all-schedulers",
    "--log-requests",
    "--show-time-cost",
    "--skip-server-warmup",
    "--allow-auto-truncate",
    "--sleep-on-idle",
    "--enable-nan-detection",
    "--enable-two-batch-overlap",
    "--disable-chunked-prefix-cache",
    "--enable-eplb",
    "--enable-deterministic-inference",
    "--disable-fast-image-processor",
)


@dataclass(frozen=True)
class SpecConfig:
    """Speculative parameters after upstream's defaulting rules (None = no speculation)."""

    algorithm: str
    draft_model_path: str | None
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int


@dataclass(frozen=True)
class StandinArgs:
    """Parsed server arguments; `raw` holds every flag for /get_server_info."""

    model_path: str
    served_model_name: str
    host: str
    port: int
    api_key: str | None
    tp_size: int
    dp_size: int
    pp_size: int
    ep_size: int
    enable_dp_attention: bool
    spec: SpecConfig | None
    disable_cuda_graph: bool
    enable_metrics: bool
    decode_log_interval: int
    context_length: int | None
    mem_fraction_static: float | None
    cuda_graph_max_bs: int | None
    num_continuous_decode_steps: int
    raw: dict[str, Any] = field(default_factory=dict)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specserve-standin",
        description=(
            f"{STANDIN_NOTICE}. Accepts sglang.launch_server's flags. Stand-in-only knobs are "
            "environment variables: SPECSERVE_STANDIN_LOAD_SECONDS, "
            "SPECSERVE_STANDIN_WARMUP_SECONDS, SPECSERVE_STANDIN_BEHAVIOUR_FILE, "
            "SPECSERVE_STANDIN_CRASH_AFTER_SECONDS, SPECSERVE_STANDIN_CRASH_EXIT_CODE, "
            "SPECSERVE_STANDIN_TIME_SCALE, SPECSERVE_STANDIN_BASE_TPS (see docs/standin.md)."
        ),
    )
    parser.add_argument("--model-path", "--model", dest="model_path", required=True)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--tensor-parallel-size", "--tp-size", dest="tp_size", type=int, default=1)
    parser.add_argument("--data-parallel-size", "--dp-size", dest="dp_size", type=int, default=1)
    parser.add_argument(
        "--pipeline-parallel-size", "--pp-size", dest="pp_size", type=int, default=1
    )
    parser.add_argument(
        "--expert-parallel-size", "--ep-size", "--ep", dest="ep_size", type=int, default=1
    )
    parser.add_argument("--enable-dp-attention", action="store_true")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--mem-fraction-static", type=float, default=None)
    parser.add_argument("--context-length", type=int, default=None)
    parser.add_argument("--cuda-graph-max-bs", type=int, default=None)
    parser.add_argument("--num-continuous-decode-steps", type=int, default=1)
    parser.add_argument("--disable-cuda-graph", action="store_true")
    parser.add_argument("--disable-custom-all-reduce", action="store_true")
    parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--decode-log-interval", type=int, default=40)
    parser.add_argument("--tool-call-parser", default=None)
    parser.add_argument("--reasoning-parser", default=None)
    parser.add_argument("--speculative-algorithm", choices=SPEC_ALGORITHMS, default=None)
    parser.add_argument("--speculative-draft-model-path", default=None)
    parser.add_argument("--speculative-num-steps", type=int, default=None)
    parser.add_argument("--speculative-eagle-topk", type=int, default=None)
    parser.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    for flag in dict.fromkeys(_VALUE_FLAGS):
        parser.add_argument(flag, default=None)
    for flag in dict.fromkeys(_SWITCHES):
        parser.add_argument(flag, action="store_true")
    return parser


def _spec_config(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> SpecConfig | None:
    algorithm: str | None = ns.speculative_algorithm
    values = (ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens)
    if algorithm is None:
        if any(v is not None for v in values) or ns.speculative_draft_model_path:
            parser.error("speculative parameters given without --speculative-algorithm")
        return None
    draft_path = ns.speculative_draft_model_path
    if draft_path is None and algorithm in ("EAGLE", "NEXTN"):
        # NEXTN/MTP drafts live inside the target checkpoint, as upstream assumes.
        draft_path = ns.model_path
    if draft_path is None and algorithm in ("EAGLE3", "STANDALONE"):
        parser.error(f"--speculative-draft-model-path is required for {algorithm}")
    # Upstream fills unset values with steps 3 / top-k 1 / draft tokens steps + 1.
    steps = ns.speculative_num_steps if ns.speculative_num_steps is not None else 3
    topk = ns.speculative_eagle_topk if ns.speculative_eagle_topk is not None else 1
    draft = ns.speculative_num_draft_tokens
    for name, value in (("num-steps", steps), ("eagle-topk", topk)):
        if value < 1:
            parser.error(f"--speculative-{name} must be >= 1, got {value}")
    if topk == 1:
        # Upstream: a chain (top-k 1) verifies exactly steps + 1 tokens.
        draft = steps + 1
    elif draft is None:
        draft = steps + 1
    if draft < 2:
        parser.error(f"--speculative-num-draft-tokens must be >= 2, got {draft}")
    return SpecConfig(algorithm, draft_path, steps, topk, draft)


def parse_args(argv: Sequence[str] | None = None) -> StandinArgs:
    parser = build_parser()
    ns = parser.parse_args(argv)
    for name in ("tp_size", "dp_size", "pp_size", "ep_size", "decode_log_interval"):
        if getattr(ns, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(ns, name)}")
    if not 1 <= ns.port <= 65535:
        parser.error(f"--port must be 1..65535, got {ns.port}")
    spec = _spec_config(parser, ns)
    return StandinArgs(
        model_path=ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        host=ns.host,
        port=ns.port,
        api_key=ns.api_key,
        tp_size=ns.tp_size,
        dp_size=ns.dp_size,
        pp_size=ns.pp_size,
        ep_size=ns.ep_size,
        enable_dp_attention=ns.enable_dp_attention,
        spec=spec,
        disable_cuda_graph=ns.disable_cuda_graph,
        enable_metrics=ns.enable_metrics,
        decode_log_interval=ns.decode_log_interval,
        context_length=ns.context_length,
        mem_fraction_static=ns.mem_fraction_static,
        cuda_graph_max_bs=ns.cuda_graph_max_bs,
        num_continuous_decode_steps=ns.num_continuous_decode_steps,
        raw={k: v for k, v in vars(ns).items() if k != "api_key"},
    )
