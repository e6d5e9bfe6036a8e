"""The chart's Grafana-managed alert rules follow the PrometheusRule's values.

configmap-grafana.yaml prints `specserve.grafanaAlertRules` (templates/_grafana-alerts.tpl,
generated from specserve/monitoring/grafana_helm.py). For each set of values, the real `helm
template` renders the ConfigMap, and its rules file (parsed) must equal `grafana_alert_rules`
with the equivalent overrides file's `alerts:`, `slos:` and runbook base URL, which is what
`specserve rules grafana-alerts --overrides` writes. A rule that ignored one of its values would
print the default there: the all-values-changed case changes every value of every alert (and
asserts each change shows in the Python rule), and a mutant chart whose template ignores one
threshold fails the comparison.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.monitoring.grafana_alerting import grafana_alert_rules
from specserve.monitoring.rules import ALERTS, DEFAULT_RUNBOOK_BASE_URL, WINDOW, Threshold
from specserve.monitoring.slo import OBJECTIVES
from tests.helm.conftest import CHART, NAMESPACE, RELEASE, REPO, helm, merged
from tests.monitoring.test_grafana import check_alert_file

CONFIGMAP = f"{RELEASE}-grafana-alerts"
FILE = "specserve-alerts.yml"
ON = {"grafana": {"alerts": {"enabled": True}}}


def render(tools: Path, tmp_path: Path, values: dict[str, Any], chart: Path = CHART) -> str:
    """The rules file of the chart's Grafana alerts ConfigMap for `values`."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(merged(ON, values), sort_keys=False), encoding="utf-8")
    result = helm(tools, "template", RELEASE, str(chart), "--namespace", NAMESPACE,
                  "--values", str(path))  # fmt: skip
    assert result.returncode == 0, result.stderr
    (configmap,) = [d for d in yaml.safe_load_all(result.stdout)
                    if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == CONFIGMAP]
    return str(configmap["data"][FILE])


def overrides(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The overrides file's alerts:, slos: and runbook_base_url equivalent to the chart's
    `prometheusRule` values (`disabled` is the file's `enabled` negated)."""
    rules = values.get("prometheusRule", {})

    def settings(raw: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in raw.items() if k != "disabled"}
        if "disabled" in raw:
            out["enabled"] = not raw["disabled"]
        return out

    alerts = {name: settings(raw) for name, raw in rules.get("alerts", {}).items()}
    slos = {name: settings(raw) for name, raw in rules.get("slos", {}).items()}
    return alerts, slos, rules.get("runbookBaseUrl", DEFAULT_RUNBOOK_BASE_URL)


def expected(values: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """`grafana_alert_rules` for the values; `extra` adds overrides a profile fact implies."""
    alerts, slos, base_url = overrides(values)
    for name, change in (extra or {}).items():
        alerts[name] = merged(alerts.get(name, {}), change)
    return grafana_alert_rules(alerts, base_url, slos)


def rules_by_title(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["title"]: r for r in document["groups"][0]["rules"]}


def differing(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Titles whose rule differs (or that one side lacks), and `file` for the rest."""
    mine, theirs = rules_by_title(got), rules_by_title(want)
    titles = sorted({t for t in mine.keys() | theirs.keys() if mine.get(t) != theirs.get(t)})
    rest = {**got, "groups": [{**got["groups"][0], "rules": []}]}
    rest_want = {**want, "groups": [{**want["groups"][0], "rules": []}]}
    return titles + (["file"] if rest != rest_want else [])


def _four_gpus() -> dict[str, Any]:
    return {"profileOverrides": {"gpu": {"count": 4}, "parallelism": {"tp": 4}}}


def _standin() -> dict[str, Any]:
    return {"profile": yaml.safe_load((REPO / "profiles" / "standin-cpu.yaml").read_text())}


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # values, the overrides the effective profile implies (what Ansible sets from its facts)
    "defaults": ({}, {}),
    "threshold-and-for": ({"prometheusRule": {
        "runbookBaseUrl": "https://example.org/runbooks/",
        "alerts": {
            "SpecDecodeDraftsRejected": {"for": "7m", "thresholds": {"max_accept_length": 1.2}},
            "SpecDecodeBelowBaseline": {"window": "10m", "thresholds": {"tolerance": 0.85}},
            "SpecServeNoDecodeLines": {"thresholds": {"match_on": "namespace, pod"}},
        }}}, {}),
    "disabled-alert": ({"prometheusRule": {"alerts": {
        "SpecDecodeQueueBacklog": {"disabled": True},
        "SpecServeTimeToFirstTokenHigh": {"disabled": False},  # off by default
    }}}, {}),
    "slo-target-and-disabled-objective": ({"prometheusRule": {"slos": {
        "ttft": {"target": 0.99, "threshold_seconds": 4.0},
        "availability": {"disabled": True},
    }}}, {}),
    "every-objective-disabled": ({"prometheusRule": {"slos": {
        o.name: {"disabled": True} for o in OBJECTIVES}}}, {}),
    "every-alert-disabled": ({"prometheusRule": {"alerts": {
        a.name: {"disabled": True} for a in ALERTS}}}, {}),
    "four-gpus": (_four_gpus(), {"SpecServeGpuMissing": {"thresholds": {"gpus": 4}}}),
    "four-gpus-explicit-2": (
        merged(_four_gpus(), {"prometheusRule": {"alerts": {"SpecServeGpuMissing": {
            "thresholds": {"gpus": 2}}}}}), {}),
    # gpu.count 0: the PrometheusRule leaves SpecServeGpuMissing out, and so does Grafana.
    "cpu-standin": (_standin(), {"SpecServeGpuMissing": {"enabled": False}}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_configmap_equals_grafana_alert_rules_for_the_same_settings(
    tools: Path, tmp_path: Path, case: str
) -> None:
    values, implied = CASES[case]
    text = render(tools, tmp_path, values)
    document = yaml.safe_load(text)
    want = expected(values, implied)
    assert differing(document, want) == []
    assert document == want
    check_alert_file(document)  # Grafana's provisioning format, as the committed file's test
    assert "SPECSERVE_PROMETHEUS_DATASOURCE_UID" in text


def test_each_case_changes_what_it_claims(tools: Path, tmp_path: Path) -> None:
    """The cases are not vacuous: each changes the rules it names, against the defaults."""
    default = rules_by_title(grafana_alert_rules())
    changed = {case: rules_by_title(expected(*CASES[case])) for case in CASES}
    drafts = changed["threshold-and-for"]["SpecDecodeDraftsRejected"]
    assert drafts["for"] == "7m" and drafts["data"][2]["model"]["conditions"][0][
        "evaluator"]["params"] == [1.2]
    assert "[10m]" in changed["threshold-and-for"]["SpecDecodeBelowBaseline"]["data"][0][
        "model"]["expr"]
    assert changed["threshold-and-for"]["SpecServeExporterDown"]["annotations"][
        "runbook_url"].startswith("https://example.org/runbooks/spec-serve-")
    assert set(default) - set(changed["disabled-alert"]) == {"SpecDecodeQueueBacklog"}
    assert set(changed["disabled-alert"]) - set(default) == {"SpecServeTimeToFirstTokenHigh"}
    burn = changed["slo-target-and-disabled-objective"]["SpecServeErrorBudgetBurn"]
    expr = burn["data"][0]["model"]["expr"]
    assert "/ (1 - 0.99)" in expr and '"availability"' not in expr and '"itl"' in expr
    assert {"SpecServeErrorBudgetBurn", "SpecServeErrorBudgetBurnSlow"}.isdisjoint(
        changed["every-objective-disabled"])
    assert changed["every-alert-disabled"] == {}
    for case, gpus in (("four-gpus", 4), ("four-gpus-explicit-2", 2)):
        missing = changed[case]["SpecServeGpuMissing"]
        assert missing["data"][2]["model"]["conditions"][0]["evaluator"]["params"] == [gpus]
    assert "SpecServeGpuMissing" in default
    assert "SpecServeGpuMissing" not in changed["cpu-standin"]


def _changed_number(item: Threshold) -> float:
    assert isinstance(item.default, float)
    top = item.maximum if item.maximum is not None else item.default * 2 + 2
    return round((item.default + top) / 2, 3)


_TEXT = {"labels": "namespace, pod", "metric": "sglang:num_queue_reqs", "regex": "other-job"}


def every_value_changed() -> dict[str, Any]:
    """Values with every alert's switch flipped from its default, and every enabled alert's
    for, window and thresholds changed; every objective's target and threshold changed."""
    alerts: dict[str, Any] = {}
    for index, alert in enumerate(ALERTS):
        settings: dict[str, Any] = {"for": f"{31 + index}m"}
        if alert.window is not None:
            settings["window"] = f"{100 + index}s"  # no default is in seconds
        settings["thresholds"] = {
            item.name: _changed_number(item) if item.kind == "number" else _TEXT[item.kind]
            for item in alert.thresholds
        }
        alerts[alert.name] = settings
    slos = {"ttft": {"target": 0.99, "threshold_seconds": 4.0},
            "itl": {"target": 0.9, "threshold_seconds": 0.2},
            "availability": {"target": 0.995}}  # fmt: skip
    return {"prometheusRule": {"alerts": alerts, "slos": slos,
                               "runbookBaseUrl": "https://example.org/rb"}}  # fmt: skip


def test_every_rule_follows_every_one_of_its_values(tools: Path, tmp_path: Path) -> None:
    values = every_value_changed()
    # Every alert on (the opt-in ones too), every value changed.
    for settings in values["prometheusRule"]["alerts"].values():
        settings["disabled"] = False
    want = expected(values)
    default = rules_by_title(expected({"prometheusRule": {"alerts": {
        a.name: {"disabled": False} for a in ALERTS}}}))  # fmt: skip
    # Each alert's rule differs from its default in each setting a value may change.
    for alert in ALERTS:
        rule, before = rules_by_title(want)[alert.name], default[alert.name]
        assert rule["for"] != before["for"], alert.name
        assert rule["annotations"]["runbook_url"] != before["annotations"]["runbook_url"]
        for item in alert.thresholds:
            one = {"prometheusRule": {"alerts": {alert.name: {"disabled": False, "thresholds": {
                item.name: values["prometheusRule"]["alerts"][alert.name]["thresholds"][
                    item.name]}}}}}
            assert rules_by_title(expected(one))[alert.name] != before, (alert.name, item.name)
        if alert.window is not None:
            one = {"prometheusRule": {"alerts": {alert.name: {
                "disabled": False, WINDOW: values["prometheusRule"]["alerts"][alert.name][
                    WINDOW]}}}}
            assert rules_by_title(expected(one))[alert.name] != before, (alert.name, WINDOW)
    document = yaml.safe_load(render(tools, tmp_path, values))
    assert differing(document, want) == []
    check_alert_file(document)
    # Every switch: each alert flipped from its default.
    flipped = {"prometheusRule": {"alerts": {
        a.name: {"disabled": a.enabled_by_default} for a in ALERTS}}}  # fmt: skip
    document = yaml.safe_load(render(tools, tmp_path, flipped))
    assert differing(document, expected(flipped)) == []
    assert set(rules_by_title(document)) == {a.name for a in ALERTS if not a.enabled_by_default}


def test_a_template_ignoring_one_value_fails_the_comparison(
    tools: Path, tmp_path: Path
) -> None:
    """The mutant: a copy of the chart whose Grafana template prints SpecDecodeDraftsRejected's
    default instead of its value, and one that ignores the ttft objective's target."""
    values = {"prometheusRule": {
        "alerts": {"SpecDecodeDraftsRejected": {"thresholds": {"max_accept_length": 1.2}}},
        "slos": {"ttft": {"target": 0.99}}}}  # fmt: skip
    assert differing(yaml.safe_load(render(tools, tmp_path, values)), expected(values)) == []
    template = "templates/_grafana-alerts.tpl"
    for action, default, broken in (
        (".Values.prometheusRule.alerts.SpecDecodeDraftsRejected.thresholds.max_accept_length",
         "1.05", ["SpecDecodeDraftsRejected"]),
        (".Values.prometheusRule.slos.ttft.target", "0.95",
         ["SpecServeErrorBudgetBurn", "SpecServeErrorBudgetBurnSlow"]),
    ):
        mutant = tmp_path / f"mutant-{len(broken)}" / "specserve"
        shutil.copytree(CHART, mutant)
        text = (mutant / template).read_text(encoding="utf-8")
        assert text.count(f"{{{{ {action} }}}}") >= 1
        (mutant / template).write_text(text.replace(f"{{{{ {action} }}}}", default))
        document = yaml.safe_load(render(tools, tmp_path, values, mutant))
        assert differing(document, expected(values)) == broken
