"""Copy the chart's generated parts from their one source; `--check` reports drift instead.

    .venv/bin/python -m tests.helm.sync_chart [--check]

The chart never hand-maintains what another part of the repository owns:
- files/profiles/default.yaml   <- profiles/kimi-k2.5-int4-eagle3-8gpu.yaml (the default profile)
- values.yaml `prometheusRule:` <- monitoring/helm/values-prometheusrule.yaml
- templates/prometheusrule.yaml <- monitoring/helm/prometheusrule.yaml (rules helm-template)
- files/dashboards/specserve.json, files/grafana-alerting/specserve-alerts.yml <- monitoring/grafana
- values.schema.json `properties.profile` <- specserve/profile/schema.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "specserve"
DEFAULT_PROFILE = REPO / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"
PROFILE_SCHEMA = REPO / "specserve" / "profile" / "schema.json"

COPIES: dict[str, Path] = {
    "files/profiles/default.yaml": DEFAULT_PROFILE,
    "templates/prometheusrule.yaml": REPO / "monitoring" / "helm" / "prometheusrule.yaml",
    "files/dashboards/specserve.json": REPO
    / "monitoring"
    / "grafana"
    / "dashboards"
    / "specserve.json",
    "files/grafana-alerting/specserve-alerts.yml": (
        REPO / "monitoring" / "grafana" / "provisioning" / "alerting" / "specserve-alerts.yml"
    ),
}


def prometheus_rule_block() -> str:
    source = REPO / "monitoring" / "helm" / "values-prometheusrule.yaml"
    # Its own header comment says how it was generated; the marker line says it here.
    body = [line for line in source.read_text(encoding="utf-8").splitlines(keepends=True)]
    while body and body[0].startswith("#"):
        body.pop(0)
    return "".join(body)


def _replace_block(text: str, name: str, block: str) -> str:
    pattern = re.compile(
        rf"(# BEGIN GENERATED {name}:[^\n]*\n)(.*?)(# END GENERATED {name}\n)", re.S
    )
    if not pattern.search(text):
        raise SystemExit(f"values.yaml lost its '# BEGIN GENERATED {name}' / END markers")
    return pattern.sub(lambda m: m.group(1) + block.rstrip("\n") + "\n" + m.group(3), text)


def values_text() -> str:
    text = (CHART / "values.yaml").read_text(encoding="utf-8")
    return _replace_block(text, "prometheusRule", prometheus_rule_block())


def schema_text() -> str:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    profile = json.loads(PROFILE_SCHEMA.read_text(encoding="utf-8"))
    # An embedded $id would move the base URI of the subschema; $schema is only valid at the root.
    for key in ("$schema", "$id"):
        profile.pop(key, None)
    schema["$defs"]["profile"] = profile
    # Empty selects the chart's default profile; anything else must be a whole, valid profile.
    schema["properties"]["profile"] = {
        "description": "The deployment profile (docs/profile.md), checked against the same JSON "
        "Schema as `specserve check`; {} selects the chart's default (Kimi-K2.5 + EAGLE-3).",
        "type": "object",
        "if": {"minProperties": 1},
        "then": {"$ref": "#/$defs/profile"},
    }
    return json.dumps(schema, indent=2) + "\n"


def expected() -> dict[str, Callable[[], str]]:
    outputs: dict[str, Callable[[], str]] = {
        "values.yaml": values_text,
        "values.schema.json": schema_text,
    }
    for rel, source in COPIES.items():
        outputs[rel] = lambda source=source: source.read_text(encoding="utf-8")
    return outputs


def drift() -> list[str]:
    """Chart files whose content differs from what their source generates."""
    stale = []
    for rel, build in expected().items():
        path = CHART / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != build():
            stale.append(rel)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report drift, change nothing")
    args = parser.parse_args(argv)
    if args.check:
        stale = drift()
        for rel in stale:
            print(f"charts/specserve/{rel} is stale: run .venv/bin/python -m tests.helm.sync_chart")
        return 1 if stale else 0
    for rel, build in expected().items():
        path = CHART / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(build(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
