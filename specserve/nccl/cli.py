"""`specserve nccl-bench` (also `python -m specserve.nccl`): measure NCCL presets on this node.

Table on stdout, JSON result to --json-out, progress on stderr. Exit status: 0 when every preset
that ran was measured, 1 when one failed or timed out (the JSON still lists it), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specserve.nccl.machine import MachineError, default_python, plan, probe_torch
from specserve.nccl.presets import (
    PresetError,
    builtin_presets,
    load_presets_json,
    presets_document,
    select_presets,
)
from specserve.nccl.sizes import (
    DEFAULT_HIDDEN_SIZE,
    DTYPE_BYTES,
    SizeSpecError,
    default_sizes,
    parse_sizes,
)
from specserve.profile.nccl import TOPOLOGIES, NcclPreset

EXIT_OK, EXIT_PRESET_FAILED, EXIT_USAGE = 0, 1, 2


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--presets",
        help="comma list of presets to measure (default: every preset meant for this topology); "
        "'default' (no NCCL variable) is always measured as the reference",
    )
    parser.add_argument(
        "--presets-json",
        type=Path,
        help="read presets from this JSON file instead of the built-in ones "
        "(format: what --dump-presets prints)",
    )
    parser.add_argument(
        "--dump-presets", action="store_true", help="print the presets as JSON and exit"
    )
    parser.add_argument(
        "--topology",
        choices=("auto", *TOPOLOGIES),
        default="auto",
        help="GPU interconnect the presets are validated against (auto: nvidia-smi topo -m)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="also run presets the validator refuses for this topology (e.g. LL128 on PCIe)",
    )
    parser.add_argument(
        "--python",
        help="interpreter with PyTorch that runs the workers (default: this one if it has torch, "
        "else python3 on PATH, which inside the SGLang image is SGLang's)",
    )
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    parser.add_argument(
        "--world-size", type=_positive, help="ranks, one per GPU (default: all visible GPUs)"
    )
    parser.add_argument("--iters", type=_positive, default=200, help="timed iterations per size")
    parser.add_argument("--warmup", type=_positive, default=20, help="untimed iterations first")
    parser.add_argument(
        "--timing", choices=["graph", "eager"], default="graph",
        help="on GPUs: time all-reduces replayed from a CUDA graph, as SGLang's decode runs them "
        "(graph), or one torch.distributed call each, which adds the host's dispatch (25-45 µs on "
        "an H100) to every small message (eager). CPU runs use the wall clock",
    )
    parser.add_argument(
        "--sizes",
        help="comma list of token counts (tokens x hidden x dtype bytes) and byte sizes "
        "(16MiB, 4096B); default: 1,2,4,...,256 tokens plus 16MiB,64MiB,256MiB",
    )
    parser.add_argument("--hidden-size", type=_positive, default=DEFAULT_HIDDEN_SIZE)
    parser.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bfloat16")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds allowed per preset (all sizes)"
    )
    parser.add_argument(
        "--env",
        type=_env_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set in every worker, default included (e.g. NCCL_SOCKET_IFNAME=lo); repeatable",
    )
    parser.add_argument(
        "--json-out", type=Path, default=Path("nccl-bench.json"), help="where the JSON goes"
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "nccl-bench",
        help="measure all-reduce latency / bus bandwidth of NCCL presets on this node",
        description=__doc__,
    )
    add_arguments(parser)
    parser.set_defaults(handler=handle)


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _load_presets(args: argparse.Namespace) -> dict[str, NcclPreset]:
    if args.presets_json is not None:
        return load_presets_json(args.presets_json)
    return builtin_presets()


def handle(args: argparse.Namespace) -> int:
    from specserve.nccl.bench import SERVER_ENV, BenchConfig, run_benchmark
    from specserve.nccl.report import render_markdown

    try:
        presets = _load_presets(args)
        if args.dump_presets:
            print(json.dumps(presets_document(presets), indent=2))
            return EXIT_OK
        sizes = (
            parse_sizes(args.sizes, args.hidden_size, args.dtype)
            if args.sizes
            else default_sizes(args.hidden_size, args.dtype)
        )
        if args.timeout <= 0:
            raise PresetError(f"--timeout {args.timeout} must be positive")
        python = args.python or default_python()
        node = plan(
            args.device, args.backend, args.world_size, args.topology, python, probe_torch(python)
        )
        requested = _split(args.presets) if args.presets else None
        selection = select_presets(presets, requested, node.topology, force=args.force)
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
    except (PresetError, SizeSpecError, MachineError, OSError) as exc:
        print(f"nccl-bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for preset, messages in selection.refused:
        for message in messages:
            print(f"nccl-bench: refusing preset {preset.name}: {message}", file=sys.stderr)
    config = BenchConfig(
        sizes=sizes,
        hidden_size=args.hidden_size,
        dtype=args.dtype,
        iters=args.iters,
        warmup=args.warmup,
        timing=args.timing,
        timeout_s=args.timeout,
        extra_env={**SERVER_ENV, **dict(args.env)},
    )
    document = run_benchmark(node, selection, config)
    args.json_out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(render_markdown(document), end="")
    print(f"[nccl-bench] JSON result: {args.json_out}", file=sys.stderr)
    ran = [e for e in document["presets"] if e["status"] not in ("refused", "skipped")]
    return EXIT_OK if all(e["status"] == "ok" for e in ran) else EXIT_PRESET_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specserve.nccl", description=__doc__)
    add_arguments(parser)
    return handle(parser.parse_args(argv))
