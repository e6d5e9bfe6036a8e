"""The router is deployment state (issue 26 item 3): two stand-in nodes behind SGLang's real
router (tests/ansible/fleet_harness.py), the real `ansible-playbook playbooks/deploy.yml`, the
Docker engine, loopback only.

A router killed (`docker kill`: Docker's restart policy does not apply) or removed during a
roll is started again by the play, from its rotation; a router whose process crashes is
restarted by Docker and, reading the rotation, does not bring back the node out for its
replacement. While the roll runs, a 1 request/s loop goes through the router and a watcher reads
the router's /readiness: every failed request falls inside the router's own outage. Figures
(requests, failures, the outage) are printed.

Two nodes, not test_fleet.py's three: each scenario acts while node1 is out for its replacement,
with node2 (the rest of the fleet) in the router, and the roll must then go on to node2. A third
node would add a third replacement to every roll and prove nothing more.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from .fleet_harness import (
    API_KEY,
    PREVIOUS_ROUTER_IMAGE,
    ROUTER_IMAGE,
    Fleet,
    Sampler,
    changed,
    changed_tasks,
    deployed_fleet,
)
from .harness import Background, Run, docker_inspect, http_status, playbook, write_profile

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

FIGURES: dict[str, Any] = {}
IDLE = "{node} is out of the router and idle"
JOIN_ROTATION = "TASK [router : Join | into the rotation]"
NODES = ("node1", "node2")


@dataclass
class Upgrade:
    """The fleet's router replaced: sglang-router 0.3.2 (the first deploy's) by the pinned smg,
    under a request loop through the router."""

    before: dict[str, Any]
    after: dict[str, Any]
    run: Run
    loop: Requests
    ready: Readiness


@pytest.fixture(scope="module")
def fleet_upgraded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, Upgrade]]:
    """The fleet first deployed on the router release before smg, then upgraded by the next
    deploy (the inventory's default router_image) while requests go through the router; every
    scenario after runs on the upgraded router."""
    with deployed_fleet(tmp_path_factory, "ssr", FIGURES, NODES,
                        first_deploy={"router_image": PREVIOUS_ROUTER_IMAGE}) as dep:
        before = docker_inspect(dep.router)
        assert before is not None
        with Requests(f"{dep.router_url}/generate") as loop, Readiness(dep) as ready:
            time.sleep(3)  # requests to the previous router first
            run = playbook(dep.inventory, timeout=900)
            time.sleep(3)
        after = docker_inspect(dep.router)
        assert after is not None
        yield dep, Upgrade(before, after, run, loop, ready)


@pytest.fixture(scope="module")
def fleet(fleet_upgraded: tuple[Fleet, Upgrade]) -> Fleet:
    return fleet_upgraded[0]


@dataclass
class Sent:
    start: float
    end: float
    error: str


class Requests(Sampler):
    """One generation a second through the router, each with its send and answer times."""

    BODY = json.dumps({"text": "ping", "sampling_params": {"max_new_tokens": 4}}).encode()

    def __init__(self, url: str, interval: float = 1.0, timeout: float = 5.0) -> None:
        super().__init__()
        self.url, self.interval, self.timeout = url, interval, timeout
        self.join_s = timeout + interval + 5
        self.sent: list[Sent] = []

    def sample(self) -> float:
        start, error = time.monotonic(), ""
        request = urllib.request.Request(
            self.url, data=self.BODY, method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                response.read()
        except (OSError, ValueError) as exc:
            error = str(getattr(exc, "reason", exc))
        self.sent.append(Sent(start, time.monotonic(), error))
        return max(0.0, self.interval - (time.monotonic() - start))

    @property
    def failed(self) -> list[Sent]:
        return [s for s in self.sent if s.error]


class Readiness(Sampler):
    """The router's /readiness every 0.2 s: 200 while it routes to at least one healthy node."""

    def __init__(self, fleet: Fleet) -> None:
        super().__init__()
        self.url = f"{fleet.router_url}/readiness"
        self.samples: list[tuple[float, float, int]] = []  # (sent, answered, status)

    def sample(self) -> float:
        sent = time.monotonic()
        try:
            with urllib.request.urlopen(self.url, timeout=2) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = 0
        self.samples.append((sent, time.monotonic(), status))
        return 0.2

    def ready_after(self, when: float) -> float:
        """When the router was ready again after `when` (it went down at `when`): the first 200
        to a request sent after it. A 200 sent before `when` and timed after it (a starved
        thread) would date the outage's end before its start (CI, b7401b7)."""
        for sent, answered, status in self.samples:
            if sent > when and status == 200:
                return answered
        raise AssertionError(f"the router was not ready again: {self.samples[-5:]}")


def roll(fleet: Fleet, interval: int) -> None:
    """A profile change on every node: the next play replaces each in turn."""
    for node in NODES:
        write_profile(fleet.profile(node), fleet.ports[node],
                      **{"logging.decode_log_interval": interval})


def outage_figures(loop: Requests, down_at: float, ready_at: float) -> dict[str, Any]:
    # A request fails only while the router is down, or registering its nodes again: sent
    # before it was ready (one watcher period of slack), answered after it went down.
    outside = [s for s in loop.failed if not (s.start < ready_at + 1.0 and s.end > down_at)]
    assert not outside, [(round(s.start - down_at, 2), s.error) for s in outside]
    return {"requests": len(loop.sent), "failed": len(loop.failed),
            "router_outage_s": round(ready_at - down_at, 1)}


def wait_until(check: Any, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.2)


def rotation_file(fleet: Fleet) -> list[str]:
    text = (fleet.workdir / "router" / "rotation" / "workers").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_a_fleet_on_the_previous_router_is_upgraded_to_smg(
    fleet_upgraded: tuple[Fleet, Upgrade],
) -> None:
    """A fleet whose router is sglang-router 0.3.2 (the release before smg) upgrades with a
    plain deploy: the router container is replaced by the pinned smg, no node is touched, the
    rotation is kept, and the requests that fail are those of the router's own outage (one
    router on the host's address: the old process must go before the new one binds it).
    Figures printed."""
    fleet, upgrade = fleet_upgraded
    assert upgrade.before["Config"]["Image"] == PREVIOUS_ROUTER_IMAGE
    assert upgrade.after["Config"]["Image"] == ROUTER_IMAGE
    assert upgrade.run.rc == 0, upgrade.run.output[-6000:]
    # What it changed, reported: the router's container, nothing on the nodes.
    assert changed(upgrade.run, NODES) == {"node1": 0, "node2": 0,
                                           "router": upgrade.run.recap("router")["changed"]}
    assert upgrade.run.recap("router")["changed"] > 0
    assert any("Up | container" in task for task in changed_tasks(upgrade.run)), (
        changed_tasks(upgrade.run))
    assert "Replacing" not in upgrade.run.output, "a node was replaced"
    assert fleet.urls_in_rotation() == {fleet.node_url(n) for n in NODES}
    # The outage, from the router's own /readiness: the last 200 before the first answer that
    # was not one, to the first 200 to a request sent after it.
    samples = upgrade.ready.samples
    first_down = next(i for i, (_, _, status) in enumerate(samples) if status != 200)
    down_at = samples[first_down - 1][1] if first_down else samples[0][0]
    ready_at = upgrade.ready.ready_after(samples[first_down][0])
    figures = outage_figures(upgrade.loop, down_at, ready_at)
    assert figures["requests"] >= 10 and upgrade.loop.sent[-1].error == ""
    FIGURES["router upgrade"] = {**figures, "play_seconds": round(upgrade.run.seconds, 1)}
    print(f"\nrouter upgrade 0.3.2 -> smg: {FIGURES['router upgrade']}")

    rerun = playbook(fleet.inventory, timeout=600)
    assert rerun.rc == 0, rerun.output[-6000:]
    assert changed(rerun, NODES) == {host: 0 for host in (*NODES, "router")}, (
        changed_tasks(rerun))


def test_router_killed_mid_roll_is_started_again_by_the_play(fleet: Fleet) -> None:
    """`docker kill` of the router while node1 is out for its replacement: Docker leaves it
    dead; node1's join finds it down, starts it from the rotation (node2), gates it, and the
    roll goes on to node2 in the same run. Every failed request falls inside the
    router's outage; a re-run changes nothing."""
    roll(fleet, 35)
    urls = {fleet.node_url(n) for n in NODES}
    with Requests(f"{fleet.router_url}/generate") as loop, Readiness(fleet) as ready:
        play = Background(fleet.inventory)
        play.wait_for(IDLE.format(node="node1"), timeout=600)
        down_at = time.monotonic()
        subprocess.run(["docker", "kill", fleet.router], check=True, capture_output=True)
        killed = docker_inspect(fleet.router)
        assert killed is not None and not killed["State"]["Running"]
        # Readiness counts from here, once the router is seen dead: `docker kill` took 0.5 s
        # under CI's load, and a 200 to a probe sent before it took effect dated the outage's
        # end before the router had died (fresh-clone run of 54b4a3d).
        killed_at = time.monotonic()
        run = play.finish(timeout=900)
        time.sleep(1)  # requests after the play: the fleet serves through the router
    assert run.rc == 0, run.output[-6000:]
    after = docker_inspect(fleet.router)
    assert after is not None and after["State"]["Running"], "the play did not start the router"
    # Started by the play (Docker does not restart a killed container: RestartCount unchanged).
    assert after["State"]["StartedAt"] > killed["State"]["FinishedAt"]
    assert after["RestartCount"] == killed["RestartCount"]
    assert "node1 is in the router's rotation" in run.output
    assert "node2 is out of the router and idle" in run.output, "the roll stopped at node1"
    assert fleet.urls_in_rotation() == urls
    assert sorted(rotation_file(fleet)) == sorted(urls)
    FIGURES["docker kill"] = {**outage_figures(loop, down_at, ready.ready_after(killed_at)),
                              "play_seconds": round(run.seconds, 1)}
    print(f"\ndocker kill: {FIGURES['docker kill']}")

    rerun = playbook(fleet.inventory, timeout=600)
    assert rerun.rc == 0, rerun.output[-6000:]
    assert changed(rerun, NODES) == {host: 0 for host in (*NODES, "router")}, (
        changed_tasks(rerun))


def test_router_crash_restarted_by_docker_leaves_the_replaced_node_out(fleet: Fleet) -> None:
    """The router's process dies (SIGKILL from the host) while node1 is out for its
    replacement: Docker restarts it, and the restarted router lists node2, never node1, all the
    while node1's new server answers (a router started with every node would have registered
    it within seconds), until node1's join puts it back after its gates. The play goes on to
    node2."""
    roll(fleet, 45)
    # node1 serving a while (its stability window) before its join: the time a router with a
    # static worker list would take to register it again, and more.
    fleet.host_overrides = {"node1": {"server_stability_window_s": 16}}
    fleet.write_inventory()
    before = docker_inspect(fleet.router)
    assert before is not None and before["State"]["Running"]
    node1 = fleet.node_url("node1")
    others = {fleet.node_url("node2")}
    seen: list[tuple[float, set[str], bool]] = []
    try:
        with Requests(f"{fleet.router_url}/generate") as loop, Readiness(fleet) as ready:
            play = Background(fleet.inventory)
            play.wait_for(IDLE.format(node="node1"), timeout=600)
            from_idle = len(play.output)
            assert node1 not in fleet.listed_urls()
            down_at = time.monotonic()
            os.kill(int(before["State"]["Pid"]), signal.SIGKILL)
            wait_until(lambda: (docker_inspect(fleet.router) or {}).get("RestartCount", 0)
                       > before["RestartCount"], "restart by Docker")
            # Until node1's join begins: a sample counts only if the join had not begun when
            # it was taken (the task's header comes before its rotation change and its POST).
            while play.proc.poll() is None:
                try:
                    listed = fleet.listed_urls()
                except (OSError, ValueError):
                    listed = set()
                serving = http_status(f"{node1}/health", timeout=2) == 200
                if JOIN_ROTATION in play.output[from_idle:]:
                    break
                seen.append((time.monotonic(), listed, serving))
                time.sleep(0.25)
            run = play.finish(timeout=900)
            time.sleep(1)
    finally:
        fleet.host_overrides = {}
        fleet.write_inventory()
    assert run.rc == 0, run.output[-6000:]
    assert JOIN_ROTATION in run.output[from_idle:], "the samples were not bounded by the join"
    assert [urls for _, urls, _ in seen if node1 in urls] == [], "node1 was re-added"
    assert any(others <= urls for _, urls, _ in seen), "node2 never registered again"
    serving_at = [at for at, _, serving in seen if serving]
    assert serving_at and serving_at[-1] - serving_at[0] >= 6, (
        f"node1 served only {serving_at[-1] - serving_at[0] if serving_at else 0:.1f} s before "
        "its join: too short to show the restarted router leaves it out")
    assert "node2 is out of the router and idle" in run.output, "the roll stopped at node1"
    assert fleet.urls_in_rotation() == {fleet.node_url(n) for n in NODES}
    FIGURES["router crash"] = {**outage_figures(loop, down_at, ready.ready_after(down_at)),
                               "node1_serving_unlisted_s": round(serving_at[-1] - serving_at[0], 1),
                               "play_seconds": round(run.seconds, 1)}
    print(f"\nrouter crash: {FIGURES['router crash']}")


def test_router_removed_is_recreated_from_the_rotation_before_any_node(fleet: Fleet) -> None:
    """The router container removed (docker rm -f) between deploys, with node2 out of the
    rotation: the next play recreates it before the first node is looked at, with node1 only
    (node2 is put back by its own join, after its checks); the run after that changes
    nothing."""
    rotation = fleet.workdir / "router" / "rotation" / "workers"
    text = rotation.read_text(encoding="utf-8")
    rotation.write_text(text.replace(f"{fleet.node_url('node2')}\n", ""), encoding="utf-8")
    subprocess.run(["docker", "rm", "-f", fleet.router], check=True, capture_output=True)
    play = Background(fleet.inventory)
    # The fleet play begins: the play before it has started the router and waited for it.
    play.wait_for("PLAY [Deploy the fleet, one node at a time behind the router]", timeout=600)
    at_first_node = fleet.listed_urls()
    run = play.finish(timeout=900)
    assert run.rc == 0, run.output[-6000:]
    assert at_first_node == {fleet.node_url("node1")}, at_first_node
    assert run.recap("router")["changed"] > 0
    assert fleet.urls_in_rotation() == {fleet.node_url(n) for n in NODES}
    assert "Replacing" not in run.output, "a node was replaced"
    rerun = playbook(fleet.inventory, timeout=600)
    assert rerun.rc == 0, rerun.output[-6000:]
    assert changed(rerun, NODES) == {host: 0 for host in (*NODES, "router")}, (
        changed_tasks(rerun))


def test_a_lost_rotation_is_rebuilt_from_the_running_router(fleet: Fleet) -> None:
    """The rotation file gone while the router runs (a router deployed before the rotation
    existed is the same case): the next play starts it from the router's own worker list, takes
    no node out and re-registers none (the same worker ids)."""
    rotation = fleet.workdir / "router" / "rotation" / "workers"
    ids = {w["url"]: w["id"] for w in fleet.workers()}
    rotation.unlink()
    run = playbook(fleet.inventory, timeout=600)
    assert run.rc == 0, run.output[-6000:]
    assert sorted(rotation_file(fleet)) == sorted(fleet.node_url(n) for n in NODES)
    assert {w["url"]: w["id"] for w in fleet.workers()} == ids
    assert "is out of the router" not in run.output and "Replacing" not in run.output
