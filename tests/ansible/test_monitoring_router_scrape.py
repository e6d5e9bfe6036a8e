"""The monitoring role scrapes the router when the inventory has one (issue 19 item 4).

Real `ansible-playbook` runs of the shared role and the monitoring role in export mode (the
files for an existing Prometheus, written on the controller): with `monitoring_router_targets`
the scrape config gains the `specserve-router` job, and the real Prometheus loading that
config scrapes the real router (the pinned smg in front of a stand-in, on loopback)
under that job, the one the fleet alerts select. Without targets there is no such job; a target
that is not host:port fails the play naming the variable, before anything is written.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from specserve.monitoring.metrics import ROUTER_WORKER_HEALTH
from specserve.monitoring.rules import ROUTER_JOB
from tests.e2e.processes import Services, free_port, http_ok, wait_until
from tests.e2e.prom import Prometheus
from tests.e2e.router import Router, start_router

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
PROMETHEUS = "/usr/bin/prometheus"
MODEL = ROOT / "tests" / "fixtures" / "models" / "Llama-3.1-8B-Instruct"

PLAY = [
    {
        "name": "Monitoring files for an existing Prometheus",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "tasks": [
            {"name": "Shared settings", "ansible.builtin.import_role": {"name": "specserve"}},
            {"name": "Monitoring", "ansible.builtin.import_role": {"name": "monitoring"}},
        ],
    }
]


def _export(tmp: Path, **extra: object) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp / f"export-{len(list(tmp.glob('export-*')))}"
    play = tmp / "play.yml"
    play.write_text(yaml.safe_dump(PLAY), encoding="utf-8")
    variables = {
        "specserve_profile": str(ROOT / "profiles" / "standin-cpu.yaml"),
        # The controller's own Python (the venv running ansible-playbook), as the harness does.
        "ansible_python_interpreter": str(BIN / "python"),
        "monitoring_enabled": False,
        "monitoring_export_dir": str(out),
        "monitoring_source_dir": str(ROOT / "monitoring"),
        **extra,
    }
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), str(play), "-i", "localhost,",
         "-e", json.dumps(variables)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return done, out / "scrape-config.yml"


def _jobs(path: Path) -> dict[str, list[str]]:
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {
        job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]]
        for job in config["scrape_configs"]
    }


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Router, Services]]:
    root = tmp_path_factory.mktemp("router-scrape")
    services = Services(root)
    try:
        port = free_port()
        behaviour = root / "behaviour.yaml"
        behaviour.write_text("acceptance: 0.6\n", encoding="utf-8")
        services.start(
            "standin",
            [str(BIN / "specserve-standin"), "--model-path", str(MODEL), "--host", "127.0.0.1",
             "--port", str(port)],
            {"SPECSERVE_STANDIN_LOAD_SECONDS": "0.2", "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.1",
             "SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour)},
        )  # fmt: skip
        worker = f"http://127.0.0.1:{port}"
        wait_until("the stand-in's /health", http_ok(worker + "/health"), 60, services=services)
        yield start_router(services, [worker]), services
    finally:
        services.stop_all()


def test_the_exported_scrape_config_scrapes_the_real_router(
    router: tuple[Router, Services], tmp_path: Path
) -> None:
    real, services = router
    done, scrape = _export(tmp_path, monitoring_router_targets=[real.metrics_target])
    assert done.returncode == 0, done.stdout[-3000:]
    assert _jobs(scrape)[ROUTER_JOB] == [real.metrics_target]

    # The real Prometheus, with that scrape config (the exporter and SGLang jobs point at servers
    # this test does not run: only the router's job is expected up).
    prom_port = free_port()
    config = yaml.safe_load(scrape.read_text(encoding="utf-8"))
    config["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s"}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    services.start(
        "prometheus",
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'prom-data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
    )  # fmt: skip
    prom = Prometheus(f"http://127.0.0.1:{prom_port}")
    wait_until("Prometheus ready", http_ok(prom.url + "/-/ready"), 30, services=services)
    query = f'{ROUTER_WORKER_HEALTH}{{job="{ROUTER_JOB}"}}'
    wait_until("the router's worker health scraped", lambda: prom.value(query) == 1.0, 30,
               services=services)  # fmt: skip
    assert prom.targets_up()[ROUTER_JOB] == "up"


def test_without_a_router_there_is_no_router_job(tmp_path: Path) -> None:
    done, scrape = _export(tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert ROUTER_JOB not in _jobs(scrape)
    assert "specserve-exporter" in _jobs(scrape)


def test_a_target_that_is_not_host_port_fails_naming_the_variable(tmp_path: Path) -> None:
    done, scrape = _export(tmp_path, monitoring_router_targets=["http://10.0.0.5:29000/metrics"])
    assert done.returncode != 0
    assert "monitoring_router_targets must be a list of host:port entries" in done.stdout
    assert not scrape.exists()
