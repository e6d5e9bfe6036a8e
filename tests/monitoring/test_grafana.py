"""Grafana dashboard and provisioning files against Grafana's documented contracts.

Checks follow Grafana's provisioning readers (pkg/services/provisioning/alerting: AlertingFileV1,
AlertRuleGroupV1, AlertRuleV1, QueryV1, ContactPointV1, NotificiationPolicyV1) and the dashboard
JSON model; every PromQL string is parsed by the real promtool.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.monitoring.dashboard import (
    DATASOURCE_VARIABLE,
    build_dashboard,
    dashboard_json,
    iter_panels,
)
from specserve.monitoring.expansion import default_settings
from specserve.monitoring.grafana_alerting import DATASOURCE_UID_REF, grafana_alert_rules
from specserve.monitoring.overrides import is_duration
from specserve.monitoring.prometheus import render_rules
from specserve.monitoring.rules import ALERTS
from specserve.monitoring.yamlio import dump_yaml

from .conftest import MONITORING, run
from .expressions import all_promql_expressions

GRAFANA = MONITORING / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "specserve.json"
ALERT_FILE = GRAFANA / "provisioning" / "alerting" / "specserve-alerts.yml"
SHORT_UID = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")  # Grafana util.IsValidShortUID + MaxUIDLength
DS_REF = "${" + DATASOURCE_VARIABLE + "}"


def _panels() -> list[dict[str, Any]]:
    return [p for p in iter_panels(json.loads(DASHBOARD.read_text())) if p["type"] != "row"]


def test_committed_dashboard_matches_the_source() -> None:
    assert DASHBOARD.read_text() == dashboard_json()


def test_datasource_variable_is_a_prometheus_picker() -> None:
    variables = {v["name"]: v for v in build_dashboard()["templating"]["list"]}
    assert variables[DATASOURCE_VARIABLE]["type"] == "datasource"
    assert variables[DATASOURCE_VARIABLE]["query"] == "prometheus"


@pytest.mark.parametrize("panel", _panels(), ids=lambda p: p["title"])
def test_every_panel_has_a_unit_and_queries_the_variable(panel: dict[str, Any]) -> None:
    assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
    assert panel["datasource"] == {"type": "prometheus", "uid": DS_REF}
    assert panel["targets"]
    for target in panel["targets"]:
        assert target["datasource"] == {"type": "prometheus", "uid": DS_REF}
        assert target["refId"] and target["expr"]


def test_no_hard_coded_datasource_uid_anywhere() -> None:
    def walk(node: Any) -> list[str]:
        found: list[str] = []
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "datasource" and isinstance(value, dict):
                    found.append(value.get("uid", ""))
                found.extend(walk(value))
        elif isinstance(node, list):
            for item in node:
                found.extend(walk(item))
        return found

    uids = walk(json.loads(DASHBOARD.read_text()))
    assert uids and set(uids) == {DS_REF}
    alert_uids = {q["datasourceUid"] for g in grafana_alert_rules()["groups"]
                  for r in g["rules"] for q in r["data"]}
    assert alert_uids == {DATASOURCE_UID_REF, "__expr__"}


def test_panel_ids_are_unique_and_layout_fits_24_columns() -> None:
    panels = list(iter_panels(build_dashboard()))
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def test_native_sglang_and_dcgm_panels_exist() -> None:
    exprs = " ".join(t["expr"] for p in _panels() for t in p["targets"])
    for metric in ("sglang:time_to_first_token_seconds_bucket",
                   "sglang:inter_token_latency_seconds_bucket",
                   "sglang:e2e_request_latency_seconds_bucket",
                   "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
                   "specserve_decode_accept_length_bucket",
                   "specserve_baseline_gen_throughput_tokens_per_second",
                   "specserve_decode_graph_enabled", "specserve_source_up"):
        assert metric in exprs, metric


def test_every_query_parses_with_promtool(promtool: str, tmp_path: Path) -> None:
    # promtool parses each expression as a recording rule's expr: a syntax error fails the check.
    expressions = all_promql_expressions()
    assert len(expressions) > len(ALERTS) + 20
    rules = [{"record": f"check:expr_{i}:promtool", "expr": expr}
             for i, (_, expr) in enumerate(expressions)]
    path = tmp_path / "queries.yml"
    path.write_text(dump_yaml({"groups": [{"name": "queries", "rules": rules}]}))
    result = run(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert all("$" not in expr for _, expr in expressions)


# --- Grafana alert provisioning ------------------------------------------------------------

_FILE_KEYS = {"apiVersion", "groups", "deleteRules", "contactPoints", "deleteContactPoints",
              "policies", "resetPolicies", "templates", "deleteTemplates", "muteTimes",
              "deleteMuteTimes"}
_GROUP_KEYS = {"orgId", "name", "folder", "interval", "rules"}
_RULE_KEYS = {"uid", "title", "condition", "data", "dashboardUid", "panelId", "noDataState",
              "execErrState", "for", "keepFiringFor", "annotations", "labels", "isPaused",
              "notification_settings", "record", "missing_series_evals_to_resolve"}
_QUERY_KEYS = {"refId", "queryType", "relativeTimeRange", "datasourceUid", "model"}


def check_alert_file(document: dict[str, Any]) -> None:
    assert document["apiVersion"] == 1
    assert set(document) <= _FILE_KEYS
    for group in document["groups"]:
        assert set(group) <= _GROUP_KEYS
        assert group["name"].strip() and group["folder"].strip()
        assert is_duration(group["interval"])
        uids = [rule["uid"] for rule in group["rules"]]
        assert len(set(uids)) == len(uids)
        for rule in group["rules"]:
            assert set(rule) <= _RULE_KEYS, set(rule) - _RULE_KEYS
            assert SHORT_UID.match(rule["uid"]), rule["uid"]
            assert rule["title"] and rule["data"]
            assert rule["noDataState"] in {"NoData", "Alerting", "OK"}
            assert rule["execErrState"] in {"Error", "Alerting", "OK"}
            assert is_duration(rule["for"])
            texts = {**rule["annotations"], **rule["labels"]}.values()
            assert all(isinstance(value, str) for value in texts)
            refs = {query["refId"] for query in rule["data"]}
            assert rule["condition"] in refs
            for query in rule["data"]:
                assert set(query) <= _QUERY_KEYS
                assert set(query["relativeTimeRange"]) == {"from", "to"}
                assert query["model"]["refId"] == query["refId"]
                if query["datasourceUid"] == "__expr__":
                    model = query["model"]
                    assert model["type"] in {"reduce", "threshold", "math", "classic_conditions"}
                    assert model["expression"] in refs
                    if model["type"] == "threshold":
                        evaluator = model["conditions"][0]["evaluator"]
                        assert evaluator["type"] in {"gt", "lt"}
                        assert len(evaluator["params"]) == 1
                else:
                    assert query["model"]["expr"] and query["model"]["instant"] is True


def test_committed_alert_file_matches_source_and_schema() -> None:
    document = yaml.safe_load(ALERT_FILE.read_text())
    assert document == grafana_alert_rules()
    check_alert_file(document)


# Every alert switched on: the opt-in ones (off by default) must be equivalent too.
_ALL_ON = {alert.name: {"enabled": True} for alert in ALERTS}


_BURN = ("SpecServeErrorBudgetBurn", "SpecServeErrorBudgetBurnSlow")


def _titles(document: dict[str, Any]) -> list[str]:
    return [r["title"] for r in document["groups"][0]["rules"]]


def test_grafana_has_every_alert_the_slo_burn_rates_included() -> None:
    assert sorted(_titles(grafana_alert_rules(_ALL_ON))) == sorted(a.name for a in ALERTS)
    assert {a.name for a in ALERTS if a.needs_slo_records} == set(_BURN)
    # The committed file: every alert on by default, both burn rates among them.
    committed = _titles(yaml.safe_load(ALERT_FILE.read_text()))
    assert sorted(committed) == sorted(a.name for a in ALERTS if a.enabled_by_default)
    assert set(_BURN) <= set(committed)


def test_grafana_burn_rules_follow_the_slo_settings() -> None:
    def queries(slos: dict[str, Any]) -> dict[str, str]:
        return {r["title"]: r["data"][0]["model"]["expr"]
                for r in grafana_alert_rules(slos=slos)["groups"][0]["rules"]
                if r["title"] in _BURN}  # fmt: skip

    default = queries({})
    for expr in default.values():
        for name in ("ttft", "itl", "availability"):
            assert f'"slo", "{name}", "", ""' in expr
        assert '{le=~"2(\\\\.0)?"}' in expr and "/ (1 - 0.95)" in expr
    # Only the ticket leaves out what pages (Grafana has no inhibition).
    assert "\n  unless\n" in default["SpecServeErrorBudgetBurnSlow"]
    assert "unless" not in default["SpecServeErrorBudgetBurn"]
    # The ticket's pairs read 3d and 6h, the page's 1h, 5m, 6h and 30m.
    assert "[3d]" in default["SpecServeErrorBudgetBurnSlow"]
    assert "[3d]" not in default["SpecServeErrorBudgetBurn"]
    # The settings of the rule file's `slos:`: threshold, target; a disabled objective is left
    # out as the rule file leaves out its records.
    changed = queries({"ttft": {"threshold_seconds": 4, "target": 0.99},
                       "availability": {"enabled": False}})  # fmt: skip
    for expr in changed.values():
        assert '{le=~"4(\\\\.0)?"}' in expr and "/ (1 - 0.99)" in expr
        assert "smg_router" not in expr and '"availability"' not in expr
    # Every objective off: nothing to read, no rule (the rule file's alert can never fire).
    off = {name: {"enabled": False} for name in ("ttft", "itl", "availability")}
    assert queries(off) == {}
    assert set(_BURN).isdisjoint(_titles(grafana_alert_rules(slos=off)))


@pytest.mark.parametrize("alert", ALERTS, ids=lambda a: a.name)
def test_grafana_rule_is_equivalent_to_the_prometheus_rule(alert: Any) -> None:
    prom = {
        r["alert"]: r for g in render_rules(_ALL_ON)["groups"] for r in g["rules"] if "alert" in r
    }
    grafana = {r["title"]: r for r in grafana_alert_rules(_ALL_ON)["groups"][0]["rules"]}
    ours, theirs = grafana[alert.name], prom[alert.name]
    assert ours["for"] == theirs["for"]
    assert ours["labels"] == theirs["labels"]
    assert ours["annotations"]["runbook_url"] == theirs["annotations"]["runbook_url"]
    threshold = ours["data"][2]["model"]["conditions"][0]["evaluator"]
    assert theirs["expr"].endswith(f"{alert.comparison} {threshold['params'][0]:g}")
    assert threshold["type"] == {"<": "lt", ">": "gt"}[alert.comparison]
    # Grafana may run without the recording rules: its query must not name any.
    expr = ours["data"][0]["model"]["expr"]
    assert not re.search(r"\b(instance(_concurrency)?|(fleet_)?slo):", expr)
    assert "$values.B.Value" in ours["annotations"]["description"] or (
        "$value" not in theirs["annotations"]["description"]
    )
    assert ours["noDataState"] == "OK"  # empty while idle must never alert
    assert default_settings(alert).for_ == ours["for"]


def test_contact_point_and_policy_examples_follow_the_schema() -> None:
    examples = GRAFANA / "examples" / "alerting"
    points = yaml.safe_load((examples / "contact-points.yml").read_text())
    assert points["apiVersion"] == 1
    names = set()
    for point in points["contactPoints"]:
        assert point["name"].strip()
        names.add(point["name"])
        for receiver in point["receivers"]:
            assert SHORT_UID.match(receiver["uid"]) and receiver["type"] and receiver["settings"]
            assert receiver["settings"]["url"].startswith("http://127.0.0.1:")
    policies = yaml.safe_load((examples / "notification-policies.yml").read_text())
    root = policies["policies"][0]
    assert root["receiver"] in names
    for route in root["routes"]:
        assert route["receiver"] in names
        for matcher in route["object_matchers"]:
            assert len(matcher) == 3 and matcher[1] in {"=", "!=", "=~", "!~"}
    severities = {m[2] for r in root["routes"] for m in r["object_matchers"] if m[0] == "severity"}
    assert severities == {a.severity for a in ALERTS}


def test_datasource_and_dashboard_provisioning() -> None:
    provisioning = GRAFANA / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    assert datasources["apiVersion"] == 1
    source = datasources["datasources"][0]
    assert source["type"] == "prometheus" and source["uid"] == DATASOURCE_UID_REF
    providers = yaml.safe_load((provisioning / "dashboards" / "specserve.yml").read_text())
    provider = providers["providers"][0]
    assert provider["type"] == "file" and provider["options"]["path"]


def test_grafana_rules_and_dashboard_follow_a_window_override(
    promtool: str, tmp_path: Path
) -> None:
    overrides = {"SpecDecodeDraftsRejected": {"window": "1m"},
                 "SpecDecodeBelowBaseline": {"window": "10m"}}
    rules = {r["title"]: r for r in grafana_alert_rules(overrides)["groups"][0]["rules"]}
    drafts = rules["SpecDecodeDraftsRejected"]["data"][0]["model"]["expr"]
    assert "rate(specserve_decode_accept_length_sum[1m])" in drafts and "[2m]" not in drafts
    below = rules["SpecDecodeBelowBaseline"]["data"][0]["model"]["expr"]
    assert "_sum[10m]" in below and "[5m]" not in below
    assert "over 1m is" in rules["SpecDecodeDraftsRejected"]["annotations"]["description"]
    # Untouched alerts keep their default window.
    low = rules["SpecDecodeAcceptLengthLow"]["data"][0]["model"]["expr"]
    assert "_sum[5m]" in low
    expressions = all_promql_expressions(overrides)
    joined = "\n".join(expr for _, expr in expressions)
    assert "[10m]" in joined and "[1m]" in joined
    rules_doc = [{"record": f"check:expr_{i}:promtool", "expr": expr}
                 for i, (_, expr) in enumerate(expressions)]  # fmt: skip
    path = tmp_path / "queries.yml"
    path.write_text(dump_yaml({"groups": [{"name": "queries", "rules": rules_doc}]}))
    result = run(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_queries_use_each_alerts_default_window() -> None:
    panels = {p["title"]: p for p in _panels()}
    accept = [t["expr"] for t in panels["Accept length"]["targets"]]
    assert any("accept_length_sum[2m]" in e for e in accept)  # SpecDecodeDraftsRejected
    assert any("accept_length_sum[5m]" in e for e in accept)  # SpecDecodeAcceptLengthLow
    speedup = panels["Speedup over baseline"]["targets"][0]
    assert "_sum[5m]" in speedup["expr"] and "(5m mean)" in speedup["legendFormat"]
