"""`specserve rules ...`: render the alert rules with a user's overrides, for each consumer."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from specserve.monitoring.dashboard import dashboard_json
from specserve.monitoring.grafana_alerting import grafana_alert_rules
from specserve.monitoring.helm import helm_template, helm_values_text
from specserve.monitoring.overrides import (
    OverridesError,
    load_overrides_document,
    load_overrides_file,
    resolve_settings,
)
from specserve.monitoring.prometheus import render_rules
from specserve.monitoring.rules import DEFAULT_RUNBOOK_BASE_URL
from specserve.monitoring.yamlio import dump_yaml

_HEADER = "Rendered by `specserve rules {command}`{source}; regenerate rather than edit."


def _overrides(path: Path | None) -> tuple[dict[str, Any], str]:
    if path is None:
        return {}, DEFAULT_RUNBOOK_BASE_URL
    return load_overrides_file(path)


def load_slos(path: Path | None) -> dict[str, Any]:
    """The SLO settings of an overrides file; {} (the defaults) on none or an invalid file,
    whose problems _render reports."""
    if path is None:
        return {}
    try:
        return load_overrides_document(path)[2]
    except OverridesError:
        return {}


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    # Write beside and rename: a half-written rules file must never be what Prometheus reloads.
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)


def _render(args: argparse.Namespace, build: Any) -> int:
    try:
        overrides, base_url = _overrides(args.overrides)
        document = build(overrides, base_url)
    except OverridesError as err:
        print(f"specserve rules {args.rules_command}: {err}", file=sys.stderr)
        return 2
    source = f" with overrides from {args.overrides}" if args.overrides else ""
    header = _HEADER.format(command=args.rules_command, source=source)
    _emit(dump_yaml(document, header=header), args.out)
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    try:
        overrides, _ = _overrides(args.overrides)
        text = dashboard_json(resolve_settings(overrides))
    except OverridesError as err:
        print(f"specserve rules dashboard: {err}", file=sys.stderr)
        return 2
    _emit(text, args.out)
    return 0


def _handle(args: argparse.Namespace) -> int:
    command = args.rules_command
    if command == "dashboard":
        return _dashboard(args)
    if command == "render":
        slos = load_slos(args.overrides)
        return _render(args, lambda overrides, base_url: render_rules(overrides, base_url, slos))
    if command == "grafana-alerts":
        slos = load_slos(args.overrides)
        return _render(
            args, lambda overrides, base_url: grafana_alert_rules(overrides, base_url, slos)
        )
    if command == "helm-template":
        _emit(helm_template(), args.out)
        return 0
    if command == "helm-values":
        _emit(helm_values_text(), args.out)
        return 0
    raise AssertionError(f"unhandled rules command {command!r}")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rules",
        help="render Prometheus/Grafana/Helm alert rules from the one rule source",
        description="Render specserve's alert and recording rules. Overrides file (YAML): "
        "{runbook_base_url: URL, alerts: {AlertName: {enabled: bool, for: 5m, window: 2m, "
        "thresholds: {name: value}}}}; see docs/alerts.md for names.",
    )
    commands = parser.add_subparsers(dest="rules_command", required=True, metavar="ACTION")
    for name, help_text in (
        ("render", "Prometheus rule file"),
        ("grafana-alerts", "Grafana-managed alert provisioning file"),
        ("dashboard", "Grafana dashboard JSON at the overridden windows and thresholds"),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--overrides", type=Path, help="YAML file of per-alert overrides")
        sub.add_argument("--out", type=Path, help="write here instead of stdout")
    for name, help_text in (
        ("helm-template", "Helm template of the chart's PrometheusRule"),
        ("helm-values", "default values fragment for that template"),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--out", type=Path, help="write here instead of stdout")
    parser.set_defaults(handler=_handle)
