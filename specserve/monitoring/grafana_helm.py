"""The Helm chart's Grafana-managed alert rules: a named template that renders the provisioning
file from the same values as the chart's PrometheusRule.

`grafana_alerting.grafana_rule` builds each rule, as it does for the committed file, but with
Helm actions for its settings instead of numbers: every threshold and window reads
`.Values.prometheusRule.alerts.<Name>.thresholds.<name>` / `.window` (helm.threshold_action,
so a threshold the profile sets reads its fact, e.g. SpecServeGpuMissing's GPUs per node), `for`
reads `.for`, the runbook links `.Values.prometheusRule.runbookBaseUrl`, and every rule sits
behind its `disabled` switch (and, like the PrometheusRule, is left out where a profile
threshold comes out 0). The SLO burn-rate queries join the parts of the enabled objectives of
`.Values.prometheusRule.slos` (slo.inline_burn_part, each a named template reading its
objective's settings), and are left out when every objective is disabled, as
`grafana_alert_rules` leaves them out.

How: the settings are first rendered as tokens, the document is dumped as YAML (any string
holding a token as a `|-` block, so a value Helm inserts cannot break the YAML quoting), the
whole text is escaped for Helm (Grafana's own `{{ $labels.x }}` reach Grafana verbatim), and the
tokens are then replaced by their Helm actions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import yaml

from specserve.monitoring.grafana_alerting import alert_rules_document, grafana_rule
from specserve.monitoring.helm import (
    PROFILE_THRESHOLDS,
    VALUES_ROOT,
    escape_go_template,
    threshold_action,
    window_checks,
)
from specserve.monitoring.rules import ALERTS, Alert
from specserve.monitoring.slo import BURN_JOIN, OBJECTIVES, Objective, inline_burn_part

TEMPLATE = "specserve.grafanaAlertRules"
_TOKEN = re.compile(r"xHelm(Action|Burn)([0-9]+)x")


class _Actions:
    """Tokens standing for Helm actions while the document is built and dumped."""

    def __init__(self) -> None:
        self.actions: list[str] = []

    def token(self, action: str, kind: str = "Action") -> str:
        self.actions.append(action)
        return f"xHelm{kind}{len(self.actions) - 1}x"

    def live(self, text: str) -> str:
        """`text` escaped for Helm, then each token replaced by its action."""
        escaped = escape_go_template(text)

        def block(match: re.Match[str]) -> str:
            # A block token is a whole value: its action prints a `|-` block at the key's indent.
            pad, action = match[1], self.actions[int(match[3])]
            return f"{pad}{match[2]}: |-{{{{ {action} | nindent {len(pad) + 2} }}}}"

        escaped = re.sub(r"^( *)([A-Za-z_]+): xHelmBurn([0-9]+)x$", block, escaped, flags=re.M)
        # A value Helm inserts into a quoted scalar could end its quotes: blocks only.
        quoted = re.search(r"^ *(- )?([A-Za-z_]+: )?['\"].*xHelmAction", escaped, flags=re.M)
        if quoted:
            raise ValueError(f"a Helm action in a quoted YAML scalar: {quoted[0]!r}")
        if "xHelmBurn" in escaped:
            raise ValueError("a burn-rate query token must be a whole mapping value")
        return _TOKEN.sub(lambda m: self.actions[int(m[2])], escaped)


def _is_token(text: str) -> bool:
    return _TOKEN.fullmatch(text) is not None


class _Dumper(yaml.SafeDumper):
    """Multi-line strings and strings with a token inside as `|` blocks (yamlio's style)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value or (_TOKEN.search(value) and not _is_token(value)):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)  # fmt: skip


def _alert_values(alert: Alert) -> str:
    return f"{VALUES_ROOT}.alerts.{alert.name}"


def _threshold(alert: Alert, actions: _Actions) -> Callable[[str], str]:
    helm = threshold_action(alert)  # "{{ pipeline }}"; unknown names fail here
    return lambda name: actions.token(helm(name))


def _number(text: str) -> Any:
    # A threshold's token stays a token (the action prints the number); a literal limit is one.
    return text if _is_token(text) else float(text)


def _part_template(alert: Alert, objective: Objective) -> str:
    return f"{TEMPLATE}.{alert.name}.{objective.name}"


def _burn_parts() -> list[str]:
    """One named template per burn-rate alert and objective: its part of the query, reading the
    objective's settings from the root context."""
    out: list[str] = []
    for alert in ALERTS:
        if not alert.needs_slo_records:
            continue
        for objective in OBJECTIVES:
            actions = _Actions()
            slo = f"{VALUES_ROOT}.slos.{objective.name}"

            def setting(key: str, slo: str = slo, actions: _Actions = actions) -> str:
                return actions.token(f"{{{{ {slo}.{key} }}}}")

            text = inline_burn_part(alert.severity, objective, setting)
            out.append(f'{{{{- define "{_part_template(alert, objective)}" -}}}}\n')
            out.append(actions.live(text + "\n"))
            out.append("{{- end }}\n")
    return out


def _burn_variable(alert: Alert) -> str:
    return f"$burn{alert.name}"


def _burn_lists() -> list[str]:
    """`$burn<Alert>`: the parts of the enabled objectives, in the objectives' order."""
    out: list[str] = []
    for alert in ALERTS:
        if not alert.needs_slo_records:
            continue
        variable = _burn_variable(alert)
        out.append(f"{{{{- {variable} := list }}}}\n")
        for objective in OBJECTIVES:
            out.append(f"{{{{- if not {VALUES_ROOT}.slos.{objective.name}.disabled }}}}\n")
            out.append(f'{{{{- {variable} = append {variable} '
                       f'(include "{_part_template(alert, objective)}" $) }}}}\n')  # fmt: skip
            out.append("{{- end }}\n")
    return out


def _rule(alert: Alert) -> list[str]:
    """The rule of `alert` in the group's `rules:` list, behind its switches."""
    values = _alert_values(alert)
    actions = _Actions()
    expr = None
    if alert.needs_slo_records:
        expr = actions.token(f"{_burn_variable(alert)} | join {json.dumps(BURN_JOIN)}", "Burn")
    rule = grafana_rule(
        alert,
        _threshold(alert, actions),
        actions.token(f"{{{{ {values}.for | quote }}}}"),
        actions.token(f'{{{{ {VALUES_ROOT}.runbookBaseUrl | trimSuffix "/" }}}}'),
        expr,
        _number,
    )
    out = [f"  {{{{- if not {values}.disabled }}}}\n"]
    for profile in PROFILE_THRESHOLDS:
        if profile.alert == alert.name:
            out.append(f"  {{{{- /* 0: {profile.why_zero}. */}}}}\n")
            out.append(f"  {{{{- if ne (int ({profile.action()})) 0 }}}}\n")
    if alert.needs_slo_records:
        # Every objective disabled: no record to read, as the rule file's alert has none.
        out.append(f"  {{{{- if {_burn_variable(alert)} }}}}\n")
    opened = sum(1 for line in out if line.lstrip().startswith("{{- if "))
    # Indented first: a burn-rate query's block is printed at the indent of its key.
    listed = "".join(f"  {line}\n" for line in _dump([rule]).splitlines())
    out.append(actions.live(listed))
    out.append("  {{- $rules = add1 $rules }}\n")
    out.extend("  {{- end }}\n" for _ in range(opened))
    return out


def grafana_helm_template() -> str:
    """Text of the chart's `templates/_grafana-alerts.tpl`: the named template
    `specserve.grafanaAlertRules` (called with the root context) prints the provisioning file."""
    document = _dump(alert_rules_document([]))
    empty = "  rules: []\n"
    if document.count(empty) != 1:
        raise ValueError("the provisioning file's group lost its rules list")
    head, tail = document.split(empty)
    if tail:
        raise ValueError("the group's rules must come last")
    out = [
        "{{- /* Generated by `specserve generate` from specserve/monitoring/grafana_helm.py; "
        "do not edit. */}}\n",
        *_burn_parts(),
        "{{- /* The Grafana-managed alert rules file (Grafana's alerting provisioning format), "
        "from the PrometheusRule's values: prometheusRule.alerts, .slos, .runbookBaseUrl. */}}\n",
        f'{{{{- define "{TEMPLATE}" -}}}}\n',
        *window_checks(),
        *_burn_lists(),
        "{{- $rules := 0 }}\n",
        "{{- /* The file's text starts here. */ -}}\n",
        "# Rendered by the specserve chart from prometheusRule.alerts, prometheusRule.slos and\n",
        "# prometheusRule.runbookBaseUrl: the same rules as its PrometheusRule.\n",
        "# Grafana must set SPECSERVE_PROMETHEUS_DATASOURCE_UID (the rules' datasource).\n",
        escape_go_template(head),
        "  rules:\n",
    ]
    for alert in ALERTS:
        out.extend(_rule(alert))
    # Every rule left out: an empty list, as grafana_alert_rules writes it (not a null).
    out.append("{{- if not $rules }} []{{ end }}\n")
    out.append("{{- end }}\n")
    return "".join(out)
