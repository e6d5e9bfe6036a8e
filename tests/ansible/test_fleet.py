"""The fleet (issue 19 item 1): three stand-in nodes behind SGLang's real router (the pinned
PyPI wheel in specserve/router, docker/router), deployed by the real `ansible-playbook
playbooks/deploy.yml` on the Docker engine, everything on loopback.

While a profile change is rolled across the nodes, a bounded request loop goes through the
router; a watcher reads the router's worker list. Figures (requests, failures, the longest
request, each node's time out of rotation) are printed.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from .fleet_harness import (
    API_KEY,
    BASE_ENV,
    NODES,
    Fleet,
    RotationWatcher,
    TimedLoop,
    changed,
    changed_tasks,
    deployed_fleet,
)
from .harness import Background, docker_inspect, http_status, playbook, write_profile

# The first test carries the first deploy of three nodes and the router (the module fixture).
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with deployed_fleet(tmp_path_factory, "ssf", FIGURES) as dep:
        yield dep


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
    assert changed(run) == {host: 0 for host in (*NODES, "router")}, changed_tasks(run)
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
    play.wait_for("TASK [router : Drain | will the server be replaced]",
                  timeout=600)
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
