"""`specserve-standin`: start the CPU stand-in for an SGLang server (it is NOT SGLang).

Lifecycle, as SGLang's (`http_server.py`, `engine.py`): parse (exit 2 on a usage error) and
resolve (exit 1 with one line naming the problem); log upstream's resolution warnings and
`server_args={...}`, the resolved arguments with the API key in clear, as upstream does; "load
weights" with the port unbound (connections refused) for SPECSERVE_STANDIN_LOAD_SECONDS; bind;
then warm up as upstream's `_execute_server_warmup`: after SPECSERVE_STANDIN_WARMUP_SECONDS, GET
/model_info and POST one 8-token /generate to itself over HTTP (the API key in the header), then
mark the server up and log "The server is fired up and ready to roll!" (at once with
--skip-server-warmup, as upstream). Until then /health,
/health_generate and /ready answer 503, while /generate and the OpenAI routes already serve.
SIGTERM/SIGINT: stop accepting, drop queued requests, let running ones finish (bounded), exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from specserve.profile.endpoints import probe_host
from specserve.standin import STANDIN_NAME, STANDIN_NOTICE
from specserve.standin.args import ResolutionError, StandinArgs, architectures, parse_args
from specserve.standin.behaviour import BehaviourError, BehaviourSource, load_json_or_none
from specserve.standin.engine import Engine
from specserve.standin.httpd import ServerState, make_server
from specserve.standin.knobs import KnobError, Knobs, load_knobs
from specserve.standin.logfmt import LinePrinter, rank_prefix
from specserve.standin.metrics import NativeMetrics
from specserve.standin.ranks import RendezvousError, form_group, serve_worker
from specserve.upstream import sglang_contract

SHUTDOWN_GRACE_S = 10.0
# Upstream's warm-up request (`_execute_server_warmup`, a generation model, no VLM).
WARMUP_TEXT = "The capital city of France is"
WARMUP_MAX_NEW_TOKENS = 8


def drafter_mismatch(args: StandinArgs) -> bool:
    """EAGLE (or its NEXTN alias) on an EAGLE-3 drafter: upstream starts fine, accepts nothing.

    The EAGLE-3 classes are SGLang's own list for that version (its model registry), so the
    MLA drafter `Eagle3DeepseekV2ForCausalLM` counts as well as `LlamaForCausalLMEagle3`.
    """
    spec = args.spec
    if spec is None or spec.algorithm != "EAGLE":
        return False
    eagle3 = sglang_contract(args.sglang_version).eagle3_drafter_architectures
    return any(a in eagle3 for a in architectures(spec.draft_model_path))


def _scheduler_info(engine: Engine) -> dict[str, Any]:
    """What upstream's `scheduler_info` (Scheduler.get_init_info) contributes."""
    return {
        "status": "ready",
        "max_total_num_tokens": engine.max_total_tokens,
        "max_req_input_len": engine.max_total_tokens - 1,
    }


def server_info(
    args: StandinArgs, knobs: Knobs, behaviour: BehaviourSource, engine: Engine, started: float
) -> dict[str, Any]:
    """/server_info as upstream builds it: the resolved arguments (API key included, as SGLang
    returns it), `launch_command` (the argv, key included), scheduler info, internal states."""
    internal: dict[str, Any] = {
        **args.resolved,
        "world_size": args.tp_size * args.pp_size,
        "last_gen_throughput": engine.last_decode.gen_throughput if engine.last_decode else 0.0,
        "startup_time": started,
        "effective_max_running_requests_per_dp": engine.max_running,
    }
    if args.spec is not None:
        last = engine.last_decode
        internal["avg_spec_accept_length"] = (
            last.accept_length if last and last.accept_length is not None else 0.0
        )
    running, queued = engine.counts()
    return {
        **args.resolved,
        "launch_command": args.launch_command,
        **_scheduler_info(engine),
        "startup_time": started,
        "internal_states": [internal],
        "version": f"{args.sglang_version}+{STANDIN_NAME}",
        "frontend": "python",
        "kv_events": None,
        # The stand-in's own keys (not upstream's): it says what it is and how it is paced.
        "standin": True,
        "standin_notice": STANDIN_NOTICE,
        "standin_knobs": {
            "load_seconds": knobs.load_seconds,
            "warmup_seconds": knobs.warmup_seconds,
            "behaviour_file": str(behaviour.path) if behaviour.path else None,
            "time_scale": knobs.time_scale,
            "base_tps": knobs.base_tps,
            "sglang_version": knobs.sglang_version,
        },
        "standin_state": {"running_requests": running, "queued_requests": queued},
    }


def _model_info(args: StandinArgs) -> dict[str, Any]:
    config = load_json_or_none(Path(args.model_path) / "config.json") or {}
    return {
        "model_path": args.model_path,
        "served_model_name": args.served_model_name,
        "tokenizer_path": args.resolved.get("tokenizer_path") or args.model_path,
        "is_generation": True,
        "preferred_sampling_params": args.resolved.get("preferred_sampling_params"),
        "weight_version": args.resolved.get("weight_version", "default"),
        "load_format": args.resolved.get("load_format"),
        "reasoning_parser": args.resolved.get("reasoning_parser"),
        "tool_call_parser": args.resolved.get("tool_call_parser"),
        "disaggregation_mode": args.resolved.get("disaggregation_mode"),
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": config.get("model_type"),
        "architectures": architectures(args.model_path) or None,
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


def _self_url(args: StandinArgs) -> str:
    return f"http://{probe_host(args.host)}:{args.port}"


def warm_up(args: StandinArgs) -> str | None:
    """Upstream's `_execute_server_warmup` over HTTP to itself; the error text, or None."""
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = f"Bearer {args.api_key}"
    url = _self_url(args)
    body = json.dumps(
        {
            "sampling_params": {"temperature": 0, "max_new_tokens": WARMUP_MAX_NEW_TOKENS},
            "text": WARMUP_TEXT,
        }
    ).encode("utf-8")
    try:
        info = urllib.request.Request(url + "/model_info", headers=headers)
        with urllib.request.urlopen(info, timeout=5):
            pass
        gen = urllib.request.Request(url + "/generate", data=body, headers=headers, method="POST")
        with urllib.request.urlopen(gen, timeout=600) as response:
            response.read()
    except (OSError, urllib.error.URLError) as exc:
        return str(exc)
    return None


def run(args: StandinArgs, knobs: Knobs, printer: LinePrinter, stop: threading.Event) -> int:
    """Load, bind, warm up, serve until `stop` is set; returns the exit status."""
    try:
        behaviour = BehaviourSource(knobs.behaviour_file)
    except (OSError, BehaviourError) as exc:
        printer.log(f"{STANDIN_NAME}: cannot use behaviour file: {exc}", ranks=False)
        return 1
    printer.log(f"{STANDIN_NAME}: {STANDIN_NOTICE}", ranks=False)
    for warning in args.warnings:
        printer.log(warning, ranks=False)
    # engine.py logs `server_args={server_args.resolved_dict()}` (0.5.23 redacts watermark
    # keys only): every resolved field, the API key in clear. Printed so the product's
    # redaction is tested against what SGLang really prints.
    printer.log(f"server_args={args.resolved!r}", ranks=False)
    _arm_crash(knobs, printer)
    # Over several nodes every rank joins the group before it loads (ranks.py); a rank > 0
    # then serves only SGLang's dummy health server.
    try:
        group = form_group(args, printer, stop)
    except (RendezvousError, OSError) as exc:
        printer.log(f"{STANDIN_NAME}: rendezvous failed: {exc}", ranks=False)
        return 1
    if group is not None and group.rank > 0:
        return serve_worker(args, knobs.load_seconds, group, printer, stop)
    if group is not None:
        lost = group.lost
        threading.Thread(target=lambda: lost.wait() and stop.set(), daemon=True).start()
    printer.log(f"Load weight begin. (stand-in: simulated, {knobs.load_seconds:.1f} s)")
    if stop.wait(knobs.load_seconds):
        printer.log(f"{STANDIN_NAME}: stopped while loading", ranks=False)
        return 0
    mismatch = drafter_mismatch(args)
    printer.log("Load weight end. type=StandinForCausalLM, dtype=none, avail mem=0.00 GB")
    metrics = (
        NativeMetrics(args.served_model_name, args.custom_labels) if args.enable_metrics else None
    )
    engine = Engine(
        args, behaviour, printer, metrics, knobs.base_tps, knobs.time_scale, mismatch,
        verify_cap=knobs.verify_cap, looping=knobs.loops(args.resolved),
    )  # fmt: skip
    started = time.time()
    state = ServerState(
        engine=engine,
        printer=printer,
        metrics=metrics,
        api_key=args.api_key,
        contract=sglang_contract(args.sglang_version),
        model_name=args.served_model_name,
        server_info=lambda: server_info(args, knobs, behaviour, engine, started),
        model_info=_model_info(args),
        models=_models(args),
        content_factor_of=lambda text: behaviour.current()[0].content_factor(text),
        time_scale=knobs.time_scale,
        custom_labels=args.custom_labels,
        custom_labels_header=args.custom_labels_header,
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
    status = 0
    if args.resolved.get("skip_server_warmup"):
        # Upstream's _wait_and_warmup: no warm-up request, the server is up at once.
        state.set_phase("up")
        printer.log("The server is fired up and ready to roll!", ranks=False)
    elif not stop.wait(knobs.warmup_seconds):
        error = warm_up(args)
        if error is not None and not stop.is_set():
            # Upstream kills its process tree here.
            printer.log(f"Initialization failed. warmup error: {error}", ranks=False)
            stop.set()
            status = 1
        elif not stop.is_set():
            state.set_phase("up")
            printer.log("The server is fired up and ready to roll!", ranks=False)
    stop.wait()
    if group is not None and group.lost.is_set():
        # A lost rank broke the group: upstream's collectives fail and the process dies.
        printer.log(f"{STANDIN_NAME}: node rank 0: exiting, {group.reason}", ranks=False)
        status = 1
    printer.log(f"{STANDIN_NAME}: shutting down (SIGTERM): draining requests", ranks=False)
    state.set_phase("stopping")
    httpd.shutdown()
    httpd.server_close()
    engine.shutdown(SHUTDOWN_GRACE_S)
    if group is not None:
        group.close(orderly=not group.lost.is_set())
    # Handler threads write their last bytes right after the engine finishes them.
    time.sleep(0.2)
    printer.log(f"{STANDIN_NAME}: stopped", ranks=False)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    try:
        knobs = load_knobs()
    except KnobError as exc:
        print(f"{STANDIN_NAME}: {exc}", file=sys.stderr)
        return 2
    try:
        args = parse_args(argv, knobs.sglang_version)
    except ResolutionError as exc:
        print(f"{STANDIN_NAME}: error: {exc}", file=sys.stderr)
        return 1
    printer = LinePrinter(rank_prefix(args))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return run(args, knobs, printer, stop)


if __name__ == "__main__":
    sys.exit(main())
