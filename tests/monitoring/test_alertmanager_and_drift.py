"""The Alertmanager example under the real amtool; every alert has a runbook.

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
        # The SLO burn rates (docs/slo.md): the fast burn pages, the slow one is a ticket.
        (["service=specserve", "severity=critical", "alertname=SpecServeErrorBudgetBurn",
          "slo=ttft"], "specserve-critical"),
        (["service=specserve", "severity=warning", "alertname=SpecServeErrorBudgetBurnSlow",
          "slo=availability"], "specserve-warning"),
    ],
)
def test_routes_by_severity(amtool: str, labels: list[str], receiver: str) -> None:
    name = next(label.split("=", 1)[1] for label in labels if label.startswith("alertname="))
    if name.startswith("SpecServeErrorBudget"):
        # Routed by the severity the catalogue gives it, not one written here.
        severity = next(a.severity for a in ALERTS if a.name == name)
        assert f"severity={severity}" in labels
    result = run(amtool, "config", "routes", "test", "--config.file", str(CONFIG), *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def test_every_alert_has_a_runbook() -> None:
    # docs/alerts.md's table is generated from the same catalogue (tests/test_generated.py).
    for alert in ALERTS:
        runbook = REPO / "docs" / "runbooks" / f"{alert.runbook_slug}.md"
        assert runbook.is_file(), runbook
        text = runbook.read_text()
        for heading in ("## What it means", "## What to check", "## What to do"):
            assert heading in text, f"{runbook.name}: missing {heading!r}"
        assert alert.name in text
        assert alert.meaning.strip(), f"{alert.name} has no meaning for docs/alerts.md"
        for threshold in alert.thresholds:
            assert threshold.help.strip(), (alert.name, threshold.name)
