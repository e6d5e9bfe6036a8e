"""Command-line flags, each with an environment-variable equivalent (SPECSERVE_EXPORTER_<FLAG>).

Flags win over the environment; the environment wins over the profile; the profile over defaults.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specserve.buckets import BUCKET_LABELS, validate_bucket_label
from specserve.logpath import LOG_FILE

from .state import SpeculationConfig

if TYPE_CHECKING:
    from specserve.profile.model import Profile

ENV_PREFIX = "SPECSERVE_EXPORTER_"
DEFAULT_LISTEN = "127.0.0.1:9433"
SOURCES = ("file", "docker", "kubernetes", "stdin")


class ConfigError(ValueError):
    """A bad flag value: the message names the flag and the fix."""


@dataclass(frozen=True)
class ExporterConfig:
    source: str
    file: Path | None
    from_beginning: bool
    poll_interval: float
    docker_container: str | None
    k8s_namespace: str
    k8s_pod: str | None
    k8s_selector: str | None
    k8s_container: str | None
    kubeconfig: str | None
    listen_host: str
    listen_port: int
    speculation: SpeculationConfig
    once: bool


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(ENV_PREFIX + name.upper().replace("-", "_"), default)


def _env_flag(name: str) -> bool:
    value = _env(name, "") or ""
    return value.lower() in ("1", "true", "yes", "on")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="specserve-exporter",
        description=(
            "Turn SGLang's Decode/Prefill batch log lines into Prometheus metrics: accept "
            "length, throughput by concurrency, graph state, queue, KV usage, and the measured "
            "non-speculative baseline to compare against. Every flag can also be set as "
            f"{ENV_PREFIX}<FLAG> (e.g. {ENV_PREFIX}LISTEN_ADDRESS=0.0.0.0:9433)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    src = p.add_argument_group("source (where the SGLang log comes from)")
    src.add_argument("--source", choices=SOURCES, default=_env("source", "file"),
                     help="file: follow a log file like tail -F; docker: a container's logs via "
                          "the Docker Engine API; kubernetes: a pod's logs via the API; stdin")
    src.add_argument("--file", default=_env("file", LOG_FILE),
                     help="log file to follow (--source file); the default is where the shipped "
                          "profiles and every deploy path put it (specserve/logpath.py)")
    src.add_argument("--from-beginning", action="store_true", default=_env_flag("from_beginning"),
                     help="read existing content first instead of starting at the end")
    src.add_argument("--poll-interval", type=float,
                     default=float(_env("poll_interval", "0.1") or 0.1),
                     help="seconds between checks of the file for new lines and rotation")
    src.add_argument("--docker-container", default=_env("docker_container"),
                     help="container name to follow (--source docker); found again by name "
                          "after a restart or re-creation")
    src.add_argument("--k8s-namespace", default=_env("k8s_namespace", "default"),
                     help="namespace of the pod (--source kubernetes)")
    src.add_argument("--k8s-pod", default=_env("k8s_pod"), help="pod name to follow")
    src.add_argument("--k8s-selector", default=_env("k8s_selector"),
                     help="label selector finding the pod instead of a name, e.g. "
                          "app.kubernetes.io/name=specserve")
    src.add_argument("--k8s-container", default=_env("k8s_container"),
                     help="container within the pod (required when it has several)")
    src.add_argument("--kubeconfig", default=_env("kubeconfig"),
                     help="kubeconfig file; default: in-cluster service account")
    spec = p.add_argument_group("deployment (what the metrics are compared with)")
    spec.add_argument("--profile", default=_env("profile"),
                      help="deployment profile YAML: draft-token count and baseline come from it")
    spec.add_argument("--draft-tokens", type=int, default=_int_env("draft_tokens"),
                      help="--speculative-num-draft-tokens of the server (overrides the profile)")
    spec.add_argument("--adaptive", action="store_true", default=_env_flag("adaptive"),
                      help="the server runs --speculative-adaptive (also set by the profile's "
                           "drafter.adaptive): the draft-token count follows its switch lines")
    spec.add_argument("--server-image", default=_env("server_image"),
                      help="the image the server runs: the profile's baseline must have been "
                           "measured in it (baseline.image), else the exporter refuses to start")
    spec.add_argument("--baseline", default=_env("baseline"),
                      help="non-speculative throughput per concurrency bucket, tok/s: "
                           "'1=90,2=170,4=300' (overrides the profile); buckets: "
                           + ", ".join(BUCKET_LABELS[1:]))
    out = p.add_argument_group("output")
    out.add_argument("--listen-address", default=_env("listen_address", DEFAULT_LISTEN),
                     help="HOST:PORT for /metrics and /healthz (loopback unless told otherwise)")
    out.add_argument("--once", action="store_true", default=_env_flag("once"),
                     help="read the source to its current end, print the metrics, exit")
    return p


def _int_env(name: str) -> int | None:
    value = _env(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ConfigError(f"{ENV_PREFIX}{name.upper()}={value!r} is not an integer") from exc


def parse_baseline(text: str) -> dict[str, float]:
    baseline: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        bucket, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--baseline item {item!r} is not BUCKET=TOKENS_PER_SECOND")
        try:
            label = validate_bucket_label(bucket.strip())
        except ValueError as exc:
            raise ConfigError(f"--baseline: {exc}") from exc
        try:
            number = float(value)
        except ValueError as exc:
            raise ConfigError(f"--baseline {item!r}: {value!r} is not a number") from exc
        if not number > 0:
            raise ConfigError(f"--baseline {item!r}: throughput must be positive")
        baseline[label] = number
    return baseline


def parse_listen(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"--listen-address {address!r} is not HOST:PORT, e.g. 127.0.0.1:9433")
    try:
        number = int(port)
    except ValueError as exc:
        raise ConfigError(f"--listen-address {address!r}: port {port!r} is not a number") from exc
    if not 0 <= number <= 65535:
        raise ConfigError(f"--listen-address {address!r}: port must be 0-65535")
    return host.strip("[]"), number


def _judge_baseline(args: argparse.Namespace, loaded: Profile) -> None:
    """Refuse (exit 2) a profile whose baseline was measured under other settings rather than
    publish it as the alert threshold; an explicit --baseline replaces it, so is not judged."""
    if args.baseline:
        return
    from .baseline import judge

    verdict = judge(loaded, args.server_image)
    if verdict.refusal:
        raise ConfigError(f"--profile {args.profile}: {verdict.refusal}")
    if verdict.warning:
        sys.stderr.write(f"specserve-exporter: warning: --profile {args.profile}: "
                         f"{verdict.warning}\n")


def _speculation(args: argparse.Namespace) -> SpeculationConfig:
    draft_tokens: int | None = None
    baseline: dict[str, float] = {}
    adaptive = bool(args.adaptive)
    if args.profile:
        # Imported here: the profile library pulls in jsonschema, which --help does not need.
        from specserve.profile.facts import facts
        from specserve.profile.loader import ProfileError, load_profile

        try:
            loaded = load_profile(Path(args.profile))
            profile = facts(loaded)
        except (ProfileError, OSError) as exc:
            raise ConfigError(f"--profile {args.profile}: {exc}") from exc
        _judge_baseline(args, loaded)
        draft_tokens = profile.draft_tokens
        baseline = dict(profile.baseline_tok_s)
        adaptive = adaptive or profile.adaptive
    if args.draft_tokens is not None:
        if args.draft_tokens < 1:
            raise ConfigError("--draft-tokens must be at least 1")
        draft_tokens = args.draft_tokens
    if args.baseline:
        baseline = parse_baseline(args.baseline)
    return SpeculationConfig(draft_tokens=draft_tokens, baseline=baseline, adaptive=adaptive)


def load_config(argv: Sequence[str] | None = None) -> ExporterConfig:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.source == "file" and not args.file:
        raise ConfigError("--source file needs --file PATH (or SPECSERVE_EXPORTER_FILE)")
    if args.source == "docker" and not args.docker_container:
        raise ConfigError("--source docker needs --docker-container NAME")
    if args.source == "kubernetes" and not (args.k8s_pod or args.k8s_selector):
        raise ConfigError("--source kubernetes needs --k8s-pod NAME or --k8s-selector LABELS")
    if args.poll_interval <= 0:
        raise ConfigError("--poll-interval must be positive, e.g. 0.1")
    host, port = parse_listen(args.listen_address)
    return ExporterConfig(
        source=args.source,
        file=Path(args.file) if args.file else None,
        from_beginning=args.from_beginning,
        poll_interval=args.poll_interval,
        docker_container=args.docker_container,
        k8s_namespace=args.k8s_namespace,
        k8s_pod=args.k8s_pod,
        k8s_selector=args.k8s_selector,
        k8s_container=args.k8s_container,
        kubeconfig=args.kubeconfig,
        listen_host=host,
        listen_port=port,
        speculation=_speculation(args),
        once=args.once,
    )
