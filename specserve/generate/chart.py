"""The Helm chart's generated parts: what charts/specserve/ holds that another part owns.

The chart never hand-maintains a copy:
- files/profiles/default.yaml   <- profiles/kimi-k2.5-int4-eagle3-8gpu.yaml (the default profile)
- templates/prometheusrule.yaml <- monitoring/helm/prometheusrule.yaml (the rules' Helm template)
- templates/_grafana-alerts.tpl <- monitoring/helm/grafana-alerts.tpl (the Grafana-managed alert
  rules as a named template on the same values, for configmap-grafana.yaml)
- templates/_dashboard.tpl      <- monitoring/helm/dashboard.tpl (the dashboard as a named
  template on the PrometheusRule's values, for configmap-grafana.yaml)
- values.yaml, between its `# BEGIN/END GENERATED prometheusRule` markers
  <- monitoring/helm/values-prometheusrule.yaml
- values.schema.json `$defs.profile` and `properties.profile` <- specserve/profile/schema.json
- files/profile-defaults.yaml    <- the profile field table's defaults (profile/fields.py): what
  a template reads for a fact the profile leaves out, instead of restating the default

Each source is read through `read_source`, which `specserve generate` points at the source's own
generator when the source is generated too, so one run (or one check) sees one consistent state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import yaml

CHART = "charts/specserve"
DEFAULT_PROFILE = "profiles/kimi-k2.5-int4-eagle3-8gpu.yaml"
PROFILE_SCHEMA = "specserve/profile/schema.json"
RULES_VALUES = "monitoring/helm/values-prometheusrule.yaml"
VALUES_BLOCK = "prometheusRule"
PROFILE_DEFAULTS = f"{CHART}/files/profile-defaults.yaml"

# Chart path -> the repository file it is a verbatim copy of.
COPIES: dict[str, str] = {
    f"{CHART}/files/profiles/default.yaml": DEFAULT_PROFILE,
    f"{CHART}/templates/prometheusrule.yaml": "monitoring/helm/prometheusrule.yaml",
    f"{CHART}/templates/_grafana-alerts.tpl": "monitoring/helm/grafana-alerts.tpl",
    f"{CHART}/templates/_dashboard.tpl": "monitoring/helm/dashboard.tpl",
}

ReadSource = Callable[[str], str]


class ChartError(Exception):
    """A chart file lost the structure its generator relies on."""


def _without_header(text: str) -> str:
    # The source's own header comment says how it was generated; the marker line says it here.
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def replace_block(text: str, name: str, block: str) -> str:
    """`text` with the lines between `# BEGIN GENERATED name:...` and `# END GENERATED name`
    replaced by `block`."""
    pattern = re.compile(
        rf"(# BEGIN GENERATED {name}:[^\n]*\n)(.*?)(# END GENERATED {name}\n)", re.S
    )
    if not pattern.search(text):
        raise ChartError(
            f"{CHART}/values.yaml lost its '# BEGIN GENERATED {name}' / '# END GENERATED {name}' "
            "marker lines: restore them around the generated block"
        )
    return pattern.sub(lambda m: m.group(1) + block.rstrip("\n") + "\n" + m.group(3), text)


def values_yaml(read_source: ReadSource) -> str:
    text = read_source(f"{CHART}/values.yaml")
    return replace_block(text, VALUES_BLOCK, _without_header(read_source(RULES_VALUES)))


def values_schema(read_source: ReadSource) -> str:
    schema = json.loads(read_source(f"{CHART}/values.schema.json"))
    profile = json.loads(read_source(PROFILE_SCHEMA))
    # An embedded $id would move the base URI of the subschema; $schema is only valid at the root.
    for key in ("$schema", "$id"):
        profile.pop(key, None)
    schema["$defs"]["profile"] = profile
    # Imported here like the profile library below: the chart's other files need neither.
    from specserve.monitoring.helm import profile_thresholds_schema, slo_values_schema

    rules = schema["properties"]["prometheusRule"]["properties"]
    rules["slos"] = slo_values_schema()
    # The thresholds a profile fact sets (null: the fact): checked where they are named.
    rules["alerts"]["allOf"] = profile_thresholds_schema()
    # Empty selects the chart's default profile; anything else must be a whole, valid profile.
    schema["properties"]["profile"] = {
        "description": "The deployment profile (docs/profile.md), checked against the same JSON "
        "Schema as `specserve check`; {} selects the chart's default (Kimi-K2.5 + EAGLE-3).",
        "type": "object",
        "if": {"minProperties": 1},
        "then": {"$ref": "#/$defs/profile"},
    }
    return json.dumps(schema, indent=2) + "\n"


def profile_defaults() -> str:
    """Every profile field's default, as a document shaped like a profile (sections nested)."""
    # Imported here: the chart's other files need none of the profile library.
    from specserve.profile.fields import FIELDS

    document: dict[str, Any] = {}
    for field in FIELDS:
        if not field.has_default:
            continue
        node = document
        parts = field.path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = field.default
    header = ("# Generated by `specserve generate` from specserve/profile/fields.py: the profile\n"
              "# library's default of every field, read by the templates (specserve.profileFact)\n"
              "# for a fact the profile leaves out. Not a profile: never merged into one.\n")
    return header + yaml.safe_dump(document, sort_keys=False, width=100)


def chart_files(read_source: ReadSource) -> dict[str, Callable[[], str]]:
    """Chart path (relative to the repository root) -> function producing its text."""
    files: dict[str, Callable[[], str]] = {
        f"{CHART}/values.yaml": lambda: values_yaml(read_source),
        f"{CHART}/values.schema.json": lambda: values_schema(read_source),
        PROFILE_DEFAULTS: profile_defaults,
    }
    for target, source in COPIES.items():
        files[target] = lambda source=source: read_source(source)
    return files
