"""The Alertmanager example under the real amtool (and, for the SLO inhibition, the real
Alertmanager fed by amtool); every alert has a runbook.

Drift of every generated file is tests/test_generated.py."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from specserve.monitoring.alertmanager import SLO_PAGE, SLO_TICKET
from specserve.monitoring.rules import ALERTS, ALERTS_BY_NAME

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


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    """Debian's Alertmanager on 127.0.0.1 with the committed example, no cluster listener."""
    binary = shutil.which("prometheus-alertmanager")
    if binary is None:
        pytest.fail("prometheus-alertmanager is required (apt-get install prometheus-alertmanager)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, f"--config.file={CONFIG}", f"--storage.path={tmp_path / 'am-data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
         "--log.level=error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(url + "/-/ready", timeout=1).ok:
                    break
            except requests.ConnectionError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "Alertmanager not up"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


# Burn-rate alerts as Prometheus sends them: the objective in `slo`, the series' labels (a
# replica's keep `instance`; a fleet's drop it, and `pod`, and keep `job`, `namespace`).
_PAGES = (
    {"slo": "ttft", "job": "sglang", "instance": "node1:8000"},  # one replica of fleet sglang
    {"slo": "ttft", "job": "sglang-b"},  # the whole fleet sglang-b
    {"slo": "ttft", "job": "specserve-pods", "namespace": "team-a"},  # a fleet on Kubernetes
)
# Each ticket, and whether a page above silences it.
_TICKETS = (
    ({"slo": "ttft", "job": "sglang", "instance": "node1:8000"}, True),  # same objective, scope
    ({"slo": "itl", "job": "sglang", "instance": "node1:8000"}, False),  # another objective
    ({"slo": "ttft", "job": "sglang"}, False),  # the fleet: only a replica of it pages
    ({"slo": "ttft", "job": "sglang", "instance": "node2:8000"}, False),  # another replica
    ({"slo": "ttft", "job": "sglang-b"}, True),  # the paging fleet's own ticket
    ({"slo": "ttft", "job": "sglang-b", "instance": "node1:8000"}, False),  # a replica of it
    ({"slo": "availability", "job": "specserve-router"}, False),  # the router's objective
    ({"slo": "ttft", "job": "specserve-pods", "namespace": "team-a"}, True),
    ({"slo": "ttft", "job": "specserve-pods", "namespace": "team-b"}, False),  # another release
)


def _labels(alert: str, labels: dict[str, str]) -> list[str]:
    severity = ALERTS_BY_NAME[alert].severity
    return [f"alertname={alert}", f"severity={severity}", "service=specserve",
            *(f"{key}={value}" for key, value in labels.items())]  # fmt: skip


def test_a_page_inhibits_the_ticket_of_its_objective_and_scope_only(
    amtool: str, alertmanager: str
) -> None:
    url = f"--alertmanager.url={alertmanager}"
    sent = [*((SLO_PAGE, p) for p in _PAGES), *((SLO_TICKET, t) for t, _ in _TICKETS)]
    for alert, labels in sent:
        added = run(amtool, "alert", "add", url, *_labels(alert, labels))
        assert added.returncode == 0, added.stdout + added.stderr

    def tickets(state: str) -> list[dict[str, str]]:
        found = run(amtool, "alert", "query", url, f"--{state}", "-o", "json",
                    f"alertname={SLO_TICKET}")  # fmt: skip
        assert found.returncode == 0, found.stdout + found.stderr
        return [{k: v for k, v in a["labels"].items() if k not in ("alertname", "severity",
                                                                       "service")}
                for a in json.loads(found.stdout)]  # fmt: skip

    def key(labels: dict[str, str]) -> str:
        return json.dumps(labels, sort_keys=True)

    silenced = sorted(key(t) for t, inhibited in _TICKETS if inhibited)
    deadline = time.monotonic() + 15
    while sorted(map(key, tickets("inhibited"))) != silenced and time.monotonic() < deadline:
        time.sleep(0.3)
    assert sorted(map(key, tickets("inhibited"))) == silenced
    assert sorted(map(key, tickets("active"))) == sorted(
        key(t) for t, inhibited in _TICKETS if not inhibited)
    # Pages are never inhibited by tickets: every page stays active.
    pages = run(amtool, "alert", "query", url, "--active", "-o", "json", f"alertname={SLO_PAGE}")
    assert len(json.loads(pages.stdout)) == len(_PAGES), pages.stdout
