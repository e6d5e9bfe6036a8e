"""Overrides validation and the `specserve rules` command."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specserve.cli import main
from specserve.monitoring.overrides import OverridesError, load_overrides_file, validate_overrides
from specserve.monitoring.rules import render_rules

from .conftest import run


def test_valid_overrides_have_no_problems() -> None:
    assert validate_overrides(
        {
            "SpecDecodeAcceptLengthLow": {"enabled": True, "for": "1h30m",
                                          "thresholds": {"floor": 2}},
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
        ({"SpecDecodeGraphDisabled": {"thresholds": {"x": 1}}}, "this alert has no thresholds"),
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
    assert "instance:specserve_decode_accept_length:mean5m < 1.2" in text
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
