"""`specserve verify`: the verification gate (specserve.verify.gate) from the command line.

Exit status 0 when every check passed, 1 when one failed (the message names the knob), 2 for a
usage error. The API key is read from a file (`-` for standard input) or an environment
variable, and never printed: every line goes through a redactor holding it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import requests

from specserve.apikey import API_KEY_ENV, ApiKeyError, read_api_key
from specserve.profile.loader import ProfileError, load_profile
from specserve.secrets import Redactor
from specserve.verify import exporters, gate
from specserve.verify.options import OPTIONS, Option
from specserve.verify.server import APIS


class UsageError(Exception):
    pass


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "verify",
        help="the verification gate: health, decode lines, accept length, graphs, speculation",
        description=(
            "Send warm-up requests to the server, then read what the exporter(s) saw in the "
            "window: real decode lines, mean accept length above the floor (when the profile "
            "speculates; none when it does not), decode graphs on (unless the profile turns "
            "them off). Exit 0 when every check passes, 1 with the reason otherwise."
        ),
    )
    p.add_argument("--server", help="the server's base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--exporter", action="append", default=[], metavar="URL",
                   help="an exporter's /metrics URL (repeat for several)")
    p.add_argument("--no-exporter", action="store_true",
                   help="no exporter runs: check health and the warm-up only")
    p.add_argument("--each-address", action="store_true",
                   help="scrape every address the exporter URL's host resolves to "
                        "(a headless Service: one exporter per server pod)")
    p.add_argument("--profile", type=Path,
                   help="the deployment profile: whether it speculates, whether graphs are off")
    key = p.add_mutually_exclusive_group()
    key.add_argument("--api-key-file", type=Path,
                     help=f"file holding the server's API key, - for stdin (default: "
                          f"${API_KEY_ENV}); never printed")
    key.add_argument("--api-key-env", metavar="VAR",
                     help="environment variable holding the API key")
    p.add_argument("--api", choices=APIS, default="generate",
                   help="warm-up requests: SGLang's /generate or /v1/chat/completions "
                        "(default: %(default)s)")
    for option in OPTIONS:
        _add_option(p, option)
    p.add_argument("--gpus-only", action="store_true",
                   help="run only the GPU check: read --dcgm URL and judge the node's GPUs "
                        "against the --profile's gpu.count, no server, no exporter (the "
                        "chart's GPU-check init container)")
    p.add_argument("--dcgm-wait", type=float, default=0.0, metavar="SECONDS",
                   help="with --gpus-only: try a DCGM exporter that cannot be read yet (still "
                        "starting) again for this long, then fail (default: %(default)s)")
    p.add_argument("--save-snapshot", type=Path, metavar="FILE",
                   help="only scrape the exporters and save their counters for --since")
    p.add_argument("--since", type=Path, metavar="FILE",
                   help="the window starts at this saved snapshot, not at a scrape now")
    p.add_argument("--title", default="Verification gate", help="the report's first words")
    p.add_argument("--on", default="", help="where the gate ran, for the report (a host name)")
    p.add_argument("--knob", action="append", default=[], metavar="NAME=LABEL",
                   help=f"the name a message gives a knob ({', '.join(gate.DEFAULT_KNOBS)}), "
                        "e.g. floor=verify_accept_length_floor")
    p.set_defaults(handler=main)


def _add_option(p: argparse.ArgumentParser, option: Option) -> None:
    """One row of the gate's table (specserve.verify.options) as a flag, its default shown."""
    shown = f"{option.help} (default: %(default)s)"
    if option.kind is bool:  # the flag turns the requirement off
        p.add_argument(option.flag, dest=option.name, action="store_false", default=option.default,
                       help=f"do not {shown}")
        return
    p.add_argument(option.flag, dest=option.name, type=option.kind, default=option.default,
                   choices=option.choices or None, help=shown)


def _api_key(args: argparse.Namespace) -> str | None:
    try:
        return read_api_key(args.api_key_file, args.api_key_env)
    except ApiKeyError as exc:
        raise UsageError(str(exc)) from None


def _knobs(pairs: list[str]) -> dict[str, str]:
    knobs = dict(gate.DEFAULT_KNOBS)
    for pair in pairs:
        name, sep, label = pair.partition("=")
        if not sep or name not in knobs or not label:
            raise UsageError(f"--knob {pair}: expected NAME=LABEL with NAME one of "
                             f"{', '.join(gate.DEFAULT_KNOBS)}")
        knobs[name] = label
    return knobs


def _settings(args: argparse.Namespace) -> gate.Settings:
    if not args.server or args.profile is None:
        raise UsageError("--server URL and --profile PATH are required (the profile says "
                         "whether the server speculates)")
    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    return gate.Settings(
        server=args.server.rstrip("/"), exporters=args.exporter, profile=profile,
        each_address=args.each_address, api_key=_api_key(args), api=args.api,
        prompt=args.prompt, requests=args.requests, max_tokens=args.max_tokens,
        request_timeout=args.request_timeout, metrics_timeout=args.metrics_timeout,
        min_decode_lines=args.min_decode_lines, floor=args.floor,
        require_graph=args.require_graph, graph_label=args.graph_label, dcgm=args.dcgm,
        since=args.since,
        title=args.title, on=args.on, knobs=_knobs(args.knob),
    )


def _save_snapshot(args: argparse.Namespace) -> int:
    try:
        urls = exporters.expand(args.exporter, args.each_address)
        exporters.save(args.save_snapshot, exporters.scrape_all(requests.Session(), urls))
    except exporters.ScrapeError as exc:
        print(f"specserve verify: {exc}", file=sys.stderr)
        return 1
    return 0


def _gpus_only(args: argparse.Namespace) -> int:
    """`--gpus-only`: the gate's GPU check alone, as the chart's init container runs it."""
    if not args.dcgm or args.profile is None:
        raise UsageError("--gpus-only needs --dcgm URL (the DCGM exporter's /metrics) and "
                         "--profile PATH (its gpu.count)")
    if args.server or args.exporter or args.no_exporter or args.save_snapshot or args.since:
        raise UsageError("--gpus-only reads only --dcgm: leave out --server, --exporter, "
                         "--no-exporter, --save-snapshot and --since")
    if args.dcgm_wait < 0:
        raise UsageError(f"--dcgm-wait {args.dcgm_wait:g}: seconds, 0 or more")
    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    title = "GPU check" if args.title == "Verification gate" else args.title
    ok = gate.run_gpus(profile, args.dcgm, lambda line: print(line, flush=True),
                       wait=args.dcgm_wait, title=title, on=args.on, knobs=_knobs(args.knob))
    return 0 if ok else 1


def main(args: argparse.Namespace) -> int:
    if args.gpus_only:
        try:
            return _gpus_only(args)
        except UsageError as exc:
            print(f"specserve verify: {exc}", file=sys.stderr)
            return 2
    if args.dcgm_wait:
        print("specserve verify: --dcgm-wait is for --gpus-only", file=sys.stderr)
        return 2
    if bool(args.exporter) == args.no_exporter:
        print("specserve verify: give --exporter URL (the exporter's /metrics), or "
              "--no-exporter where none runs", file=sys.stderr)
        return 2
    if args.save_snapshot is not None:
        return _save_snapshot(args)
    try:
        s = _settings(args)
    except UsageError as exc:
        print(f"specserve verify: {exc}", file=sys.stderr)
        return 2
    redactor = Redactor([s.api_key])

    def out(text: str) -> None:
        print(redactor.redact_text(text), flush=True)

    return 0 if gate.run(s, out) else 1
