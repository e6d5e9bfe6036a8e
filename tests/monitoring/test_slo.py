"""The SLO settings (specserve.monitoring.slo, validated by overrides): every problem reported
at once, the settings shaping the rule file's SLO group, and the chart rendering the same group
from `prometheusRule.slos` as `specserve rules render` does from an overrides file's `slos:`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.cli import main
from specserve.monitoring.overrides import OverridesError, validate_slos
from specserve.monitoring.prometheus import SLO_GROUP, render_rules
from specserve.monitoring.slo import BURN_RATES, OBJECTIVES, SLO_WINDOWS

from .conftest import run
from .test_helm_template import chart, helm_render  # noqa: F401 (the chart fixture)

REPO = Path(__file__).resolve().parents[2]


def _slo_group(document: dict[str, Any]) -> list[dict[str, Any]]:
    groups = [g for g in document["groups"] if g["name"] == SLO_GROUP]
    return groups[0]["rules"] if groups else []


def _expr(document: dict[str, Any], record: str, slo: str) -> str:
    (rule,) = [r for r in _slo_group(document)
               if r["record"] == record and r["labels"] == {"slo": slo}]
    return str(rule["expr"])


def test_every_problem_is_reported_at_once() -> None:
    problems = validate_slos({
        "ttft": {"target": 1.0, "threshold_seconds": 1.5, "perod": "30d"},
        "availability": {"threshold_seconds": 2, "period": "1h", "enabled": "yes"},
        "latency": {},
    })  # fmt: skip
    text = "\n".join(problems)
    assert len(problems) == 7, text
    assert "slos.ttft.target: expected a share strictly between 0 and 1" in text
    # A threshold between bounds could only be interpolated: refused, with the bounds to use.
    assert "slos.ttft.threshold_seconds: 1.5 is not a bound" in text and "1, 2, 4" in text
    assert "unknown key 'perod'; did you mean 'period'?" in text
    # Availability has no latency threshold; an alert window is no SLO period.
    assert "slos.availability: unknown key 'threshold_seconds'" in text
    assert "slos.availability.period: '1h' is not a Prometheus duration above zero other" in text
    assert "slos.availability.enabled: expected true or false" in text
    assert "unknown objective 'latency'" in text
    assert validate_slos({"ttft": {"target": 0.99, "threshold_seconds": 4, "period": "30d"}}) == []


def test_defaults_record_every_window_per_replica_and_fleet() -> None:
    records = {(r["record"], r["labels"]["slo"]) for r in _slo_group(render_rules())}
    for objective in OBJECTIVES:
        for window in (*SLO_WINDOWS, objective.period):
            assert (f"fleet_slo:sli_error:ratio_rate{window}", objective.name) in records
            # The router does not say which worker answered: availability is fleet only.
            per_replica = (f"slo:sli_error:ratio_rate{window}", objective.name) in records
            assert per_replica == (objective.histogram is not None), (objective.name, window)
    # Every window a burn-rate pair reads is recorded.
    assert {w for rate in BURN_RATES for w in (rate.long, rate.short)} <= set(SLO_WINDOWS)
    ttft = _expr(render_rules(), "slo:sli_error:ratio_rate5m", "ttft")
    assert 'time_to_first_token_seconds_bucket{le=~"2(\\\\.0)?"}[5m]' in ttft
    assert _expr(render_rules(), "slo:error_budget:ratio", "availability") == "vector(1 - 0.99)"


def test_settings_change_the_threshold_target_period_and_switch_objectives_off() -> None:
    document = render_rules(slos={
        "ttft": {"threshold_seconds": 4, "target": 0.99, "period": "30d"},
        "availability": {"enabled": False},
    })  # fmt: skip
    assert 'le=~"4(\\\\.0)?"' in _expr(document, "slo:sli_error:ratio_rate1h", "ttft")
    assert _expr(document, "slo:error_budget:ratio", "ttft") == "vector(1 - 0.99)"
    assert "[30d]" in _expr(document, "fleet_slo:sli_error:ratio_rate30d", "ttft")
    assert "ratio_rate30d" in _expr(document, "slo:error_budget_remaining:ratio", "ttft")
    assert {r["labels"]["slo"] for r in _slo_group(document)} == {"ttft", "itl"}
    with pytest.raises(OverridesError, match=r"slos\.itl\.threshold_seconds"):
        render_rules(slos={"itl": {"threshold_seconds": 0.05}})


def test_cli_reads_slos_beside_alerts(promtool: str, tmp_path: Path) -> None:
    overrides = tmp_path / "overrides.yml"
    overrides.write_text(yaml.safe_dump({"slos": {"itl": {"threshold_seconds": 0.2}}}))
    out = tmp_path / "rules.yml"
    assert main(["rules", "render", "--overrides", str(overrides), "--out", str(out)]) == 0
    document = yaml.safe_load(out.read_text())
    assert 'le=~"0.2(\\\\.0)?"' in _expr(document, "slo:sli_error:ratio_rate6h", "itl")
    result = run(promtool, "check", "rules", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    overrides.write_text(yaml.safe_dump({"slos": {"itl": {"target": 95}}}))
    assert main(["rules", "render", "--overrides", str(overrides), "--out", str(out)]) == 2


def test_chart_values_render_the_same_slo_group(
    helm: str, chart: Path, tmp_path: Path  # noqa: F811 (the chart fixture)
) -> None:
    values = {"prometheusRule": {"slos": {
        "ttft": {"threshold_seconds": 4, "target": 0.99, "period": "30d"},
        "itl": {"disabled": True},
    }}}  # fmt: skip
    rendered = helm_render(helm, chart, values, tmp_path)
    expected = render_rules(
        runbook_base_url=rendered["groups"][1]["rules"][0]["annotations"]["runbook_url"]
        .rsplit("/", 1)[0],
        slos={"ttft": {"threshold_seconds": 4, "target": 0.99, "period": "30d"},
              "itl": {"enabled": False}},
    )  # fmt: skip
    assert rendered == expected


def test_chart_schema_refuses_what_the_cli_refuses() -> None:
    import jsonschema

    schema = json.loads((REPO / "charts/specserve/values.schema.json").read_text())
    slos = schema["properties"]["prometheusRule"]["properties"]["slos"]
    defs = {"$defs": schema["$defs"]}
    ok = {"ttft": {"threshold_seconds": 4, "target": 0.99, "period": "30d"}}
    jsonschema.validate(ok, {**slos, **defs})
    for bad in ({"ttft": {"threshold_seconds": 1.5}}, {"ttft": {"target": 1}},
                {"availability": {"threshold_seconds": 2}}, {"itl": {"period": "1h"}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, {**slos, **defs})
        # The same values as an overrides file's slos: refused there too.
        assert validate_slos(bad)
