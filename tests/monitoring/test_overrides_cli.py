"""Overrides validation and the `specserve rules` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specserve.cli import main
from specserve.monitoring.overrides import OverridesError, load_overrides_file, validate_overrides
from specserve.monitoring.prometheus import render_rules

from .conftest import run
from .promtool_cases import DRAFTS_REJECTED_EXPR_1M


def test_valid_overrides_have_no_problems() -> None:
    assert validate_overrides(
        {
            "SpecDecodeAcceptLengthLow": {"enabled": True, "for": "1h30m", "window": "90s",
                                          "thresholds": {"floor": 2}},
            "SpecDecodeDraftsRejected": {"window": "1m"},
            "SpecServeNoDecodeLines": {"thresholds": {"running_metric": "my:running",
                                                      "match_on": ""}},
        }
    ) == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"SpecDecodeDraftRejected": {}}, "did you mean 'SpecDecodeDraftsRejected'"),
        ({"SpecDecodeBelowBaseline": {"thresholds": {"tolerence": 1}}},
         "unknown threshold 'tolerence'; did you mean 'tolerance'"),
        ({"SpecServeLogSourceDown": {"thresholds": {"x": 1}}}, "this alert has no thresholds"),
        ({"SpecDecodeBelowBaseline": {"for": "5 min"}}, "is not a Prometheus duration"),
        ({"SpecDecodeBelowBaseline": {"enabled": "no"}}, "expected true or false"),
        ({"SpecDecodeBelowBaseline": {"thresholds": {"tolerance": "high"}}},
         "expected a number"),
        ({"SpecDecodeKVCacheNearFull": {"thresholds": {"max_ratio": 1.5}}},
         "above the maximum 1"),
        ({"SpecServeExporterDown": {"thresholds": {"job": 'a"b'}}}, "without double quotes"),
        ({"SpecServeExporterDown": {"thresholds": {"job": "a(b"}}},
         "not a valid regular expression"),
        ({"SpecServeNoDecodeLines": {"thresholds": {"match_on": "pod name"}}},
         "are not label names"),
        ({"SpecServeNoDecodeLines": {"thresholds": {"running_metric": "a-b"}}},
         "is not a metric name"),
        ({"SpecDecodeBelowBaseline": {"disabled": True}}, "unknown key 'disabled'"),
        ({"SpecDecodeBelowBaseline": {"windw": "1m"}}, "did you mean 'window'"),
        ({"SpecDecodeDraftsRejected": {"window": "2 min"}},
         "alerts.SpecDecodeDraftsRejected.window: '2 min' is not a Prometheus duration above zero"),
        ({"SpecDecodeDraftsRejected": {"window": "0m"}}, "is not a Prometheus duration above zero"),
        ({"SpecDecodeDraftsRejected": {"window": 120}}, "is not a Prometheus duration above zero"),
        ({"SpecServeExporterDown": {"window": "1m"}},
         "alerts.SpecServeExporterDown.window: this alert reads its metric directly and has no "
         "rate window; remove the key"),
    ],
)
def test_each_problem_is_named_with_a_fix(overrides: dict, expected: str) -> None:
    problems = validate_overrides(overrides)
    assert any(expected in problem for problem in problems), problems
    with pytest.raises(OverridesError):
        render_rules(overrides)


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "overrides.yml"
    path.write_text(yaml.safe_dump({
        "runbook_url": "x",
        "alerts": {"Nope": {}, "SpecDecodeBelowBaseline": {"for": "soon"}},
    }))
    with pytest.raises(OverridesError) as err:
        load_overrides_file(path)
    assert len(err.value.problems) == 3
    assert "did you mean 'runbook_base_url'" in str(err.value)


def test_cli_render_with_overrides_writes_a_rule_file_promtool_accepts(
    promtool: str, tmp_path: Path
) -> None:
    overrides = tmp_path / "overrides.yml"
    overrides.write_text(yaml.safe_dump({
        "runbook_base_url": "https://example.org/runbooks",
        "alerts": {"SpecDecodeDraftsRejected": {"thresholds": {"max_accept_length": 1.2}},
                   "SpecDecodeQueueBacklog": {"enabled": False}},
    }))
    out = tmp_path / "etc" / "rules.yml"
    assert main(["rules", "render", "--overrides", str(overrides), "--out", str(out)]) == 0
    text = out.read_text()
    alerts = {r["alert"]: r["expr"] for r in yaml.safe_load(text)["groups"][1]["rules"]}
    assert alerts["SpecDecodeDraftsRejected"].endswith(
        "(min_over_time(specserve_speculative_draft_tokens[2m])) < 2)\n"
        # A block drafter's accept length under the verify cap, with its block accept length
        # at the (overridden) threshold, is not rejected drafts.
        "  unless on ()\n"
        "  (\n"
        "    max by () (avg_over_time(specserve_decode_last_block_accept_length[2m])) >= 1.2\n"
        "    or\n"
        "    max by () (avg_over_time(sglang:spec_block_accept_length[2m])) >= 1.2\n"
        "  )"
        "\n)\n< 1.2"
    )
    assert "SpecDecodeQueueBacklog" not in text
    assert "https://example.org/runbooks/spec-decode-drafts-rejected.md" in text
    result = run(promtool, "check", "rules", str(out))
    assert result.returncode == 0, result.stdout + result.stderr


def test_cli_rejects_a_bad_overrides_file_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = tmp_path / "overrides.yml"
    overrides.write_text("alerts:\n  SpecDecodeBelowBaseline:\n    thresholds: {tolerance: -1}\n")
    out = tmp_path / "rules.yml"
    assert main(["rules", "render", "--overrides", str(overrides), "--out", str(out)]) == 2
    assert "alerts.SpecDecodeBelowBaseline.thresholds.tolerance" in capsys.readouterr().err
    assert not out.exists()


def test_cli_reports_a_missing_overrides_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rules", "render", "--overrides", str(tmp_path / "none.yml")]) == 2
    assert "cannot read the file" in capsys.readouterr().err


def test_cli_grafana_alerts_honours_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = tmp_path / "overrides.yml"
    overrides.write_text("alerts:\n  SpecDecodeKVCacheNearFull: {enabled: false}\n")
    assert main(["rules", "grafana-alerts", "--overrides", str(overrides)]) == 0
    document = yaml.safe_load(capsys.readouterr().out)
    titles = [rule["title"] for rule in document["groups"][0]["rules"]]
    assert "SpecDecodeKVCacheNearFull" not in titles
    assert "SpecDecodeDraftsRejected" in titles


def test_cli_grafana_alerts_reads_the_slos_beside_the_alerts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same file's `slos:` shapes the Grafana burn-rate queries as it shapes the rule file.
    overrides = tmp_path / "overrides.yml"
    overrides.write_text(yaml.safe_dump({"slos": {"ttft": {"threshold_seconds": 4},
                                                  "availability": {"enabled": False}}}))
    assert main(["rules", "grafana-alerts", "--overrides", str(overrides)]) == 0
    rules = {r["title"]: r for r in yaml.safe_load(capsys.readouterr().out)["groups"][0]["rules"]}
    for name in ("SpecServeErrorBudgetBurn", "SpecServeErrorBudgetBurnSlow"):
        expr = rules[name]["data"][0]["model"]["expr"]
        assert 'time_to_first_token_seconds_bucket{le=~"4(\\\\.0)?"}' in expr
        assert "smg_router" not in expr and '"slo", "itl", "", ""' in expr
    overrides.write_text(yaml.safe_dump({"slos": {"ttft": {"threshold_seconds": 3}}}))
    assert main(["rules", "grafana-alerts", "--overrides", str(overrides)]) == 2
    assert "slos.ttft.threshold_seconds: 3 is not a bound" in capsys.readouterr().err


def test_cli_render_with_a_window_override(promtool: str, tmp_path: Path) -> None:
    overrides = tmp_path / "overrides.yml"
    overrides.write_text(yaml.safe_dump({"alerts": {
        "SpecDecodeDraftsRejected": {"window": "1m", "for": "30s"},
        "SpecServeLogLinesRejected": {"window": "15m"},
    }}))  # fmt: skip
    out = tmp_path / "rules.yml"
    assert main(["rules", "render", "--overrides", str(overrides), "--out", str(out)]) == 0
    document = yaml.safe_load(out.read_text())
    records = {r["record"]: r["expr"] for r in document["groups"][0]["rules"]}
    alerts = {r["alert"]: r for r in document["groups"][1]["rules"]}
    drafts = alerts["SpecDecodeDraftsRejected"]
    assert drafts["expr"] == DRAFTS_REJECTED_EXPR_1M
    assert drafts["for"] == "30s"
    assert "over 1m is" in drafts["annotations"]["description"]
    assert "rate(specserve_decode_accept_length_sum[1m])" in (
        records["instance:specserve_decode_accept_length:mean1m"]
    )
    # The 2m default is no longer needed by any alert; the documented 5m stays.
    assert "instance:specserve_decode_accept_length:mean2m" not in records
    assert "instance:specserve_decode_accept_length:mean5m" in records
    assert alerts["SpecServeLogLinesRejected"]["expr"].startswith(
        "instance:specserve_log_lines_rejected:ratio_rate15m >"
    )
    assert "[15m]" in records["instance:specserve_log_lines_rejected:ratio_rate15m"]
    result = run(promtool, "check", "rules", str(out))
    assert result.returncode == 0, result.stdout + result.stderr


def test_cli_dashboard_follows_the_overridden_windows_and_thresholds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = tmp_path / "overrides.yml"
    overrides.write_text(yaml.safe_dump({"alerts": {
        "SpecDecodeDraftsRejected": {"window": "1m"},
        "SpecDecodeAcceptLengthLow": {"window": "1m", "thresholds": {"floor": 1.8}},
    }}))  # fmt: skip
    assert main(["rules", "dashboard", "--overrides", str(overrides)]) == 0
    model = json.loads(capsys.readouterr().out)
    panel = next(p for p in model["panels"] if p.get("title") == "Accept length")
    exprs = [t["expr"] for t in panel["targets"]]
    assert any("rate(specserve_decode_accept_length_sum[1m])" in e for e in exprs)
    assert not any("[2m]" in e or "[5m]" in e for e in exprs)
    legends = [t["legendFormat"] for t in panel["targets"]]
    assert "{{instance}} 1m mean (SpecDecodeDraftsRejected, SpecDecodeAcceptLengthLow)" in legends
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, 1.05, 1.8]


def test_cli_dashboard_rejects_bad_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = tmp_path / "overrides.yml"
    overrides.write_text("alerts:\n  SpecDecodeDraftsRejected: {window: 1 m}\n")
    out = tmp_path / "dashboard.json"
    assert main(["rules", "dashboard", "--overrides", str(overrides), "--out", str(out)]) == 2
    assert "alerts.SpecDecodeDraftsRejected.window" in capsys.readouterr().err
    assert not out.exists()
