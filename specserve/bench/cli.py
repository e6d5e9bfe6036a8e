"""`specserve bench` flags. The work lives in commands.py, imported only when a bench command
runs, so other `specserve` subcommands never load httpx or matplotlib."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from specserve.apikey import API_KEY_ENV
from specserve.bench.settings import BUILTIN_PROMPTS, METRICS


def _commands() -> Any:
    try:
        from specserve.bench import commands
    except ImportError as exc:
        raise SystemExit(
            f"specserve bench: {exc.name} is not installed. Fix: install the bench extra, "
            "pip install 'specserve[bench]' (scripts/setup/python.sh installs it)"
        ) from exc
    return commands


def _run(args: argparse.Namespace) -> int:
    result: int = _commands().cmd_run_or_usage(args)
    return result


def _baseline_from(args: argparse.Namespace) -> int:
    result: int = _commands().cmd_baseline_from(args)
    return result


def _report(args: argparse.Namespace) -> int:
    result: int = _commands().cmd_report(args)
    return result


def _add_run_flags(parser: argparse.ArgumentParser) -> None:
    server = parser.add_argument_group("server")
    server.add_argument("--url", help="the server's base URL, e.g. http://127.0.0.1:8000")
    server.add_argument(
        "--api-key-file",
        type=Path,
        help=f"file holding the server's --api-key (default: ${API_KEY_ENV}); never printed",
    )
    server.add_argument("--model", help="model name to send (default: the first of /v1/models)")
    load = parser.add_argument_group("load")
    load.add_argument(
        "--concurrency",
        default="1,2,4,8",
        help="comma-separated concurrency levels (default: %(default)s)",
    )
    amount = load.add_mutually_exclusive_group()
    amount.add_argument(
        "--requests-per-level",
        type=int,
        help="requests per level (default: 4 x the level's concurrency)",
    )
    amount.add_argument(
        "--duration", type=float, help="seconds per level instead of a request count"
    )
    load.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="fixed output length per request; sent with ignore_eos (default: %(default)s)",
    )
    load.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sampling temperature (default: %(default)s, greedy)",
    )
    load.add_argument(
        "--prompts",
        default=BUILTIN_PROMPTS,
        help="'builtin' (chat, code, math) or a JSONL file (default: %(default)s)",
    )
    load.add_argument("--kinds", help="comma-separated prompt kinds to use (default: all)")
    load.add_argument(
        "--class-label",
        metavar="LABEL",
        help="send each prompt's kind as SGLang's custom label LABEL (the x-custom-labels "
        "header), so the server's metrics count this run per class: the profile's "
        "server.request_class_label (default: no label)",
    )
    load.add_argument(
        "--warmup-requests",
        type=int,
        default=1,
        help="short requests before the first level (default: %(default)s)",
    )
    load.add_argument(
        "--request-timeout",
        type=float,
        default=600.0,
        help="seconds a request may wait for its next byte (default: %(default)s)",
    )
    seen = parser.add_argument_group("exporter")
    seen.add_argument(
        "--exporter-url",
        help="specserve-exporter /metrics URL, e.g. http://127.0.0.1:9433/metrics: "
        "accept length and server throughput per level",
    )
    seen.add_argument(
        "--exporter-settle-timeout",
        type=float,
        default=5.0,
        help="seconds to wait for the exporter to catch up after a level (default: %(default)s)",
    )
    out = parser.add_argument_group("output")
    out.add_argument(
        "--label",
        help="name of this run in tables and plots (default: speculative or "
        "baseline, from the server's settings)",
    )
    out.add_argument(
        "--baseline-json",
        type=Path,
        help="results.json of a baseline run: adds speedup and the baseline line",
    )
    out.add_argument(
        "--out-dir", type=Path, help="directory for results.json, results.md, plot.png"
    )
    out.add_argument(
        "--overwrite", action="store_true", help="replace results already in --out-dir"
    )


def register(subparsers: Any) -> None:
    bench = subparsers.add_parser(
        "bench",
        help="benchmark the deployed server (throughput, TTFT, ITL, accept length)",
        description="Stream OpenAI-compatible chat completions at several concurrency levels "
        "and write results.json, results.md and plot.png. Exit 0 ok, 1 a level failed "
        "entirely (outputs still written), 2 usage or connection errors (nothing run).",
    )
    _add_run_flags(bench)
    bench.set_defaults(handler=_run)
    sub = bench.add_subparsers(dest="bench_command", metavar="[ACTION]")
    from_result = sub.add_parser(
        "baseline-from",
        help="print the profile's baseline block from a baseline run's results.json",
        description="Print `baseline: {gen_throughput_tok_s: {bucket: tok/s}, source}` for the "
        "deployment profile, from a run against the server started without speculation.",
    )
    from_result.add_argument("result", type=Path, help="results.json of a baseline run")
    from_result.add_argument(
        "--metric",
        choices=METRICS,
        default="auto",
        help="exporter: server gen throughput per bucket (what the alert "
        "compares); client: aggregate tok/s; auto: exporter when the "
        "run had it (default: %(default)s)",
    )
    from_result.add_argument("--format", choices=("yaml", "json"), default="yaml")
    from_result.add_argument(
        "--allow-speculative",
        action="store_true",
        help="accept a result measured with speculative decoding",
    )
    from_result.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="the profile the baseline server was started from: the block then records what "
        "it was measured with (target, parallelism, running-request cap, graphs, NCCL preset, "
        "the server's SGLang version), which `specserve check` and the exporter compare",
    )
    from_result.add_argument(
        "--image", default=None, help="the server image the baseline ran in (recorded too)"
    )
    from_result.set_defaults(handler=_baseline_from)
    report = sub.add_parser(
        "report",
        help="rewrite results.md and plot.png (and speedup) from a results.json",
        description="Regenerate the outputs of a run, e.g. against a baseline measured later.",
    )
    report.add_argument("result", type=Path, help="results.json")
    report.add_argument("--baseline-json", type=Path, help="results.json of a baseline run")
    report.add_argument("--out-dir", type=Path, required=True)
    report.add_argument("--overwrite", action="store_true")
    report.set_defaults(handler=_report)
