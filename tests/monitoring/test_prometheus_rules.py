"""The Prometheus rules, checked and unit-tested by the real promtool."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from specserve.monitoring.rule_tests import CASES, RECORDING_CASES, promtool_test_files
from specserve.monitoring.rules import ALERTS, RECORDING_RULES, render_rules
from specserve.monitoring.yamlio import dump_yaml

from .conftest import MONITORING, run

RULES = MONITORING / "prometheus" / "specserve-rules.yml"
TESTS = MONITORING / "prometheus" / "tests"


def test_committed_rules_pass_promtool_check(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    expected = len(ALERTS) + len(RECORDING_RULES)
    assert f"SUCCESS: {expected} rules found" in result.stdout


def test_promtool_unit_tests_pass(promtool: str) -> None:
    files = sorted(TESTS.glob("*.yml"))
    assert len(files) == len(promtool_test_files())
    result = run(promtool, "test", "rules", *[f.name for f in files], cwd=TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files)


def test_a_broken_threshold_makes_the_unit_tests_fail(promtool: str, tmp_path: Path) -> None:
    # The unit tests must catch a wrong rule, not just pass on any rule.
    broken = RULES.read_text().replace("< 1.05", "< 0.5")
    assert broken != RULES.read_text()
    (tmp_path / "specserve-rules.yml").write_text(broken)
    (tmp_path / "tests").mkdir()
    test_file = tmp_path / "tests" / "spec-decode-drafts-rejected.yml"
    test_file.write_text((TESTS / test_file.name).read_text())
    result = run(promtool, "test", "rules", test_file.name, cwd=tmp_path / "tests")
    assert result.returncode != 0
    assert "SpecDecodeDraftsRejected" in result.stdout + result.stderr


def _keys(firing: tuple) -> set[tuple]:
    return {(tuple(sorted(f.labels.items())), f.value_text) for f in firing}


@pytest.mark.parametrize("name", [alert.name for alert in ALERTS])
def test_every_alert_has_fire_resolve_and_silent_cases(name: str) -> None:
    fires = resolves = silent = False
    for case in CASES[name]:
        checks = [check for check in case.checks if check.alert == name]
        fires |= any(check.firing for check in checks)
        silent |= bool(checks) and not any(check.firing for check in checks)
        for earlier, later in itertools.pairwise(checks):
            resolves |= _keys(later.firing) < _keys(earlier.firing)
    assert fires, f"{name}: no case where it fires"
    assert resolves, f"{name}: no case where it resolves after firing"
    assert silent, f"{name}: no idle or healthy case that stays silent"


def test_every_recording_rule_is_unit_tested() -> None:
    tested = {record[0] for case in RECORDING_CASES for record in case.records}
    assert tested == {rule.record for rule in RECORDING_RULES}


def _rules_by_name(document: dict) -> dict[str, dict]:
    return {
        rule.get("alert") or rule["record"]: rule
        for group in document["groups"]
        for rule in group["rules"]
    }


def test_overrides_disable_change_threshold_and_for(promtool: str, tmp_path: Path) -> None:
    document = render_rules(
        {
            "SpecDecodeQueueBacklog": {"enabled": False},
            "SpecDecodeBelowBaseline": {"for": "30m", "thresholds": {"tolerance": 0.9}},
            "SpecServeExporterDown": {"thresholds": {"job": "kube-.*-specserve"}},
            "SpecServeNoDecodeLines": {"thresholds": {"match_on": "namespace, pod"}},
        },
        runbook_base_url="https://runbooks.example.org/specserve/",
    )
    rules = _rules_by_name(document)
    assert "SpecDecodeQueueBacklog" not in rules
    below = rules["SpecDecodeBelowBaseline"]
    assert below["expr"].endswith("< 0.9")
    assert below["for"] == "30m"
    assert "0.9 times the baseline" in below["annotations"]["description"]
    assert below["annotations"]["runbook_url"] == (
        "https://runbooks.example.org/specserve/spec-decode-below-baseline.md"
    )
    assert 'up{job=~"kube-.*-specserve"}' in rules["SpecServeExporterDown"]["expr"]
    assert "on (namespace, pod)" in rules["SpecServeNoDecodeLines"]["expr"]
    path = tmp_path / "rules.yml"
    path.write_text(dump_yaml(document))
    result = run(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS) - 1 + len(RECORDING_RULES)} rules found" in result.stdout


def test_default_render_equals_committed_file() -> None:
    assert yaml.safe_load(RULES.read_text()) == render_rules()


def test_every_alert_carries_the_required_annotations() -> None:
    for rule in _rules_by_name(render_rules()).values():
        if "alert" not in rule:
            continue
        assert rule["labels"]["severity"] in {"critical", "warning"}
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}
        assert "{{ $" in rule["annotations"]["description"]
        assert "[[" not in rule["expr"] + rule["annotations"]["description"]
    assert _rules_by_name(render_rules())["SpecDecodeDraftsRejected"]["labels"]["severity"] == (
        "critical"
    )
