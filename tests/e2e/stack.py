"""The whole monitoring chain on loopback, each part started the way users start it.

stand-in SGLang (`specserve-launch` with a copy of profiles/standin-cpu.yaml, teeing a log file)
-> `specserve-exporter --profile` following that file -> Debian's Prometheus scraping the exporter,
the stand-in's /metrics and the real SGLang router's (the pinned smg in front of the
stand-in, as a fleet of one), loading rules rendered by `specserve rules render --overrides`
-> Debian's Alertmanager with the shipped routing and inhibitions -> a webhook receiver here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import yaml

from specserve.monitoring.alertmanager import alertmanager_config
from specserve.monitoring.rules import ALERTS, ALERTS_BY_NAME, ROUTER_JOB
from tests.e2e.processes import Services, free_port, http_ok, wait_until
from tests.e2e.prom import Prometheus
from tests.e2e.router import Router, start_router
from tests.e2e.webhook import WebhookReceiver

ROOT = Path(__file__).resolve().parents[2]
STANDIN_PROFILE = ROOT / "profiles" / "standin-cpu.yaml"
BINDIR = Path(sys.executable).parent
PROMETHEUS = "/usr/bin/prometheus"
ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
EXPORTER_JOB = "specserve-exporter"
SGLANG_JOB = "sglang"
# Stand-in clock: 20x faster than model time; a Decode line every 10 decode iterations.
TIME_SCALE = "0.05"
DECODE_LOG_INTERVAL = 10
# Short windows and `for:` through the overrides file users have, so each phase settles in
# seconds while the load keeps running. 20 s is 20 scrapes: rate() stays well defined. The two
# "is the pipeline there" alerts get a longer `for` so one slow scrape on a busy CI machine
# cannot fire them.
WINDOW = "20s"
FOR_SHORT = "2s"
FOR_PIPELINE = {"SpecServeExporterDown": "10s", "SpecServeLogSourceDown": "10s",
                # The native accept length counts requests as they finish, the log-derived one
                # decode windows: at a behaviour switch the two part for a few seconds.
                "SpecServeAcceptLengthMismatch": "10s"}  # fmt: skip
# SpecServeNoDecodeLines has no window: it counts time itself (seconds without a decode line,
# then `for`). It runs on a clock IDLE_SCALE times faster than the default rule's: 180 s
# without a decode line -> 6 s, `for` 2m -> 4 s. Prometheus scrapes and evaluates every 1 s,
# 30 s on that clock (twice the usual 15 s: a stale gauge would stay visible longer, not
# shorter), so IDLE_S of idleness here is what 10 minutes are to the default rule.
NO_DECODE_LINES = "SpecServeNoDecodeLines"
IDLE_SCALE = 30
IDLE_S = 600 / IDLE_SCALE


def _seconds(duration: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(duration[:-1]) * units[duration[-1]]


def no_decode_lines_scaled() -> dict[str, Any]:
    """SpecServeNoDecodeLines' default `for` and stale_after_seconds divided by IDLE_SCALE."""
    alert = ALERTS_BY_NAME[NO_DECODE_LINES]
    stale = alert.threshold("stale_after_seconds").default
    assert isinstance(stale, float)
    return {"for": f"{_seconds(alert.for_) / IDLE_SCALE:g}s",
            "thresholds": {"stale_after_seconds": stale / IDLE_SCALE}}  # fmt: skip


@dataclass
class Stack:
    services: Services
    prometheus: Prometheus
    receiver: WebhookReceiver
    standin_url: str
    alertmanager_url: str
    behaviour_file: Path
    profile: Path
    rules_file: Path
    router: Router | None
    overrides: Path

    def alertmanager_alerts(self) -> list[dict[str, Any]]:
        """Alertmanager's view (/api/v2/alerts), with each alert's inhibition status."""
        response = requests.get(self.alertmanager_url + "/api/v2/alerts", timeout=10)
        response.raise_for_status()
        return list(response.json())

    def set_behaviour(self, behaviour: Mapping[str, float]) -> None:
        write_behaviour(self.behaviour_file, behaviour)


def write_behaviour(path: Path, behaviour: Mapping[str, float]) -> None:
    """Rewrite the stand-in's behaviour file (beside + rename: it is never half-written)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(dict(behaviour)), encoding="utf-8")
    os.replace(tmp, path)


def write_profile(
    path: Path,
    port: int,
    log: Path,
    behaviour: Path,
    api_key_file: Path | None = None,
    logging_extra: Mapping[str, Any] | None = None,
    server_extra: Mapping[str, Any] | None = None,
) -> None:
    doc = yaml.safe_load(STANDIN_PROFILE.read_text(encoding="utf-8"))
    doc["server"].update(server_extra or {})
    for section in ("target", "drafter"):
        # The copy lives in a temp dir: make the fixture model paths absolute.
        doc[section]["path"] = str((STANDIN_PROFILE.parent / doc[section]["path"]).resolve())
    doc["server"]["port"] = port
    # A baseline that knows the server batches: with the profile's one bucket (concurrency 1)
    # the capacity model reads a server busy with one client as full, so whether
    # SpecServeFleetNeedsReplicas turned pending in a healthy phase hung on the load
    # generator's duty cycle (CI of 6ad65ce: pending, 2 replicas). Bucket 8 at 4x bucket 1's
    # throughput, as a real server batches; bucket 1, what the phases compare with, is unchanged.
    doc["baseline"]["gen_throughput_tok_s"]["8"] = 4 * float(
        doc["baseline"]["gen_throughput_tok_s"]["1"])
    doc["logging"] = {"file": str(log), "decode_log_interval": DECODE_LOG_INTERVAL,
                      **(logging_extra or {})}  # fmt: skip
    if api_key_file is not None:
        doc["server"]["api_key"] = {"file": str(api_key_file)}
    doc["env"] = {
        "SPECSERVE_STANDIN_LOAD_SECONDS": "0.3",
        "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.2",
        "SPECSERVE_STANDIN_TIME_SCALE": TIME_SCALE,
        "SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour),
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")


def alert_overrides() -> dict[str, dict[str, Any]]:
    """The test's per-alert overrides: `for` everywhere, `window` on every alert that has one,
    SpecServeNoDecodeLines' time scaled (no_decode_lines_scaled)."""
    alerts: dict[str, dict[str, Any]] = {}
    for alert in ALERTS:
        alerts[alert.name] = {"for": FOR_PIPELINE.get(alert.name, FOR_SHORT)}
        if alert.window is not None:
            alerts[alert.name]["window"] = WINDOW
    alerts[NO_DECODE_LINES] = no_decode_lines_scaled()
    return alerts


def write_overrides(
    path: Path,
    slos: Mapping[str, Any] | None = None,
    alerts: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """The overrides file: the test's alert overrides (`alerts` replaces an alert's keys it
    names), and the SLO settings when given."""
    document: dict[str, Any] = {"alerts": alert_overrides()}
    for name, keys in (alerts or {}).items():
        document["alerts"][name].update(keys)
    if slos:
        document["slos"] = dict(slos)
    path.write_text(yaml.safe_dump(document), encoding="utf-8")


def render_rules(overrides: Path, out: Path) -> None:
    """The user's command: `specserve rules render --overrides F --out F`."""
    done = subprocess.run(
        [str(BINDIR / "specserve"), "rules", "render", "--overrides", str(overrides),
         "--out", str(out)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"specserve rules render failed: {done.stderr}"


def alertmanager_yaml(receiver: WebhookReceiver) -> dict[str, Any]:
    """The shipped example (routes by severity, inhibitions), pointed at the test's receiver
    and with waits short enough for a test; nothing else changed."""
    config = alertmanager_config()
    for item in config["receivers"]:
        for hook in item["webhook_configs"]:
            hook["url"] = receiver.url("/" + hook["url"].rsplit("/", 1)[1])
    config["route"].update(group_wait="1s", group_interval="1s", repeat_interval="1h")
    return config


def prometheus_yaml(
    exporter: int, standin: int, alertmanager: int, rules: Path, router_metrics: str | None
) -> dict[str, Any]:
    routers = [] if router_metrics is None else [
        {"job_name": ROUTER_JOB, "static_configs": [{"targets": [router_metrics]}]}]  # fmt: skip
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "alerting": {
            "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager}"]}]}]
        },
        "scrape_configs": [
            {"job_name": EXPORTER_JOB,
             "static_configs": [{"targets": [f"127.0.0.1:{exporter}"]}]},
            {"job_name": SGLANG_JOB, "static_configs": [{"targets": [f"127.0.0.1:{standin}"]}]},
            *routers,
        ],
    }  # fmt: skip


def missing_binaries() -> list[str]:
    return [name for name in (PROMETHEUS, ALERTMANAGER) if shutil.which(name) is None]


@contextmanager
def running_stack(
    workdir: Path,
    initial_behaviour: Mapping[str, float],
    api_key_file: Path | None = None,
    launcher_env: Mapping[str, str] | None = None,
    logging_extra: Mapping[str, Any] | None = None,
    server_extra: Mapping[str, Any] | None = None,
    slos: Mapping[str, Any] | None = None,
    alerts: Mapping[str, Mapping[str, Any]] | None = None,
) -> Iterator[Stack]:
    """The chain; optionally with an API key file, extra launcher environment, logging and
    server settings (the secrets matrix plants secrets and forces log rotation through these;
    the graph-miss test sets the stand-in's decode graphs' largest batch), and the overrides
    file's SLO settings and alert keys over the test's (the burn-rate test sets the TTFT
    threshold and the ticket's `for`)."""
    missing = missing_binaries()
    # Installed by scripts/setup/system-packages.sh: absent means a broken setup, not a skip.
    assert not missing, f"{', '.join(missing)} not installed: run scripts/setup/system-packages.sh"
    workdir.mkdir(parents=True, exist_ok=True)
    services = Services(workdir)
    receiver = WebhookReceiver()
    receiver.start()
    try:
        standin_port, exporter_port = free_port(), free_port()
        am_port, prom_port = free_port(), free_port()
        log = workdir / "logs" / "sglang.log"
        behaviour = workdir / "behaviour.yaml"
        profile = workdir / "standin-profile.yaml"
        overrides = workdir / "overrides.yaml"
        rules = workdir / "rules" / "specserve.yml"
        standin_url = f"http://127.0.0.1:{standin_port}"
        write_profile(profile, standin_port, log, behaviour, api_key_file, logging_extra,
                      server_extra)  # fmt: skip
        write_behaviour(behaviour, initial_behaviour)
        write_overrides(overrides, slos, alerts)
        render_rules(overrides, rules)

        path_env = {"PATH": f"{BINDIR}:{os.environ.get('PATH', '')}"}
        services.start("standin", [str(BINDIR / "specserve-launch"), str(profile)],
                       {**path_env, **(launcher_env or {})})  # fmt: skip
        wait_until("the stand-in's /health", http_ok(standin_url + "/health"), 30,
                   services=services)  # fmt: skip
        # Without an API key only: the router registers a worker through /server_info, which
        # the key guards, and its one flag for the key would put it on a command line.
        router = start_router(services, [standin_url]) if api_key_file is None else None
        stack = Stack(services, Prometheus(f"http://127.0.0.1:{prom_port}"), receiver,
                      standin_url, f"http://127.0.0.1:{am_port}", behaviour, profile, rules,
                      router, overrides)  # fmt: skip
        services.start(
            "exporter",
            [str(BINDIR / "specserve-exporter"), "--source", "file", "--file", str(log),
             "--from-beginning", "--profile", str(profile),
             "--listen-address", f"127.0.0.1:{exporter_port}"],
        )  # fmt: skip
        wait_until("the exporter's /healthz", http_ok(f"http://127.0.0.1:{exporter_port}/healthz"),
                   20, services=services)  # fmt: skip

        am_config = workdir / "alertmanager.yml"
        am_config.write_text(yaml.safe_dump(alertmanager_yaml(receiver)), encoding="utf-8")
        services.start(
            "alertmanager",
            [ALERTMANAGER, f"--config.file={am_config}", f"--storage.path={workdir / 'am-data'}",
             f"--web.listen-address=127.0.0.1:{am_port}",
             # Empty: no gossip listener on 0.0.0.0:9094, one instance needs no cluster.
             "--cluster.listen-address=", "--log.level=warn"],
        )  # fmt: skip
        wait_until("Alertmanager ready", http_ok(stack.alertmanager_url + "/-/ready"), 30,
                   services=services)  # fmt: skip

        prom_config = workdir / "prometheus.yml"
        prom_config.write_text(
            yaml.safe_dump(prometheus_yaml(exporter_port, standin_port, am_port, rules,
                                           None if router is None else router.metrics_target)),
            encoding="utf-8",
        )
        services.start(
            "prometheus",
            [PROMETHEUS, f"--config.file={prom_config}",
             f"--storage.tsdb.path={workdir / 'prom-data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        )  # fmt: skip
        wait_until("Prometheus ready", http_ok(stack.prometheus.url + "/-/ready"), 30,
                   services=services)  # fmt: skip
        wanted = {EXPORTER_JOB: "up", SGLANG_JOB: "up"} | (
            {} if router is None else {ROUTER_JOB: "up"})  # fmt: skip
        wait_until("every scrape target up", lambda: stack.prometheus.targets_up() == wanted, 20,
                   services=services)  # fmt: skip
        yield stack
    finally:
        services.stop_all()
        receiver.stop()
