"""`specserve-standin`: start the CPU stand-in for an SGLang server (it is NOT SGLang).

Lifecycle, as SGLang's: "load weights" with the port unbound (connections refused) for
SPECSERVE_STANDIN_LOAD_SECONDS; bind; warm up (/health and /health_generate answer 503) for
SPECSERVE_STANDIN_WARMUP_SECONDS plus one warmup generation; then serve. SIGTERM/SIGINT: stop
accepting, drop queued requests, let running ones finish (bounded), exit 0.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from specserve.standin import STANDIN_NAME, STANDIN_NOTICE
from specserve.standin.args import StandinArgs, parse_args
from specserve.standin.behaviour import BehaviourError, BehaviourSource, load_json_or_none
from specserve.standin.engine import Engine, Request
from specserve.standin.httpd import ServerState, make_server
from specserve.standin.knobs import KnobError, Knobs, load_knobs
from specserve.standin.logfmt import LinePrinter, rank_prefix
from specserve.standin.metrics import NativeMetrics

SGLANG_COMPAT_VERSION = "0.5.21"
EAGLE3_ARCHITECTURE = "LlamaForCausalLMEagle3"
SHUTDOWN_GRACE_S = 10.0


def architectures(path: str | None) -> list[str]:
    """`architectures` from `<path>/config.json`, or [] when there is no readable config."""
    if not path:
        return []
    doc = load_json_or_none(Path(path) / "config.json")
    archs = (doc or {}).get("architectures")
    return [str(a) for a in archs] if isinstance(archs, list) else []


def drafter_mismatch(args: StandinArgs) -> bool:
    """EAGLE/NEXTN on an EAGLE-3 drafter: upstream starts fine and accepts nothing."""
    spec = args.spec
    if spec is None or spec.algorithm not in ("EAGLE", "NEXTN"):
        return False
    return EAGLE3_ARCHITECTURE in architectures(spec.draft_model_path)


def _server_info(args: StandinArgs, knobs: Knobs, behaviour: BehaviourSource) -> dict[str, Any]:
    info: dict[str, Any] = dict(args.raw)
    info.update(
        {
            "version": f"{SGLANG_COMPAT_VERSION}+{STANDIN_NAME}",
            "standin": True,
            "standin_notice": STANDIN_NOTICE,
            "standin_knobs": {
                "load_seconds": knobs.load_seconds,
                "warmup_seconds": knobs.warmup_seconds,
                "behaviour_file": str(behaviour.path) if behaviour.path else None,
                "time_scale": knobs.time_scale,
                "base_tps": knobs.base_tps,
            },
            "speculative_num_draft_tokens": args.spec.num_draft_tokens if args.spec else None,
            "speculative_num_steps": args.spec.num_steps if args.spec else None,
            "speculative_eagle_topk": args.spec.eagle_topk if args.spec else None,
            "speculative_draft_model_path": args.spec.draft_model_path if args.spec else None,
            "drafter_architectures": architectures(args.spec.draft_model_path) if args.spec else [],
        }
    )
    return info


def _model_info(args: StandinArgs) -> dict[str, Any]:
    config = load_json_or_none(Path(args.model_path) / "config.json") or {}
    return {
        "model_path": args.model_path,
        "tokenizer_path": args.raw.get("tokenizer_path") or args.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": config.get("model_type", "standin"),
        "architectures": architectures(args.model_path) or ["StandinForCausalLM"],
        "standin": True,
    }


def _models(args: StandinArgs) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": args.served_model_name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "sglang",
                "root": args.model_path,
                "max_model_len": args.context_length or 8192,
            }
        ],
    }


def _arm_crash(knobs: Knobs, printer: LinePrinter) -> None:
    if knobs.crash_after_seconds is None:
        return

    def crash() -> None:
        printer.log(
            f"{STANDIN_NAME}: simulated crash (SPECSERVE_STANDIN_CRASH_AFTER_SECONDS="
            f"{knobs.crash_after_seconds}), exit code {knobs.crash_exit_code}",
            ranks=False,
        )
        sys.stdout.flush()
        os._exit(knobs.crash_exit_code)

    timer = threading.Timer(knobs.crash_after_seconds, crash)
    timer.daemon = True
    timer.start()


def run(args: StandinArgs, knobs: Knobs, printer: LinePrinter, stop: threading.Event) -> int:
    """Load, bind, warm up, serve until `stop` is set; returns the exit status."""
    try:
        behaviour = BehaviourSource(knobs.behaviour_file)
    except (OSError, BehaviourError) as exc:
        printer.log(f"{STANDIN_NAME}: cannot use behaviour file: {exc}", ranks=False)
        return 1
    printer.log(f"{STANDIN_NAME}: {STANDIN_NOTICE}", ranks=False)
    # Only what was set (upstream prints every field; most are None here).
    given = {k: v for k, v in args.raw.items() if v not in (None, False)}
    printer.log(f"server_args={given}", ranks=False)
    _arm_crash(knobs, printer)
    printer.log(f"Load weight begin. (stand-in: simulated, {knobs.load_seconds:.1f} s)")
    if stop.wait(knobs.load_seconds):
        printer.log(f"{STANDIN_NAME}: stopped while loading", ranks=False)
        return 0
    mismatch = drafter_mismatch(args)
    printer.log("Load weight end. type=StandinForCausalLM, dtype=none, avail mem=0.00 GB")
    metrics = NativeMetrics(args.served_model_name) if args.enable_metrics else None
    engine = Engine(args, behaviour, printer, metrics, knobs.base_tps, knobs.time_scale, mismatch)
    state = ServerState(
        engine=engine,
        printer=printer,
        metrics=metrics,
        api_key=args.api_key,
        model_name=args.served_model_name,
        server_info=_server_info(args, knobs, behaviour),
        model_info=_model_info(args),
        models=_models(args),
        content_factor_of=lambda text: behaviour.current()[0].content_factor(text),
    )
    try:
        httpd = make_server(args.host, args.port, state)
    except OSError as exc:
        printer.log(f"{STANDIN_NAME}: cannot bind {args.host}:{args.port}: {exc}", ranks=False)
        return 1
    engine.start()
    serving = threading.Thread(target=httpd.serve_forever, name="standin-http", daemon=True)
    serving.start()
    printer.raw(
        f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)"
    )
    if not stop.wait(knobs.warmup_seconds):
        warm = Request(
            text="warmup",
            prompt_tokens=4,
            max_new_tokens=1,
            natural_tokens=None,
            content_factor=1.0,
        )
        engine.submit(warm)
        while warm.finish_reason is None and not stop.wait(0.01):
            pass
        if warm.finish_reason is not None:
            state.set_phase("ready")
            printer.log("The server is fired up and ready to roll!", ranks=False)
    stop.wait()
    printer.log(f"{STANDIN_NAME}: shutting down (SIGTERM): draining requests", ranks=False)
    state.set_phase("stopping")
    httpd.shutdown()
    httpd.server_close()
    engine.shutdown(SHUTDOWN_GRACE_S)
    # Handler threads write their last bytes right after the engine finishes them.
    time.sleep(0.2)
    printer.log(f"{STANDIN_NAME}: stopped", ranks=False)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        knobs = load_knobs()
    except KnobError as exc:
        print(f"{STANDIN_NAME}: {exc}", file=sys.stderr)
        return 2
    args = parse_args(argv)
    printer = LinePrinter(rank_prefix(args))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return run(args, knobs, printer, stop)


if __name__ == "__main__":
    sys.exit(main())
