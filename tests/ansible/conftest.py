"""One stand-in deployment per session, shared by the scenario tests in order."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from .harness import ROOT, free_port, write_profile

REQUIRED_IMAGES = (
    "specserve/standin:0.1.0",
    "specserve/exporter:0.1.0",
    "specserve-local/prometheus:2.42.0-ui1",
    "specserve-local/alertmanager:0.25.0-ui1",
)


@dataclass
class Deployment:
    prefix: str
    workdir: Path
    inventory: Path
    profile: Path
    server_port: int
    exporter_port: int
    prometheus_port: int
    alertmanager_port: int
    state_dir: Path
    # Inventory variables over the defaults below (the failure matrix's faster stand-in).
    overrides: dict[str, object] = field(default_factory=dict)

    def write_inventory(self, path: Path, hosts: dict[str, dict[str, object]]) -> Path:
        base = yaml.safe_load((ROOT / "playbooks/inventory/standin/hosts.yml").read_text())
        group_vars = dict(base["specserve_demo"]["vars"])
        group_vars.update(
            specserve_profile=str(self.profile),
            # The deployments' profiles are temporary files of their own: baseline.yml and
            # tune.yml write into them (real use), not into the demo's working copy under build/.
            tune_profile_out="",
            specserve_container_name=self.prefix,
            server_profile_host_path=str(self.workdir / "etc/profile.yaml"),
            exporter_profile_dir=str(self.workdir / "etc/exporter"),
            server_state_dir=str(self.state_dir),
            server_secrets_dir=str(self.workdir / "secrets"),
            server_api_key_owner="10001",
            specserve_log_owner="10001",
            specserve_log_dir=str(self.workdir / "log"),
            server_health_poll_s=0.5,
            server_drain_poll_s=0.5,
            specserve_exporter_port=self.exporter_port,
            monitoring_dir=str(self.workdir / "monitoring"),
            monitoring_data_dir=str(self.workdir / "monitoring-data"),
            monitoring_prometheus_port=self.prometheus_port,
            monitoring_alertmanager_port=self.alertmanager_port,
            monitoring_scrape_interval="1s",
            # The demo's alert sink listens on 9095, which parallel deployments would share:
            # tests/ansible/test_monitoring_ui.py runs one on a port of its own.
            monitoring_alert_sink_enabled=False,
            # Loading and warm-up shortened through the stand-in's own env knobs.
            server_env={"SPECSERVE_STANDIN_LOAD_SECONDS": "1",
                        "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.5"},
            verify_warmup_requests=2,
            verify_warmup_max_tokens=200,
            # The stability window shortened: the stand-in logs a decode line every ~0.5 s
            # under the warm-up load; the failure matrix sets its own, longer window.
            server_stability_window_s=3,
            server_stability_poll_s=0.5,
        )
        group_vars.update(self.overrides)
        localhost = base["specserve_demo"]["children"]["specserve"]["hosts"]["localhost"]
        doc = {
            "specserve": {
                "hosts": {name: {**localhost, **extra} for name, extra in hosts.items()},
                "vars": group_vars,
            }
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return path


def _cleanup(prefix: str) -> None:
    names = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name=^{prefix}", "--format", "{{.Names}}"],
        capture_output=True, text=True, check=False,
    ).stdout.split()
    if names:
        subprocess.run(["docker", "rm", "-f", *names], capture_output=True, check=False)


def require_docker() -> None:
    """Fail (never skip) without a Docker engine or the images the deployments need."""
    if shutil.which("docker") is None or subprocess.run(
        ["docker", "info"], capture_output=True, check=False
    ).returncode != 0:
        pytest.fail("the Ansible tests need a running Docker engine (scripts/setup/docker.sh)")
    missing = [
        image for image in REQUIRED_IMAGES
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True,
                          check=False).returncode != 0
    ]
    if missing:
        pytest.fail(f"images missing: {missing}; run scripts/setup/ansible.sh")


def new_deployment(workdir: Path, prefix: str) -> Deployment:
    """A stand-in deployment's settings in `workdir` (nothing deployed yet)."""
    # The profile's relative model paths (../tests/fixtures/...) must resolve on the controller
    # exactly as they do inside the stand-in image (/usr/share/specserve/profiles/..).
    (workdir / "profiles").mkdir()
    (workdir / "tests").symlink_to(ROOT / "tests")
    dep = Deployment(
        prefix=prefix,
        workdir=workdir,
        inventory=workdir / "inventory.yml",
        profile=workdir / "profiles" / "standin.yaml",
        server_port=free_port(),
        exporter_port=free_port(),
        prometheus_port=free_port(),
        alertmanager_port=free_port(),
        state_dir=workdir / "state",
    )
    write_profile(dep.profile, dep.server_port)
    dep.write_inventory(dep.inventory, {"localhost": {}})
    return dep


@pytest.fixture(scope="session")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    require_docker()
    dep = new_deployment(tmp_path_factory.mktemp("ansible"), f"sst{os.getpid()}")
    try:
        yield dep
    finally:
        _cleanup(dep.prefix)
