"""The Helm PrometheusRule template renders to the same rules as the Python source.

No helm binary is available here, so this renders the template with a minimal evaluator of
exactly the Go-template constructs it emits (value lookups, `if not ... disabled`/`end`, the
{{`{{`}} escapes); anything else it meets fails the test. The result must equal `render_rules`
with the same overrides and pass `promtool check rules`.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.monitoring.helm import helm_template, helm_values
from specserve.monitoring.rules import format_threshold, render_rules
from specserve.monitoring.yamlio import dump_yaml

from .conftest import MONITORING, run

# Raw-string escapes first: a lazy match would end inside {{`}}`}}.
_ACTION = re.compile(r"\{\{`(\{\{|\}\})`\}\}|\{\{-?\s*(.*?)\s*-?\}\}", re.S)


def _lookup(values: dict[str, Any], path: str) -> Any:
    node: Any = {"Values": values}
    for part in path.lstrip(".").split("."):
        node = node[part]
    return node


def render_spec(template: str, values: dict[str, Any]) -> dict[str, Any]:
    """Render the `spec:` part of the template and parse it as a rule file."""
    body = template.split("spec:\n", 1)[1].rsplit("{{- end }}", 1)[0]
    lines: list[str] = []
    skipping = False
    for line in body.splitlines():
        condition = re.fullmatch(r"\s*\{\{- if not (\.Values\.[\w.]+) \}\}", line)
        if condition:
            skipping = bool(_lookup(values, condition.group(1)))
            continue
        if re.fullmatch(r"\s*\{\{- end \}\}", line):
            skipping = False
            continue
        if not skipping:
            lines.append(line)
    text = "\n".join(lines)

    def evaluate(match: re.Match[str]) -> str:
        if match.group(1):
            return match.group(1)
        action = match.group(2)
        trim = re.fullmatch(r'(\.Values\.[\w.]+) \| trimSuffix "/"', action)
        if trim:
            return str(_lookup(values, trim.group(1))).rstrip("/")
        if re.fullmatch(r"\.Values\.[\w.]+", action):
            value = _lookup(values, action)
            return value if isinstance(value, str) else format_threshold(float(value))
        raise AssertionError(f"unexpected template action {{{{ {action} }}}}")

    return {"groups": yaml.safe_load(_ACTION.sub(evaluate, text))["groups"]}


def test_committed_helm_files_match_the_source() -> None:
    assert (MONITORING / "helm" / "prometheusrule.yaml").read_text() == helm_template()
    assert yaml.safe_load((MONITORING / "helm" / "values-prometheusrule.yaml").read_text()) == (
        helm_values()
    )


def test_default_values_render_the_default_rules() -> None:
    values = helm_values()
    rendered = render_spec(helm_template(), values)
    assert rendered == render_rules(runbook_base_url=values["prometheusRule"]["runbookBaseUrl"])


def test_overridden_values_render_like_python_overrides(promtool: str, tmp_path: Path) -> None:
    values = copy.deepcopy(helm_values())
    alerts = values["prometheusRule"]["alerts"]
    alerts["SpecDecodeQueueBacklog"]["disabled"] = True
    alerts["SpecDecodeBelowBaseline"]["for"] = "30m"
    alerts["SpecDecodeBelowBaseline"]["thresholds"]["tolerance"] = 0.85
    alerts["SpecServeNoDecodeLines"]["thresholds"]["match_on"] = "namespace, pod"
    values["prometheusRule"]["runbookBaseUrl"] = "https://example.org/rb/"
    rendered = render_spec(helm_template(), values)
    expected = render_rules(
        {
            "SpecDecodeQueueBacklog": {"enabled": False},
            "SpecDecodeBelowBaseline": {"for": "30m", "thresholds": {"tolerance": 0.85}},
            "SpecServeNoDecodeLines": {"thresholds": {"match_on": "namespace, pod"}},
        },
        runbook_base_url="https://example.org/rb/",
    )
    assert rendered == expected
    path = tmp_path / "rules.yml"
    path.write_text(dump_yaml(rendered))
    result = run(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_template_actions_are_escaped_for_helm() -> None:
    template = helm_template()
    # Prometheus' own actions reach Prometheus only through the raw-string escape.
    assert "{{`{{`}} $value | humanizePercentage {{`}}`}}" in template
    unescaped = re.findall(r"\{\{ \$", template.replace("{{`{{`}} $", ""))
    assert unescaped == []


@pytest.mark.parametrize("name", list(helm_values()["prometheusRule"]["alerts"]))
def test_every_alert_has_a_switch(name: str) -> None:
    assert f"{{{{- if not .Values.prometheusRule.alerts.{name}.disabled }}}}" in helm_template()
