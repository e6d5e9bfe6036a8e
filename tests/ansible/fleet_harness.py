"""A fleet of three stand-in nodes behind SGLang's real router (the pinned PyPI wheel in
specserve/router, docker/router), deployed by the real `ansible-playbook playbooks/deploy.yml` on
the Docker engine, everything on loopback: what test_fleet.py and test_fleet_router.py share."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import pytest
import yaml

from .conftest import _cleanup, require_docker
from .harness import ROOT, Run, docker_inspect, free_port, playbook, write_profile

API_KEY = "sk-test-4f1c2a9e7b"  # in the test vault (fixtures/vault.yml)
NODES = ("node1", "node2", "node3")
_IMAGES = yaml.safe_load((ROOT / "versions.yaml").read_text())["specserve_images"]
ROUTER_IMAGE = "{repository}:{tag}".format(**_IMAGES["router"])
# The router a fleet upgrades from (sglang-router 0.3.2), built by scripts/setup/ansible.sh.
PREVIOUS_ROUTER_IMAGE = "{repository}:{tag}".format(**_IMAGES["router_previous"])
# The failure matrix's faster stand-in (a decode line every ~0.1 s under load).
BASE_ENV = {"SPECSERVE_STANDIN_LOAD_SECONDS": "1", "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.5",
            "SPECSERVE_STANDIN_TIME_SCALE": "0.2"}


@dataclass
class Fleet:
    prefix: str
    workdir: Path
    inventory: Path
    router_port: int
    metrics_port: int
    ports: dict[str, int]
    nodes: tuple[str, ...] = NODES
    host_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    group_overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router_port}"

    def profile(self, node: str) -> Path:
        return self.workdir / "profiles" / f"{node}.yaml"

    def container(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def write_inventory(self) -> None:
        base = yaml.safe_load((ROOT / "playbooks/inventory/standin/hosts.yml").read_text())
        local = base["specserve_demo"]["children"]["specserve"]["hosts"]["localhost"]
        group_vars = dict(base["specserve_demo"]["vars"])
        group_vars.update(local)
        group_vars.update(
            server_api_key_owner="10001", specserve_log_owner="10001",
            server_health_poll_s=0.5, server_drain_poll_s=0.5,
            server_env=BASE_ENV, verify_warmup_requests=2, verify_warmup_max_tokens=200,
            server_stability_window_s=4, server_stability_poll_s=0.5,
            monitoring_enabled=False,
            router_container_name=self.router,
            router_port=self.router_port, router_metrics_port=self.metrics_port,
            router_dir=str(self.workdir / "router"),
            # Fast enough for a test, and the drain's bound short enough to be seen.
            router_health_check_interval_s=1, router_drain_poll_s=0.5, router_join_poll_s=0.5,
        )
        group_vars.update(self.group_overrides)
        hosts = {}
        for node in self.nodes:
            home = self.workdir / node
            hosts[node] = {
                "specserve_profile": str(self.profile(node)),
                "specserve_container_name": self.container(node),
                "specserve_exporter_port": self.ports[f"{node}-exporter"],
                "specserve_log_dir": str(home / "log"),
                "server_profile_host_path": str(home / "etc/profile.yaml"),
                "exporter_profile_dir": str(home / "etc/exporter"),
                "server_secrets_dir": str(home / "secrets"),
                "server_state_dir": str(home / "state"),
                "monitoring_export_dir": str(home / "monitoring-export"),
                "router_worker_url": f"http://127.0.0.1:{self.ports[node]}",
                **self.host_overrides.get(node, {}),
            }
        doc = {"fleet": {
            "children": {
                "specserve": {"children": {"specserve_fleet": {"hosts": hosts}}},
                "specserve_router": {"hosts": {"router": {}}},
            },
            "vars": group_vars,
        }}
        self.inventory.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")

    @property
    def router(self) -> str:
        return f"{self.prefix}-router"

    def listed_urls(self) -> set[str]:
        """Every worker the router lists, healthy or not, but not one draining out of it: smg
        keeps a removed worker listed `draining` for 5 s, routing nothing to it."""
        return {w["url"] for w in self.workers() if w.get("status") != "draining"}

    def workers(self) -> list[dict[str, Any]]:
        request = urllib.request.Request(
            f"{self.router_url}/workers", headers={"Authorization": f"Bearer {API_KEY}"})
        with urllib.request.urlopen(request, timeout=5) as response:
            return list(json.loads(response.read())["workers"])

    def urls_in_rotation(self) -> set[str]:
        return {w["url"] for w in self.workers() if w["is_healthy"]}

    def node_url(self, node: str) -> str:
        return f"http://127.0.0.1:{self.ports[node]}"

    def spec_label(self, node: str) -> str:
        info = docker_inspect(self.container(node))
        assert info is not None, f"no container {self.container(node)}"
        return str(info["Config"]["Labels"]["io.specserve.spec-hash"])


class Sampler:
    """A daemon thread that calls `sample()` while the `with` block runs; `sample()` returns the
    seconds to wait before the next call. What the four background samplers of the fleet tests
    (request loops and watchers) share."""

    join_s = 10.0  # how long `__exit__` waits for a sample in progress

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.join_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(self.sample())

    def sample(self) -> float:
        raise NotImplementedError


class TimedLoop(Sampler):
    """Generations through the router back to back (a short pause between), each timed."""

    BODY = json.dumps({"text": "ping", "sampling_params": {"max_new_tokens": 8}}).encode()

    def __init__(self, url: str, pause: float = 0.1, timeout: float = 30.0) -> None:
        super().__init__()
        self.url, self.pause, self.timeout = url, pause, timeout
        self.join_s = timeout + 5
        self.durations: list[float] = []
        self.failures: list[str] = []

    def sample(self) -> float:
        request = urllib.request.Request(
            self.url, data=self.BODY, method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
        tic = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                json.loads(response.read())
        except (OSError, ValueError) as exc:
            self.failures.append(f"{time.strftime('%H:%M:%S')} {getattr(exc, 'reason', exc)}")
        self.durations.append(time.monotonic() - tic)
        return self.pause

    @property
    def sent(self) -> int:
        return len(self.durations)


class RotationWatcher(Sampler):
    """The router's worker list every 0.25 s: when each node left and came back."""

    def __init__(self, fleet: Fleet) -> None:
        super().__init__()
        self.fleet = fleet
        self.samples: list[tuple[float, set[str]]] = []

    def sample(self) -> float:
        try:
            self.samples.append((time.monotonic(), self.fleet.urls_in_rotation()))
        except (OSError, ValueError):
            self.samples.append((time.monotonic(), set()))
        return 0.25

    def out_seconds(self, url: str) -> float:
        out, last = 0.0, None
        for at, urls in self.samples:
            if last is not None and url not in urls:
                out += at - last
            last = at
        return out

    def max_out_at_once(self, urls: set[str]) -> int:
        return max(len(urls - present) for _, present in self.samples)


@contextmanager
def deployed_fleet(tmp_path_factory: pytest.TempPathFactory, tag: str,
                   figures: dict[str, Any], nodes: tuple[str, ...] = NODES,
                   first_deploy: dict[str, Any] | None = None) -> Iterator[Fleet]:
    """The nodes (three unless told) and the router, first deployed (with the group variables
    `first_deploy` on top, for that deploy only); removed (containers) on exit."""
    require_docker()
    for image in (ROUTER_IMAGE, PREVIOUS_ROUTER_IMAGE):
        if docker_inspect(image) is None:
            pytest.fail(f"image {image} missing; run scripts/setup/ansible.sh")
    workdir = tmp_path_factory.mktemp(tag)
    (workdir / "profiles").mkdir()
    (workdir / "tests").symlink_to(ROOT / "tests")
    names = [*nodes, *(f"{n}-exporter" for n in nodes)]
    dep = Fleet(prefix=f"{tag}{os.getpid()}", workdir=workdir, inventory=workdir / "inventory.yml",
                router_port=free_port(), metrics_port=free_port(),
                ports={name: free_port() for name in names}, nodes=nodes)
    for node in nodes:
        write_profile(dep.profile(node), dep.ports[node])
    dep.group_overrides = dict(first_deploy or {})
    dep.write_inventory()
    try:
        run = playbook(dep.inventory, timeout=900)
        assert run.rc == 0, run.output[-6000:]
        figures["first deploy seconds"] = round(run.seconds, 1)
        assert dep.urls_in_rotation() == {dep.node_url(n) for n in nodes}
        dep.group_overrides = {}
        dep.write_inventory()
        yield dep
    finally:
        print(f"\n{tag} figures:\n" + json.dumps(figures, indent=2, sort_keys=True))
        _cleanup(dep.prefix)


def changed(run: Run, nodes: tuple[str, ...] = NODES) -> dict[str, int]:
    return {host: run.recap(host)["changed"] for host in (*nodes, "router")}


def changed_tasks(run: Run) -> list[str]:
    """Each `changed:` line with the task it belongs to (the evidence when changed != 0)."""
    task, found = "", []
    for line in run.output.splitlines():
        if line.startswith("TASK ["):
            task = line.rstrip("* ")
        elif line.startswith("changed: ["):
            found.append(f"{task}: {line[:200]}")
    return found
