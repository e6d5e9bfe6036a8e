"""The Helm chart's PrometheusRule template and its default values, from the same rule source.

kube-prometheus-stack conventions: every alert sits behind
`{{- if not .Values.prometheusRule.alerts.<Name>.disabled }}`, `for`, `window` and thresholds come
from values, and Prometheus' own template actions ({{ $value }}, {{ $labels.x }}) are escaped as
{{`{{`}} ... {{`}}`}} so Helm passes them through untouched.

Recording rules are rendered like `render_rules` renders them: each family at RECORDING_WINDOW
and at the window of every enabled alert that needs it (`list`, `append`, `uniq`, `sortAlpha`),
so the chart and `specserve rules render` give the same rule file for the same settings.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from typing import Any

from specserve.monitoring.expansion import (
    alert_annotations,
    alert_expr,
    families_in,
    recording_expr,
)
from specserve.monitoring.overrides import DURATION_RE
from specserve.monitoring.prometheus import ALERT_GROUP, RECORDING_GROUP, SLO_GROUP
from specserve.monitoring.rules import (
    ALERTS,
    DEFAULT_RUNBOOK_BASE_URL,
    RECORDING_RULES,
    RECORDING_WINDOW,
    WINDOW,
    Alert,
    RecordingRule,
)
from specserve.monitoring.slo import OBJECTIVES, SLO_WINDOWS, objective_records, record_labels
from specserve.monitoring.yamlio import dump_yaml

VALUES_ROOT = ".Values.prometheusRule"
_BRACES = re.compile(r"\{\{|\}\}")


def escape_go_template(text: str) -> str:
    """Make Helm print `text` verbatim: each `{{` / `}}` becomes a Go raw-string action."""
    return _BRACES.sub(lambda m: "{{`" + m.group(0) + "`}}", text)


def _alert_values(alert: Alert) -> str:
    return f"{VALUES_ROOT}.alerts.{alert.name}"


@dataclasses.dataclass(frozen=True)
class ProfileThreshold:
    """A threshold whose chart default is a fact of the effective profile: null in the values,
    the fact (a `_helpers.tpl` template, which applies the profile library's defaults) unless
    the user sets a number. An alert whose threshold comes out 0 is left out of the render."""

    alert: str
    threshold: str
    helper: str
    fact: str  # what the helper returns, in words
    why_zero: str  # what a 0 means, i.e. why the alert is left out then

    def action(self) -> str:
        """The Go template pipeline of the effective value."""
        values = f"{VALUES_ROOT}.alerts.{self.alert}.thresholds.{self.threshold}"
        return f'{values} | default (include "{self.helper}" $)'


# The Ansible path sets the same thresholds from the profile's facts
# (ansible/roles/monitoring/tasks/rules.yml); `specserve rules render` keeps the rules' defaults.
PROFILE_THRESHOLDS: tuple[ProfileThreshold, ...] = (
    ProfileThreshold(
        "SpecServeGpuMissing", "gpus", "specserve.gpuCount",
        "the effective profile's gpu.count, its GPUs per node",
        "a CPU stand-in (gpu.count 0) has no GPU to miss, and the DCGM exporter watches GPU "
        "nodes",
    ),
)


def profile_threshold(alert: Alert, name: str) -> ProfileThreshold | None:
    for item in PROFILE_THRESHOLDS:
        if (item.alert, item.threshold) == (alert.name, name):
            return item
    return None


def threshold_action(alert: Alert) -> Any:
    def action(name: str) -> str:
        if name == WINDOW:
            if alert.window is None:
                raise KeyError(f"alert {alert.name} has no window")
            return "{{ " + f"{_alert_values(alert)}.window" + " }}"
        alert.threshold(name)  # unknown names fail here, at generation time
        profile = profile_threshold(alert, name)
        if profile is not None:
            return "{{ " + profile.action() + " }}"
        return "{{ " + f"{_alert_values(alert)}.thresholds.{name}" + " }}"

    return action


def _block(key: str, text: str, indent: int) -> str:
    pad = " " * indent
    body = "\n".join(f"{pad}  {line}" if line else "" for line in text.splitlines())
    return f"{pad}{key}: |-\n{body}\n"


def _helm_text(alert: Alert, text: str) -> str:
    escaped = dataclasses.replace(alert, summary=escape_go_template(alert.summary),
                                  description=escape_go_template(alert.description))  # fmt: skip
    return alert_annotations(escaped, threshold_action(alert), "")[text]


# Go's RE2 reads the same duration syntax; [0-9] spares a round of backslash escaping.
_GO_DURATION = DURATION_RE.pattern.replace(r"\d", "[0-9]")


def window_checks() -> list[str]:
    """`fail` with the field and the fix, like `specserve rules render` does for a bad window:
    a window also becomes part of recording rule names, where a typo would be silently odd."""
    names = " ".join(f'"{alert.name}"' for alert in ALERTS if alert.window is not None)
    return [
        f"{{{{- range $name := list {names} }}}}\n",
        f"{{{{- $window := toString (index ${VALUES_ROOT}.alerts $name \"window\") }}}}\n",
        f"{{{{- if not (and (regexMatch `{_GO_DURATION}` $window) "
        "(regexMatch `[1-9]` $window)) }}\n",
        '{{- fail (printf "prometheusRule.alerts.%s.window: %q is not a Prometheus duration above '
        'zero; use e.g. 1m, 2m, 5m" $name $window) }}\n',
        "{{- end }}\n",
        "{{- end }}\n",
    ]


def _recording_family(index: int, rule: RecordingRule) -> list[str]:
    windows = f"$windows{index}"
    out = [f'    {{{{- {windows} := list "{RECORDING_WINDOW}" }}}}\n']
    for alert in ALERTS:
        if rule.family not in families_in(alert.value_expr):
            continue
        values = _alert_values(alert)
        out.append(f"    {{{{- if not {values}.disabled }}}}\n")
        out.append(f"    {{{{- {windows} = append {windows} {values}.window }}}}\n")
        out.append("    {{- end }}\n")
    window = "{{ $window }}"
    out.append(f"    {{{{- range $window := {windows} | uniq | sortAlpha }}}}\n")
    out.append(f"    - record: {rule.record(window)}\n")
    escaped = dataclasses.replace(rule, expr=escape_go_template(rule.expr))
    out.append(_block("expr", recording_expr(escaped, window), 6))
    out.append("    {{- end }}\n")
    return out


def helm_template() -> str:
    """Text of `templates/prometheusrule.yaml` for the chart."""
    out: list[str] = [
        "{{- /* Generated by `specserve rules helm-template` from specserve/monitoring/rules.py; "
        "do not edit. */}}\n",
        f"{{{{- if {VALUES_ROOT}.enabled }}}}\n",
        *window_checks(),
        "apiVersion: monitoring.coreos.com/v1\n",
        "kind: PrometheusRule\n",
        "metadata:\n",
        '  name: {{ printf "%s-specserve" .Release.Name | trunc 63 | trimSuffix "-" }}\n',
        "  namespace: {{ .Release.Namespace }}\n",
        "  labels:\n",
        "    app.kubernetes.io/name: specserve\n",
        "    app.kubernetes.io/instance: {{ .Release.Name }}\n",
        "    app.kubernetes.io/managed-by: {{ .Release.Service }}\n",
        f"    {{{{- with {VALUES_ROOT}.additionalLabels }}}}\n",
        "    {{- toYaml . | nindent 4 }}\n",
        "    {{- end }}\n",
        "spec:\n",
        "  groups:\n",
        f"  - name: {RECORDING_GROUP}\n",
        "    rules:\n",
    ]
    for index, rule in enumerate(RECORDING_RULES):
        out.extend(_recording_family(index, rule))
    out.append(f"  - name: {ALERT_GROUP}\n")
    out.append("    rules:\n")
    for alert in ALERTS:
        values = _alert_values(alert)
        out.append(f"    {{{{- if not {values}.disabled }}}}\n")
        profiled = [p for p in PROFILE_THRESHOLDS if p.alert == alert.name]
        for profile in profiled:
            out.append(f"    {{{{- /* 0: {profile.why_zero}. */}}}}\n")
            out.append(f"    {{{{- if ne (int ({profile.action()})) 0 }}}}\n")
        out.append(f"    - alert: {alert.name}\n")
        out.append(_block("expr", _helm_alert_expr(alert), 6))
        out.append(f"      for: {{{{ {values}.for }}}}\n")
        out.append("      labels:\n")
        for key, value in alert.labels.items():
            out.append(f"        {key}: {value}\n")
        out.append("      annotations:\n")
        out.append(_block("summary", _helm_text(alert, "summary"), 8))
        out.append(_block("description", _helm_text(alert, "description"), 8))
        out.append(
            f"        runbook_url: {{{{ {VALUES_ROOT}.runbookBaseUrl | trimSuffix \"/\" }}}}"
            f"/{alert.runbook_slug}.md\n"
        )
        out.extend("    {{- end }}\n" for _ in profiled)
        out.append("    {{- end }}\n")
    out.extend(_slo_group())
    out.append("{{- end }}\n")
    return "".join(out)


def _slo_group() -> list[str]:
    """The SLO recording rules, each objective behind its `disabled` switch; settings are read
    inside `with` the objective's values, so `{{ .target }}` is its target."""
    slos = f"{VALUES_ROOT}.slos"
    enabled = " ".join(f"(not {slos}.{o.name}.disabled)" for o in OBJECTIVES)
    out = [f"  {{{{- if or {enabled} }}}}\n", f"  - name: {SLO_GROUP}\n", "    rules:\n"]
    for objective in OBJECTIVES:
        out.append(f"    {{{{- with {slos}.{objective.name} }}}}\n")
        out.append("    {{- if not .disabled }}\n")
        for record, expr in objective_records(objective, lambda key: "{{ ." + key + " }}"):
            out.append(f"    - record: {record}\n")
            out.append(_block("expr", expr, 6))
            out.append("      labels:\n")
            out.extend(f"        {k}: {v}\n" for k, v in record_labels(objective).items())
        out.append("    {{- end }}\n")
        out.append("    {{- end }}\n")
    out.append("  {{- end }}\n")
    return out


def slo_values() -> dict[str, Any]:
    """The chart's `prometheusRule.slos`: each objective's default settings."""
    values: dict[str, Any] = {}
    for objective in OBJECTIVES:
        settings: dict[str, Any] = {"disabled": False, "target": objective.target,
                                    "period": objective.period}
        if objective.threshold_seconds is not None:
            settings["threshold_seconds"] = objective.threshold_seconds
        values[objective.name] = settings
    return values


def slo_values_schema() -> dict[str, Any]:
    """JSON Schema of `prometheusRule.slos`, with the same limits `validate_slos` applies."""
    properties: dict[str, Any] = {}
    for objective in OBJECTIVES:
        fields: dict[str, Any] = {
            "disabled": {"description": "Switch the objective (its rules and alerts) off.",
                         "type": "boolean"},
            "target": {"description": "Share of good events (0.99 = 99%).", "type": "number",
                       "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "period": {"description": "SLO window the budget remaining is counted over.",
                       "$ref": "#/$defs/duration", "not": {"enum": list(SLO_WINDOWS)}},
        }
        if objective.histogram is not None:
            fields["threshold_seconds"] = {
                "description": f"Latency a good event is within: a bound of SGLang's "
                f"{objective.histogram} buckets.",
                "enum": list(objective.buckets),
            }
        properties[objective.name] = {
            "description": objective.help,
            "type": "object",
            "additionalProperties": False,
            "properties": fields,
        }
    return {
        "description": "Service level objectives (docs/slo.md): their recording rules feed the "
        "error-budget burn-rate alerts.",
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }


def _helm_alert_expr(alert: Alert) -> str:
    # Escape first, then insert Helm actions, so the actions themselves stay live.
    escaped = dataclasses.replace(alert, value_expr=escape_go_template(alert.value_expr))
    return alert_expr(escaped, threshold_action(alert))


def helm_values() -> dict[str, Any]:
    alerts: dict[str, Any] = {}
    for alert in ALERTS:
        settings: dict[str, Any] = {"disabled": not alert.enabled_by_default, "for": alert.for_}
        if alert.window is not None:
            settings["window"] = alert.window
        settings["thresholds"] = {
            item.name: None if profile_threshold(alert, item.name) else item.default
            for item in alert.thresholds
        }
        alerts[alert.name] = settings
    return {
        "prometheusRule": {
            "enabled": True,
            "additionalLabels": {},
            "runbookBaseUrl": DEFAULT_RUNBOOK_BASE_URL,
            "alerts": alerts,
            "slos": slo_values(),
        }
    }


def _profile_comment(profile: ProfileThreshold) -> str:
    return (f"null: {profile.fact} (the chart's {profile.helper}); a number wins. Where it "
            f"comes out 0 the alert is left out: {profile.why_zero}.")


def helm_values_text() -> str:
    text = dump_yaml(
        helm_values(),
        header=(
            "Generated by `specserve rules helm-values` from specserve/monitoring/rules.py.\n"
            "Per alert: disabled, for, window (alerts on a rate), thresholds (docs/alerts.md).\n"
            "Per objective (slos): disabled, target, period, threshold_seconds (docs/slo.md)."
        ),
    )
    # A plain comment above each threshold the profile sets (values.yaml keeps it as it is).
    for profile in PROFILE_THRESHOLDS:
        pattern = re.compile(
            rf"(^ +{profile.alert}:\n(?: {{6,}}.*\n)*?)( +)({profile.threshold}: null\n)", re.M)
        comment = textwrap.wrap(_profile_comment(profile), 80)
        text, found = pattern.subn(
            lambda m, c=comment: m[1] + "".join(f"{m[2]}# {line}\n" for line in c) + m[2] + m[3],
            text)
        if found != 1:
            raise ValueError(f"{profile.alert}.thresholds.{profile.threshold} not in the values")
    return text


def profile_thresholds_schema() -> list[dict[str, Any]]:
    """`allOf` entries of the chart's `prometheusRule.alerts` schema: a threshold the profile
    sets is a number within the rule's limits, or null."""
    entries = []
    for profile in PROFILE_THRESHOLDS:
        item = next(a for a in ALERTS if a.name == profile.alert).threshold(profile.threshold)
        field: dict[str, Any] = {"description": _profile_comment(profile),
                                 "type": ["number", "null"]}
        if item.minimum is not None:
            field["minimum"] = item.minimum
        if item.maximum is not None:
            field["maximum"] = item.maximum
        entries.append({"properties": {profile.alert: {"properties": {"thresholds": {
            "properties": {profile.threshold: field}}}}}})
    return entries
