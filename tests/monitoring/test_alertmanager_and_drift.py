"""The Alertmanager example under the real amtool; alerts' runbooks and docs entries.

Drift of every generated file is tests/test_generated.py."""

from __future__ import annotations

import pytest

from specserve.monitoring.rules import ALERTS

from .conftest import MONITORING, REPO, run

CONFIG = MONITORING / "alertmanager" / "alertmanager.yml"


def test_amtool_accepts_the_example(amtool: str) -> None:
    result = run(amtool, "check-config", str(CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 receivers" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["service=specserve", "severity=critical", "alertname=SpecDecodeDraftsRejected"],
         "specserve-critical"),
        (["service=specserve", "severity=warning", "alertname=SpecDecodeBelowBaseline"],
         "specserve-warning"),
        (["severity=critical", "alertname=SomethingElse"], "specserve-default"),
    ],
)
def test_routes_by_severity(amtool: str, labels: list[str], receiver: str) -> None:
    result = run(amtool, "config", "routes", "test", "--config.file", str(CONFIG), *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def test_every_alert_has_a_runbook_and_a_docs_entry() -> None:
    alerts_doc = (REPO / "docs" / "alerts.md").read_text()
    for alert in ALERTS:
        runbook = REPO / "docs" / "runbooks" / f"{alert.runbook_slug}.md"
        assert runbook.is_file(), runbook
        text = runbook.read_text()
        for heading in ("## What it means", "## What to check", "## What to do"):
            assert heading in text, f"{runbook.name}: missing {heading!r}"
        assert alert.name in text
        assert f"`{alert.name}`" in alerts_doc
        # The table's Window and For columns say what the rules do.
        window = alert.window or "none"
        assert f"| `{alert.name}` | {alert.severity} | {window} | {alert.for_} |" in alerts_doc
        assert f"runbooks/{alert.runbook_slug}.md" in alerts_doc
        for threshold in alert.thresholds:
            assert f"`{threshold.name}`" in alerts_doc, (alert.name, threshold.name)
