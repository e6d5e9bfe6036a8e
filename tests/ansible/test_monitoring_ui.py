"""The pages the demo prints work in a real browser; an alert is delivered where a user reads it.

One real `ansible-playbook` run of the shared role and the monitoring role (the stack as
deploy.yml runs it: the local Prometheus and Alertmanager images of the stand-in inventory, the
demo's alert sink) on loopback ports of its own. No exporter runs on the exporter's port, so the
project's SpecServeExporterDown fires for real: its `for` shortened through the rule overrides
the role supports, Alertmanager's group_wait shortened in a copy of the shipped configuration
(same routes and receivers, the webhooks on this test's sink port, each with a bearer token read
from a monitoring_alertmanager_secrets file).

Then headless Chromium (Debian's) loads each browser URL scripts/demo prints, mapped to this
deployment's ports, and the DOM after the pages' scripts ran must hold what only a rendered page
has: the project's rule names on Prometheus' alerts page, the firing alert in Alertmanager's
(an Elm application: empty without its script and the API), and every script and stylesheet the
page links must load. Set SPECSERVE_UI_SCREENSHOTS to a directory to also write a screenshot of
each page there (docs/images/ holds the committed ones).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import _cleanup, new_deployment, require_docker
from .harness import BIN, ROOT, Run, free_port

pytestmark = pytest.mark.docker

ALERT = "SpecServeExporterDown"
TOKEN_NAME = "sink-token"
SHIPPED_WEBHOOK_BASE = "http://127.0.0.1:9095"
DEMO_PORTS = {"prometheus": 9090, "alertmanager": 9093}
RULE_NAMES = [
    rule["alert"]
    for group in yaml.safe_load(
        (ROOT / "monitoring/prometheus/specserve-rules.yml").read_text(encoding="utf-8")
    )["groups"]
    for rule in group["rules"]
    if "alert" in rule
]
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)  # fmt: skip

PLAY = [
    {
        "name": "The monitoring stack",
        "hosts": "specserve",
        "gather_facts": False,
        "tasks": [
            {"name": "Shared settings", "ansible.builtin.import_role": {"name": "specserve"}},
            {"name": "Monitoring", "ansible.builtin.import_role": {"name": "monitoring"}},
        ],
    }
]


@dataclass
class Stack:
    prefix: str
    workdir: Path
    prometheus: str
    alertmanager: str
    sink_container: str
    token: str
    first: Run
    play: list[str]


def _play(args: list[str]) -> Run:
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    start = time.monotonic()
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    return Run(done.returncode, done.stdout + done.stderr, time.monotonic() - start)


def _alertmanager_config(sink_port: int) -> dict[str, Any]:
    """The shipped configuration: its webhooks on this test's sink, with a bearer token from a
    secret file, and a 1 s group_wait instead of 30 s."""
    config = yaml.safe_load(
        (ROOT / "monitoring/alertmanager/alertmanager.yml").read_text(encoding="utf-8")
    )
    config["route"]["group_wait"] = "1s"
    urls = []
    for receiver in config["receivers"]:
        for hook in receiver["webhook_configs"]:
            assert hook["url"].startswith(SHIPPED_WEBHOOK_BASE + "/"), hook
            hook["url"] = hook["url"].replace(SHIPPED_WEBHOOK_BASE, f"http://127.0.0.1:{sink_port}")
            hook["http_config"] = {
                "authorization": {"credentials_file": f"/etc/alertmanager/secrets/{TOKEN_NAME}"}
            }
            urls.append(hook["url"])
    assert len(urls) == 3, urls
    return config


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    require_docker()
    workdir = tmp_path_factory.mktemp("monitoring-ui")
    dep = new_deployment(workdir, f"ssui{os.getpid()}")
    sink_port = free_port()
    token = f"token-{os.urandom(8).hex()}"
    (workdir / "alertmanager.yml").write_text(
        yaml.safe_dump(_alertmanager_config(sink_port), sort_keys=False), encoding="utf-8"
    )
    (workdir / "overrides.yml").write_text(
        yaml.safe_dump({"alerts": {ALERT: {"for": "0s"}}}), encoding="utf-8"
    )
    (workdir / "play.yml").write_text(yaml.safe_dump(PLAY), encoding="utf-8")
    variables = {
        "monitoring_source_dir": str(ROOT / "monitoring"),
        "monitoring_alertmanager_config": str(workdir / "alertmanager.yml"),
        "specserve_alert_overrides": str(workdir / "overrides.yml"),
        "monitoring_alert_sink_enabled": True,
        "monitoring_alert_sink_port": sink_port,
        "monitoring_alertmanager_secrets": {TOKEN_NAME: token},
        "monitoring_grafana_enabled": False,
    }
    play = [str(workdir / "play.yml"), "-i", str(dep.inventory), "-e", json.dumps(variables)]
    try:
        first = _play(play)
        assert first.rc == 0, first.output[-4000:]
        yield Stack(
            prefix=dep.prefix, workdir=workdir,
            prometheus=f"http://127.0.0.1:{dep.prometheus_port}",
            alertmanager=f"http://127.0.0.1:{dep.alertmanager_port}",
            sink_container=f"{dep.prefix}-alert-sink", token=token, first=first, play=play,
        )  # fmt: skip
    finally:
        _cleanup(dep.prefix)


def _delivered(container: str) -> list[dict[str, Any]]:
    logs = subprocess.run(["docker", "logs", container], capture_output=True, text=True,
                          check=True, timeout=30)  # fmt: skip
    return [json.loads(line) for line in logs.stdout.splitlines() if line.startswith("{")]


def _wait_for_delivery(stack: Stack, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        for line in _delivered(stack.sink_container):
            names = [a["labels"]["alertname"] for a in line["notification"]["alerts"]]
            if ALERT in names and line["status"] == "firing":
                return line
        if time.monotonic() > deadline:
            alerts = urllib.request.urlopen(stack.prometheus + "/api/v1/alerts", timeout=10).read()
            raise AssertionError(f"no {ALERT} notification at the sink within {timeout} s; "
                                 f"Prometheus' alerts: {alerts[:2000]!r}")  # fmt: skip
        time.sleep(1)


def test_a_firing_alert_reaches_the_sink_through_prometheus_and_alertmanager(stack: Stack) -> None:
    line = _wait_for_delivery(stack)
    # Routed by the shipped tree: severity=warning of service=specserve goes to specserve-warning.
    assert line["path"] == "/warning"
    assert line["receiver"] == "specserve-warning"
    alert = next(a for a in line["notification"]["alerts"] if a["labels"]["alertname"] == ALERT)
    assert alert["labels"]["service"] == "specserve"
    assert alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["runbook_url"].endswith("spec-serve-exporter-down.md")
    assert any(s.startswith(f"firing {ALERT} severity=warning") for s in line["alerts"])
    # The webhook's credentials_file was read: the token reached the sink as a header.
    assert line["authorization_header"] is True


def test_the_alertmanager_secret_is_a_file_only_alertmanager_reads(stack: Stack) -> None:
    secret = stack.workdir / "monitoring/alertmanager/secrets" / TOKEN_NAME
    info = secret.stat()
    assert stat.S_IMODE(info.st_mode) == 0o400
    assert (info.st_uid, info.st_gid) == (65534, 65534)
    assert secret.read_text(encoding="utf-8") == stack.token
    assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
    assert stack.token not in stack.first.output
    config = stack.workdir / "monitoring/alertmanager/alertmanager.yml"
    assert stack.token not in config.read_text(encoding="utf-8")


def test_a_rerun_changes_nothing(stack: Stack) -> None:
    again = _play(stack.play)
    assert again.rc == 0, again.output[-4000:]
    assert again.recap()["changed"] == 0, again.output[-4000:]


# --- the pages, in Chromium ------------------------------------------------------------------


class _Assets(HTMLParser):
    """The scripts and stylesheets a DOM links."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script" and found.get("src"):
            self.urls.append(str(found["src"]))
        if tag == "link" and found.get("rel") in ("stylesheet", "icon", "shortcut icon"):
            self.urls.append(str(found["href"]))


def chromium(url: str, screenshot: Path | None = None) -> str:
    """The DOM of `url` after its scripts ran (virtual time: the page's timers and requests
    settle before the dump), and a screenshot when asked."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium is required (apt-get install chromium; "
                    "scripts/setup/system-packages.sh installs it)")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="specserve-chromium-") as profile:
        common = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                  "--virtual-time-budget=10000", "--window-size=1280,900"]  # fmt: skip
        done = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        if screenshot is not None:
            shot = subprocess.run(
                [*common, f"--screenshot={screenshot}", url],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert shot.returncode == 0 and screenshot.stat().st_size > 0, shot.stderr[-3000:]
    return done.stdout


def _assets_load(page: str, dom: str) -> None:
    parser = _Assets()
    parser.feed(dom)
    assert parser.urls, f"{page}: no script or stylesheet in the DOM"
    for ref in parser.urls:
        url = urllib.parse.urljoin(page, ref)
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200 and response.read(), url


def demo_browser_urls() -> list[str]:
    """The URLs scripts/demo prints for a browser: a URL that is the whole value of a line of its
    summary (`  Prometheus         http://...`), not an argument of a command (curl, bench)."""
    text = (ROOT / "scripts/demo").read_text(encoding="utf-8")
    summary = text[text.index("specserve demo is up") :]
    return re.findall(r"^  \S.*?\s{2,}(http://\S+)", summary, re.MULTILINE)


def _on(stack: Stack, url: str) -> tuple[str, str]:
    """The demo's URL on this deployment's port, and which UI it is."""
    parsed = urllib.parse.urlsplit(url)
    for ui, port in DEMO_PORTS.items():
        if parsed.port == port:
            base = getattr(stack, ui)
            return base + parsed.path + (f"#{parsed.fragment}" if parsed.fragment else ""), ui
    raise AssertionError(f"scripts/demo prints {url}: a port this test does not know")


def _screenshot(name: str) -> Path | None:
    where = os.environ.get("SPECSERVE_UI_SCREENSHOTS")
    return Path(where) / name if where else None


def test_the_demo_prints_the_alert_pages_of_both_uis() -> None:
    urls = demo_browser_urls()
    assert {urllib.parse.urlsplit(u).port for u in urls} == set(DEMO_PORTS.values()), urls


def test_prometheus_alerts_page_renders_the_project_rules(stack: Stack) -> None:
    _wait_for_delivery(stack)
    (url,) = [u for u in demo_browser_urls() if urllib.parse.urlsplit(u).port == 9090]
    page, _ = _on(stack, url)
    dom = chromium(page, _screenshot("prometheus-alerts.png"))
    missing = [name for name in RULE_NAMES if name not in dom]
    assert not missing, f"{page}: rules not on the page: {missing}\n{dom[:3000]}"
    # The firing one is shown firing: "<name> (1 active)", the others "(0 active)".
    text = re.sub(r"<[^>]+>", "", dom)
    assert re.search(rf"{ALERT}\s*\(1 active\)", text), text[:3000]
    assert len(re.findall(r"\(0 active\)", text)) == len(RULE_NAMES) - 1, text[:3000]
    _assets_load(page, dom)


def test_prometheus_graph_and_rules_pages_render(stack: Stack) -> None:
    # "/" redirects to the graph page; its query form is built by its scripts (graph/index.js).
    dom = chromium(stack.prometheus + "/", _screenshot("prometheus-graph.png"))
    assert 'id="graph_wrapper0"' in dom and 'value="Execute"' in dom, dom[:3000]
    _assets_load(stack.prometheus + "/classic/graph", dom)
    rules = chromium(stack.prometheus + "/classic/rules")
    assert all(name in rules for name in RULE_NAMES), rules[:3000]
    _assets_load(stack.prometheus + "/classic/rules", rules)


def test_alertmanager_ui_shows_the_firing_alert(stack: Stack) -> None:
    _wait_for_delivery(stack)
    (url,) = [u for u in demo_browser_urls() if urllib.parse.urlsplit(u).port == 9093]
    page, _ = _on(stack, url)
    dom = chromium(page, _screenshot("alertmanager-alerts.png"))
    # Rendered by the Elm application from Alertmanager's API: nothing of it is in index.html.
    assert "New Silence" in dom, dom[:3000]
    assert ALERT in dom, dom[:3000]
    assert 'severity="warning"' in dom, dom[:3000]
    _assets_load(page, dom)
