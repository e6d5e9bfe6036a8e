"""The Prometheus rules, checked and unit-tested by the real promtool."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
import yaml

from specserve.monitoring.expansion import families_in
from specserve.monitoring.prometheus import SLO_GROUP, render_rules
from specserve.monitoring.rules import ALERTS, RECORDING_RULES, RECORDING_WINDOW
from specserve.monitoring.yamlio import dump_yaml

from .conftest import MONITORING, PROMTOOL_TESTS_TIMEOUT, run
from .promtool_cases import (
    CASES,
    OPT_IN_DIR,
    OPT_IN_OVERRIDES,
    RECORDING_CASES,
    WINDOW_OVERRIDE_DIR,
    WINDOW_OVERRIDE_RULE_FILE,
    promtool_test_files,
)

RULES = MONITORING / "prometheus" / "specserve-rules.yml"


def _record_count(document: dict) -> int:
    return len(document["groups"][0]["rules"])


def _slo_record_count(document: dict) -> int:
    """The SLO group's records (specserve.monitoring.slo), last in the file."""
    return sum(len(g["rules"]) for g in document["groups"] if g["name"] == SLO_GROUP)


# The alerts a default rule file holds: the opt-in ones (fixed latency thresholds) are off.
_DEFAULT_ALERTS = sum(alert.enabled_by_default for alert in ALERTS)


def test_committed_rules_pass_promtool_check(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    # Each family at 5m, plus SpecDecodeDraftsRejected's 2m accept-length means (native and
    # log-derived) and verify calls per request (whether the native mean is read), and
    # SpecDecodeGraphMisses' 10m share of decode lines off the graphs.
    assert _record_count(render_rules()) == len(RECORDING_RULES) + 4
    expected = _DEFAULT_ALERTS + len(RECORDING_RULES) + 4 + _slo_record_count(render_rules())
    assert f"SUCCESS: {expected} rules found" in result.stdout


def test_promtool_unit_tests_pass(promtool: str, promtool_tests: Path) -> None:
    files = sorted(promtool_tests.glob("*.yml"))
    assert len(files) == len(promtool_test_files())
    result = run(promtool, "test", "rules", *[f.name for f in files], cwd=promtool_tests,
                 timeout=PROMTOOL_TESTS_TIMEOUT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files)


def test_a_broken_threshold_makes_the_unit_tests_fail(
    promtool: str, promtool_tests: Path, tmp_path: Path
) -> None:
    # The unit tests must catch a wrong rule, not just pass on any rule.
    broken = RULES.read_text().replace("< 1.05", "< 0.5")
    assert broken != RULES.read_text()
    (tmp_path / "specserve-rules.yml").write_text(broken)
    (tmp_path / "tests").mkdir()
    test_file = tmp_path / "tests" / "spec-decode-drafts-rejected.yml"
    test_file.write_text((promtool_tests / test_file.name).read_text())
    result = run(promtool, "test", "rules", test_file.name, cwd=tmp_path / "tests")
    assert result.returncode != 0
    assert "SpecDecodeDraftsRejected" in result.stdout + result.stderr


# Each piece of the native accept length that short replies need, taken out of the committed
# rule file, fails the scenario written for it (promtool names the failing group).
_SHORT_REPLY_GUARDS = [
    pytest.param(
        "    - sum without (is_streaming, priority, workload_class) "
        "(rate(sglang:num_requests_total[2m]))\n",
        "    - 0 * sum without (is_streaming, priority, workload_class) "
        "(rate(sglang:num_requests_total[2m]))\n",
        "spec-decode-drafts-rejected.yml", "8-token replies, every draft rejected: 7 verify",
        id="prefill-token",
    ),
    pytest.param(
        "max without (tp_rank, pp_rank, moe_ep_rank, priority) "
        "(rate(sglang:num_retracted_requests_total[2m]))",
        "sum without (tp_rank, pp_rank, moe_ep_rank, priority) "
        "(rate(sglang:num_retracted_requests_total[2m]))",
        "spec-decode-drafts-rejected.yml", "8-token replies, every draft rejected, 30 retractions",
        id="retraction-per-rank",
    ),
    pytest.param(
        "ratio_rate2m >= 4)", "ratio_rate2m >= 0)",
        "spec-decode-drafts-rejected.yml", "healthy 2-token replies", id="verify-per-request",
    ),
    pytest.param(
        "- clamp_max(\n            instance:sglang_spec_accept_length_max:ratio_rate5m",
        "- clamp_max(\n            instance:sglang_spec_accept_length:ratio_rate5m",
        "spec-serve-accept-length-mismatch.yml", "healthy 8-token replies at 3.00 a pass, 4",
        id="trimmed-drafts-band",
    ),
]


@pytest.mark.parametrize(("good", "bad", "test_name", "group"), _SHORT_REPLY_GUARDS)
def test_each_short_reply_guard_is_load_bearing(
    promtool: str, promtool_tests: Path, tmp_path: Path, good: str, bad: str, test_name: str,
    group: str,
) -> None:
    text = RULES.read_text()
    assert good in text, f"the committed rule file no longer holds {good!r}"
    (tmp_path / "specserve-rules.yml").write_text(text.replace(good, bad))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / test_name).write_text((promtool_tests / test_name).read_text())
    result = run(promtool, "test", "rules", test_name, cwd=tmp_path / "tests")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"name: {group}" in output.split("FAILED:", 1)[-1], output

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
    # A record read to 3 decimals (promtool_cases._rounded) is tested too.
    tested = {
        re.sub(r"^round\((.+), 0\.001\)$", r"\1", record[0])
        for case in RECORDING_CASES
        for record in case.records
    }
    assert tested == {r["record"] for r in render_rules()["groups"][0]["rules"]}


def test_opt_in_alerts_pass_their_promtool_tests_when_enabled(
    promtool: str, promtool_tests: Path
) -> None:
    opt_in = promtool_tests / OPT_IN_DIR
    tests = sorted(t.name for t in opt_in.glob("*.yml") if t.name != "specserve-rules.yml")
    assert len(tests) == len(OPT_IN_OVERRIDES) == 2
    result = run(promtool, "test", "rules", *tests, cwd=opt_in)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(tests)
    # Off by default: the committed rule file does not hold them.
    assert not set(OPT_IN_OVERRIDES) & set(_rules_by_name(render_rules()))


def test_window_override_promtool_tests_pass(promtool: str, promtool_tests: Path) -> None:
    window_tests = promtool_tests / WINDOW_OVERRIDE_DIR
    tests = sorted(window_tests.glob("drafts-rejected-*.yml"))
    assert tests
    result = run(promtool, "test", "rules", *[t.name for t in tests], cwd=window_tests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(tests)
    rules = yaml.safe_load((window_tests / WINDOW_OVERRIDE_RULE_FILE).read_text())
    overrides = yaml.safe_load((window_tests / "overrides.yml").read_text())["alerts"]
    assert rules == render_rules(overrides)


@pytest.mark.parametrize("window", ["2m", "5m"])
def test_the_window_override_tests_fail_at_other_windows(
    promtool: str, promtool_tests: Path, tmp_path: Path, window: str
) -> None:
    # They pin the 1m window: the same scenario must fail on rules rendered at another window.
    rules = render_rules({"SpecDecodeDraftsRejected": {"window": window}})
    (tmp_path / WINDOW_OVERRIDE_RULE_FILE).write_text(dump_yaml(rules))
    test = next((promtool_tests / WINDOW_OVERRIDE_DIR).glob("drafts-rejected-*.yml"))
    (tmp_path / test.name).write_text(test.read_text())
    result = run(promtool, "test", "rules", test.name, cwd=tmp_path)
    assert result.returncode != 0
    assert "time: 13m15s" in result.stdout + result.stderr


def test_the_default_drafts_rejected_window_fires_promptly(
    promtool: str, promtool_tests: Path, tmp_path: Path
) -> None:
    # The committed test fires by 25m after a switch at 20m (2m window + 2m for, plus one
    # evaluation for promtool's group order); at the old 5m
    # window the same check fails.
    rules = render_rules({"SpecDecodeDraftsRejected": {"window": "5m"}})
    (tmp_path / "specserve-rules.yml").write_text(dump_yaml(rules))
    (tmp_path / "tests").mkdir()
    source = yaml.safe_load((promtool_tests / "spec-decode-drafts-rejected.yml").read_text())
    source["tests"] = [t for t in source["tests"] if "healthy 2.20 for 20m" in t["name"]]
    assert len(source["tests"]) == 1
    for check in source["tests"][0]["alert_rule_test"]:
        for alert in check["exp_alerts"]:
            alert["exp_annotations"]["description"] = alert["exp_annotations"][
                "description"
            ].replace("over 2m", "over 5m")
    (tmp_path / "tests" / "t.yml").write_text(dump_yaml(source))
    result = run(promtool, "test", "rules", "t.yml", cwd=tmp_path / "tests")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "time: 25m" in output and "got:[]" in output


def test_recording_windows_follow_enabled_alerts() -> None:
    def records(overrides: dict) -> set[str]:
        return {r["record"] for r in render_rules(overrides)["groups"][0]["rules"]}

    defaults = records({})
    for rule in RECORDING_RULES:
        assert rule.record(RECORDING_WINDOW) in defaults
    # A disabled alert's window is not recorded; the documented window always is.
    assert "instance:specserve_decode_accept_length:mean2m" not in records(
        {"SpecDecodeDraftsRejected": {"enabled": False}}
    )
    # A family a windowed alert needs only indirectly (the speedup ratio's throughput mean)
    # is recorded at that window too.
    below = records({"SpecDecodeBelowBaseline": {"window": "3m"}})
    assert {f + "3m" for f in families_in(ALERTS[0].value_expr)} <= below
    assert len(families_in(ALERTS[0].value_expr)) == 2


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
    expected = _DEFAULT_ALERTS - 1 + _record_count(document) + _slo_record_count(document)
    assert f"SUCCESS: {expected} rules found" in result.stdout


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
