"""The Helm PrometheusRule template, rendered by the real (pinned) helm, gives the same rules as
the Python source for the same settings, window overrides included.

The template is placed in a throw-away chart with the generated default values, as the chart in
charts/ copies it, and the chart's profile-fact helpers (a threshold the profile sets reads
them); `helm template` renders it and the PrometheusRule's spec must equal `render_rules` with
the equivalent overrides and pass promtool.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.monitoring.helm import helm_template, helm_values, helm_values_text
from specserve.monitoring.prometheus import render_rules
from specserve.monitoring.rules import ALERTS
from specserve.monitoring.yamlio import dump_yaml

from .conftest import MONITORING, REPO, run, run_helm
from .promtool_cases import (
    DRAFTS_REJECTED_EXPR_1M,
    WINDOW_OVERRIDE_DIR,
    WINDOW_OVERRIDE_RULE_FILE,
    WINDOW_OVERRIDES,
)


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("chart") / "rules"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: rules\nversion: 0.1.0\n")
    (root / "templates" / "prometheusrule.yaml").write_text(helm_template())
    (root / "values.yaml").write_text(helm_values_text())
    # The profile facts (SpecServeGpuMissing's GPU count): the helpers and the files they read.
    source = REPO / "charts" / "specserve"
    (root / "templates" / "_helpers.tpl").write_text(
        (source / "templates" / "_helpers.tpl").read_text())
    for name in ("files/profiles/default.yaml", "files/profile-defaults.yaml"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text((source / name).read_text())
    return root


def helm_render(helm: str, chart: Path, values: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """`helm template` with `values` on top of the defaults; the PrometheusRule's spec."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = run_helm(helm, "template", "rel", str(chart), "--namespace", "ns", "-f", str(path))
    assert result.returncode == 0, result.stderr
    (rule,) = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert rule["kind"] == "PrometheusRule" and rule["metadata"]["namespace"] == "ns"
    return dict(rule["spec"])


def _alerts_values(changes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"prometheusRule": {"alerts": changes}}


def test_committed_helm_files_match_the_source() -> None:
    assert (MONITORING / "helm" / "prometheusrule.yaml").read_text() == helm_template()
    assert yaml.safe_load((MONITORING / "helm" / "values-prometheusrule.yaml").read_text()) == (
        helm_values()
    )


def test_default_values_render_the_default_rules(helm: str, chart: Path, tmp_path: Path) -> None:
    values = helm_values()
    rendered = helm_render(helm, chart, {}, tmp_path)
    assert rendered == render_rules(runbook_base_url=values["prometheusRule"]["runbookBaseUrl"])


def test_overridden_values_render_like_python_overrides(
    helm: str, chart: Path, promtool: str, tmp_path: Path
) -> None:
    values = _alerts_values({
        "SpecDecodeQueueBacklog": {"disabled": True},
        "SpecDecodeBelowBaseline": {"for": "30m", "window": "10m",
                                    "thresholds": {"tolerance": 0.85}},
        "SpecDecodeGraphDisabled": {"window": "90s"},
        "SpecServeNoDecodeLines": {"thresholds": {"match_on": "namespace, pod"}},
    })  # fmt: skip
    values["prometheusRule"]["runbookBaseUrl"] = "https://example.org/rb/"
    rendered = helm_render(helm, chart, values, tmp_path)
    expected = render_rules(
        {
            "SpecDecodeQueueBacklog": {"enabled": False},
            "SpecDecodeBelowBaseline": {"for": "30m", "window": "10m",
                                        "thresholds": {"tolerance": 0.85}},
            "SpecDecodeGraphDisabled": {"window": "90s"},
            "SpecServeNoDecodeLines": {"thresholds": {"match_on": "namespace, pod"}},
        },
        runbook_base_url="https://example.org/rb/",
    )  # fmt: skip
    assert rendered == expected
    records = [r["record"] for r in rendered["groups"][0]["rules"]]
    assert "instance_concurrency:specserve_decode_gen_throughput_over_baseline:ratio10m" in records
    assert "instance:specserve_log_lines_parsed_decode:rate90s" in records
    path = tmp_path / "rules.yml"
    path.write_text(dump_yaml(rendered))
    result = run(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_window_values_render_the_window_override_rule_file(
    helm: str, chart: Path, promtool: str, promtool_tests: Path, tmp_path: Path
) -> None:
    window_tests = promtool_tests / WINDOW_OVERRIDE_DIR
    # The same settings as the promtool scenarios' window-override/overrides.yml, given as
    # Helm values: the chart must render that directory's rule file, and its promtool test (which
    # only passes at the 1m window) must pass on the chart's rules too.
    rendered = helm_render(helm, chart, _alerts_values(WINDOW_OVERRIDES), tmp_path)
    committed = yaml.safe_load((window_tests / WINDOW_OVERRIDE_RULE_FILE).read_text())
    assert rendered == committed
    drafts = {r["alert"]: r for r in rendered["groups"][1]["rules"]}["SpecDecodeDraftsRejected"]
    assert drafts["expr"] == DRAFTS_REJECTED_EXPR_1M
    assert "over 1m is" in drafts["annotations"]["description"]
    mean1m = {r["record"]: r for r in rendered["groups"][0]["rules"]}[
        "instance:specserve_decode_accept_length:mean1m"
    ]
    assert "[1m]" in mean1m["expr"] and "[2m]" not in mean1m["expr"]
    (tmp_path / WINDOW_OVERRIDE_RULE_FILE).write_text(dump_yaml(rendered))
    for test in window_tests.glob("drafts-rejected-*.yml"):
        (tmp_path / test.name).write_text(test.read_text())
        result = run(promtool, "test", "rules", test.name, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("window", ["5 m", "0s", "1m30", "-1m", "soon"])
def test_a_bad_window_value_fails_the_render_naming_the_field(
    helm: str, chart: Path, tmp_path: Path, window: str
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(
        _alerts_values({"SpecDecodeDraftsRejected": {"window": window}})
    ))  # fmt: skip
    result = run_helm(helm, "template", "rel", str(chart), "-f", str(path))
    assert result.returncode != 0
    assert f'prometheusRule.alerts.SpecDecodeDraftsRejected.window: "{window}" is not a ' in (
        result.stderr
    )
    assert "use e.g. 1m, 2m, 5m" in result.stderr


def test_prometheus_template_actions_are_escaped_for_helm() -> None:
    template = helm_template()
    # Prometheus' own actions reach Prometheus only through the raw-string escape.
    assert "{{`{{`}} $value | humanizePercentage {{`}}`}}" in template
    unescaped = re.findall(r"\{\{ \$(?!window )", template.replace("{{`{{`}} $", ""))
    assert unescaped == []


@pytest.mark.parametrize("name", list(helm_values()["prometheusRule"]["alerts"]))
def test_every_alert_has_a_switch(name: str) -> None:
    assert f"{{{{- if not .Values.prometheusRule.alerts.{name}.disabled }}}}" in helm_template()


def test_values_carry_a_window_exactly_for_alerts_on_a_rate() -> None:
    alerts = helm_values()["prometheusRule"]["alerts"]
    for alert in ALERTS:
        assert alerts[alert.name].get("window") == alert.window, alert.name
