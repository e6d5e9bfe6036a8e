"""The fleet (issue 19 item 1): three stand-in nodes behind SGLang's real router (the pinned
PyPI wheel in specserve/router, docker/router), deployed by the real `ansible-playbook
playbooks/deploy.yml` on the Docker engine, everything on loopback.

While a profile change is rolled across the nodes, a bounded request loop goes through the
router; a watcher reads the router's worker list. Figures (requests, failures, the longest
request, each node's time out of rotation) are printed.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import _cleanup, require_docker
from .harness import (
    ROOT,
    Background,
    Run,
    docker_inspect,
    free_port,
    http_status,
    playbook,
    write_profile,
)

# The first test carries the first deploy of three nodes and the router (the module fixture).
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

API_KEY = "sk-test-4f1c2a9e7b"  # in the test vault (fixtures/vault.yml)
NODES = ("node1", "node2", "node3")
ROUTER_IMAGE = "{repository}:{tag}".format(
    **yaml.safe_load((ROOT / "versions.yaml").read_text())["specserve_images"]["router"])
# The failure matrix's faster stand-in (a decode line every ~0.1 s under load).
BASE_ENV = {"SPECSERVE_STANDIN_LOAD_SECONDS": "1", "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.5",
            "SPECSERVE_STANDIN_TIME_SCALE": "0.2"}
FIGURES: dict[str, Any] = {}


@dataclass
class Fleet:
    prefix: str
    workdir: Path
    inventory: Path
    router_port: int
    metrics_port: int
    ports: dict[str, int]
    host_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

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
            router_container_name=f"{self.prefix}-router",
            router_port=self.router_port, router_metrics_port=self.metrics_port,
            router_dir=str(self.workdir / "router"),
            # Fast enough for a test, and the drain's bound short enough to be seen.
            router_health_check_interval_s=1, router_drain_poll_s=0.5, router_join_poll_s=0.5,
        )
        hosts = {}
        for node in NODES:
            home = self.workdir / node
            hosts[node] = {
                "specserve_profile": str(self.profile(node)),
                "specserve_container_name": self.container(node),
                "specserve_exporter_port": self.ports[f"{node}-exporter"],
                "specserve_log_dir": str(home / "log"),
                "server_profile_host_path": str(home / "etc/profile.yaml"),
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


class TimedLoop:
    """Generations through the router back to back (a short pause between), each timed."""

    def __init__(self, url: str, pause: float = 0.1, timeout: float = 30.0) -> None:
        self.url, self.pause, self.timeout = url, pause, timeout
        self.durations: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TimedLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 5)

    def _run(self) -> None:
        body = json.dumps({"text": "ping", "sampling_params": {"max_new_tokens": 8}}).encode()
        while not self._stop.is_set():
            request = urllib.request.Request(
                self.url, data=body, method="POST",
                headers={"Content-Type": "application/json",
                         "Authorization": f"Bearer {API_KEY}"})
            tic = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    json.loads(response.read())
            except (OSError, ValueError) as exc:
                self.failures.append(f"{time.strftime('%H:%M:%S')} {getattr(exc, 'reason', exc)}")
            self.durations.append(time.monotonic() - tic)
            self._stop.wait(self.pause)

    @property
    def sent(self) -> int:
        return len(self.durations)


class RotationWatcher:
    """The router's worker list every 0.25 s: when each node left and came back."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.samples: list[tuple[float, set[str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RotationWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), self.fleet.urls_in_rotation()))
            except (OSError, ValueError):
                self.samples.append((time.monotonic(), set()))
            self._stop.wait(0.25)

    def out_seconds(self, url: str) -> float:
        out, last = 0.0, None
        for at, urls in self.samples:
            if last is not None and url not in urls:
                out += at - last
            last = at
        return out

    def max_out_at_once(self, urls: set[str]) -> int:
        return max(len(urls - present) for _, present in self.samples)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    require_docker()
    if docker_inspect(ROUTER_IMAGE) is None:
        pytest.fail(f"image {ROUTER_IMAGE} missing; run scripts/setup/ansible.sh")
    workdir = tmp_path_factory.mktemp("fleet")
    (workdir / "profiles").mkdir()
    (workdir / "tests").symlink_to(ROOT / "tests")
    names = [*NODES, *(f"{n}-exporter" for n in NODES)]
    dep = Fleet(prefix=f"ssf{os.getpid()}", workdir=workdir, inventory=workdir / "inventory.yml",
                router_port=free_port(), metrics_port=free_port(),
                ports={name: free_port() for name in names})
    for node in NODES:
        write_profile(dep.profile(node), dep.ports[node])
    dep.write_inventory()
    try:
        run = playbook(dep.inventory, timeout=900)
        assert run.rc == 0, run.output[-6000:]
        FIGURES["first deploy seconds"] = round(run.seconds, 1)
        assert dep.urls_in_rotation() == {dep.node_url(n) for n in NODES}
        yield dep
    finally:
        print("\nfleet figures:\n" + json.dumps(FIGURES, indent=2, sort_keys=True))
        _cleanup(dep.prefix)


def _changed(run: Run) -> dict[str, int]:
    return {host: run.recap(host)["changed"] for host in (*NODES, "router")}


def _changed_tasks(run: Run) -> list[str]:
    """Each `changed:` line with the task it belongs to (the evidence when changed != 0)."""
    task, found = "", []
    for line in run.output.splitlines():
        if line.startswith("TASK ["):
            task = line.rstrip("* ")
        elif line.startswith("changed: ["):
            found.append(f"{task}: {line[:200]}")
    return found


def test_profile_change_rolls_node_by_node_with_no_failed_request(fleet: Fleet) -> None:
    """A profile change on every node, rolled one at a time behind the router: no request
    through the router fails, each node leaves the rotation once (never two at once), and every
    node ends on the new spec, back in rotation."""
    before = {n: fleet.spec_label(n) for n in NODES}
    for node in NODES:
        write_profile(fleet.profile(node), fleet.ports[node], **{"logging.decode_log_interval": 20})
    urls = {fleet.node_url(n) for n in NODES}
    with TimedLoop(f"{fleet.router_url}/generate") as loop, RotationWatcher(fleet) as watcher:
        run = playbook(fleet.inventory, timeout=900)
        time.sleep(1)  # requests after the play: the last node is serving through the router
    assert run.rc == 0, run.output[-6000:]
    for node in NODES:
        assert f"{node} is out of the router and idle" in run.output
        assert f"{node} is in the router's rotation" in run.output
        assert fleet.spec_label(node) != before[node], f"{node} was not replaced"
        assert watcher.out_seconds(fleet.node_url(node)) > 0, f"{node} never left the rotation"
    assert watcher.max_out_at_once(urls) == 1, "more than one node was out of rotation at once"
    assert fleet.urls_in_rotation() == urls
    FIGURES["rollout"] = {
        "requests": loop.sent, "failed": len(loop.failures),
        "longest_request_s": round(max(loop.durations), 3),
        "median_request_s": round(sorted(loop.durations)[len(loop.durations) // 2], 3),
        "play_seconds": round(run.seconds, 1),
        "out_of_rotation_s": {n: round(watcher.out_seconds(fleet.node_url(n)), 1) for n in NODES},
    }
    print(f"\nrollout: {FIGURES['rollout']}")
    assert loop.sent > 20, f"the loop sent only {loop.sent} requests"
    assert not loop.failures, f"{len(loop.failures)} of {loop.sent} failed: {loop.failures[:5]}"


def test_rerun_after_the_rollout_changes_nothing(fleet: Fleet) -> None:
    """Nothing to change: no node leaves the router, nothing is restarted, changed=0 on every
    host (router included)."""
    labels = {n: docker_inspect(fleet.container(n))["Id"] for n in NODES}  # type: ignore[index]
    run = playbook(fleet.inventory, timeout=600)
    assert run.rc == 0, run.output[-6000:]
    assert _changed(run) == {host: 0 for host in (*NODES, "router")}, _changed_tasks(run)
    assert "Replacing" not in run.output and "is out of the router" not in run.output
    assert {n: docker_inspect(fleet.container(n))["Id"] for n in NODES} == labels  # type: ignore[index]
    FIGURES["rerun seconds"] = round(run.seconds, 1)


def test_node_that_crashes_after_start_is_rolled_back_and_left_out(fleet: Fleet) -> None:
    """node2 passes its gates with the new profile, then crashes inside its stability window:
    it is rolled back to its last good spec and stays out of the router; the play stops there
    naming it (node3 untouched); no request through the router fails."""
    old = {n: fleet.spec_label(n) for n in NODES}
    node3_id = docker_inspect(fleet.container("node3"))["Id"]  # type: ignore[index]
    for node in NODES:
        write_profile(fleet.profile(node), fleet.ports[node], **{"logging.decode_log_interval": 30})
    fleet.host_overrides = {"node2": {
        "server_env": {**BASE_ENV, "SPECSERVE_STANDIN_CRASH_AFTER_SECONDS": "15"},
        # Past the crash: the gates end ~5-8 s after start.
        "server_stability_window_s": 14}}
    fleet.write_inventory()
    try:
        with TimedLoop(f"{fleet.router_url}/generate") as loop:
            run = Background(fleet.inventory).finish(timeout=900)
            time.sleep(1)
        in_rotation = fleet.urls_in_rotation()
    finally:
        fleet.host_overrides = {}
        fleet.write_inventory()
    assert run.rc != 0, run.output[-6000:]
    assert "Node node2 failed its deploy" in run.output, run.output[-6000:]
    assert "stays OUT of the router's rotation" in run.output
    assert "Rolled back to the last good spec" in run.output
    assert in_rotation == {fleet.node_url("node1"), fleet.node_url("node3")}
    assert fleet.spec_label("node1") != old["node1"], "node1 was not rolled"
    assert fleet.spec_label("node2") == old["node2"], "node2 is not back on its last good spec"
    assert http_status(f"{fleet.node_url('node2')}/health_generate") == 200
    assert docker_inspect(fleet.container("node3"))["Id"] == node3_id, "node3 was touched"  # type: ignore[index]
    assert "node3" not in {line.split("]")[0].rsplit("[", 1)[-1]
                           for line in run.output.splitlines() if line.startswith("changed: [")}
    FIGURES["crash"] = {"requests": loop.sent, "failed": len(loop.failures),
                        "longest_request_s": round(max(loop.durations), 3),
                        "play_seconds": round(run.seconds, 1)}
    print(f"\ncrash: {FIGURES['crash']}")
    assert not loop.failures, f"{len(loop.failures)} of {loop.sent} failed: {loop.failures[:5]}"


def test_drain_bound_stops_the_play_before_the_server_is_touched(fleet: Fleet) -> None:
    """A generation longer than router_drain_timeout_s on node1 when its turn comes: node1 is
    out of the router, the play fails naming the bound and the setting, node1's server is not
    restarted, and the generation it was answering completes."""
    before = docker_inspect(fleet.container("node1"))["Id"]  # type: ignore[index]
    write_profile(fleet.profile("node1"), fleet.ports["node1"],
                  **{"logging.decode_log_interval": 25})
    result: dict[str, int] = {}

    def long_generation() -> None:
        request = urllib.request.Request(
            f"{fleet.node_url('node1')}/generate", method="POST",
            data=json.dumps({"text": "long", "sampling_params": {
                "max_new_tokens": 20000, "ignore_eos": True}}).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                result["status"] = response.status
        except urllib.error.HTTPError as exc:
            result["status"] = exc.code

    client = threading.Thread(target=long_generation)
    play = Background(fleet.inventory, "-e", "router_drain_timeout_s=3")
    # Started when node1's drain begins: in flight when the drain looks, longer than its bound.
    play.wait_for("TASK [router : Drain | is the router deployed]", timeout=600)
    client.start()
    run = play.finish(timeout=600)
    in_rotation = fleet.urls_in_rotation()
    client.join(300)
    assert run.rc != 0, run.output[-6000:]
    assert "node1 still answers 1 request(s)" in run.output, run.output[-6000:]
    assert "router_drain_timeout_s" in run.output and "was NOT restarted" in run.output
    assert docker_inspect(fleet.container("node1"))["Id"] == before  # type: ignore[index]
    assert fleet.node_url("node1") not in in_rotation
    assert result.get("status") == 200, f"the in-flight generation ended {result}"
