"""The failure matrix, second part (issue 26): state that lies. Against a real stand-in
deployment (real `ansible-playbook`, the Docker engine) under a 1 request/s loop:

- a profile edited by hand on the node, then `docker restart`: drift, not "verified";
- the server killed right after its health gate, Docker restarting it: the stability window
  holds the container to the identity that passed the gate, so the play fails and rolls back;
- a verification record emptied (a crash or a full disk during its write): named, drift;
- the last good records emptied, then a deploy that fails its gate: the rollback brings back
  the container that served before, never nothing, and the next run re-verifies and rewrites
  the records;
- a deploy lock stamped 25 h in the past by another controller of this controller's hostname:
  still held (its age is the node's, not a controller's wall clock; a hostname is no identity);
- a validation container left by a killed play: removed by the next run.

Each scenario ends with a verified server serving and a re-run at changed=0; the figures
(requests sent / failed) go to $SPECSERVE_MATRIX_REPORT as in test_failure_matrix.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from .conftest import Deployment
from .harness import Background, docker_inspect, http_status, playbook, write_profile
from .test_failure_matrix import (
    BASE_ENV,
    _assert_truth,
    _converges,
    _figures,
    _last_good,
    _loop,
    deployed_matrix_node,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployed_matrix_node(tmp_path_factory.mktemp("state"), f"sss{os.getpid()}",
                              "failure matrix (state)", ".state.json") as dep:
        yield dep


def _host_profile(dep: Deployment) -> Path:
    return dep.workdir / "etc/profile.yaml"


def _leftover_validation(dep: Deployment) -> str:
    """A validation container as a SIGKILLed play leaves it (labelled, still there)."""
    name = f"{dep.prefix}-leftover-validate"
    subprocess.run(
        ["docker", "create", "--name", name, "--network", "none",
         "--label", "io.specserve.role=validate", "--label", f"io.specserve.server={dep.prefix}",
         "--entrypoint", "sleep", "specserve/standin:0.1.0", "600"],
        check=True, capture_output=True)
    return name


def test_a_hand_edited_profile_and_docker_restart_is_drift(node: Deployment) -> None:
    before = docker_inspect(node.prefix)
    assert before is not None
    deployed = _host_profile(node).read_text()
    edited = yaml.safe_load(deployed)
    edited["logging"]["decode_log_interval"] = 39
    _host_profile(node).write_text(yaml.safe_dump(edited, sort_keys=False))
    subprocess.run(["docker", "restart", node.prefix], check=True, capture_output=True)
    leftover = _leftover_validation(node)
    with _loop(node) as loop:
        run = playbook(node.inventory)
    assert run.rc == 0, run.output[-6000:]
    assert "profile on the host changed since its deploy" in run.output, run.output[-6000:]
    assert "Replacing" in run.output
    # The dry run first removed what a killed play had left.
    assert "removed 1 validation container(s) left by a killed play" in run.output
    assert docker_inspect(leftover) is None
    after = _assert_truth(node)
    assert after["Id"] != before["Id"]
    assert _host_profile(node).read_text() == deployed
    third = _converges(node)
    _figures("profile edited on the node + docker restart, re-run", loop, run, third)


def test_an_emptied_verification_record_is_named_and_is_drift(node: Deployment) -> None:
    record = node.state_dir / "last-good" / "verified.json"
    record.write_text("")
    with _loop(node) as loop:
        run = playbook(node.inventory)
    assert run.rc == 0, run.output[-6000:]
    assert f"verification record {record} unreadable: empty (0 bytes)" in run.output, (
        run.output[-6000:])
    _assert_truth(node)
    third = _converges(node)
    _figures("verification record emptied, re-run", loop, run, third)


def test_a_server_killed_right_after_its_gate_fails_the_window(node: Deployment) -> None:
    good = _last_good(node)
    old = docker_inspect(node.prefix)
    assert old is not None
    write_profile(node.profile, node.server_port, **{"logging.decode_log_interval": 41})
    try:
        with _loop(node) as loop:
            play = Background(node.inventory)
            play.wait_for("starting the new server (health gate)")
            play.wait_for(f"{node.prefix} healthy after", timeout=180)
            new = docker_inspect(node.prefix)
            assert new is not None and new["Id"] != old["Id"]
            # The server process dies; Docker's restart policy brings it back (RestartCount 1).
            subprocess.run(["kill", "-9", str(new["State"]["Pid"])], check=True)
            run = play.finish()
    finally:
        write_profile(node.profile, node.server_port)
    assert run.rc != 0, run.output[-6000:]
    assert "Rolled back to the last good spec" in run.output, run.output[-6000:]
    # Caught by the window (RestartCount 0 -> 1 against the gate's container), or earlier by
    # the verification gate's requests while it restarted: never recorded.
    assert "RestartCount 0 -> 1" in run.output or '"Verify | the gate"' in run.output
    assert _last_good(node) == good
    _assert_truth(node)
    third = _converges(node)
    _figures("server killed right after its health gate", loop, run, third)


def test_emptied_last_good_records_and_a_failing_deploy_restore_the_previous_server(
    node: Deployment, tmp_path: Path,
) -> None:
    serving = docker_inspect(node.prefix)
    assert serving is not None
    for name in ("spec.json", "profile.yaml"):
        (node.state_dir / "last-good" / name).write_text("")
    extra = tmp_path / "crash.yml"
    extra.write_text(yaml.safe_dump(
        {"server_env": {**BASE_ENV, "SPECSERVE_STANDIN_CRASH_AFTER_SECONDS": "0.3"}}))
    write_profile(node.profile, node.server_port, **{"logging.decode_log_interval": 42})
    try:
        with _loop(node) as loop:
            failed = playbook(node.inventory, "-e", f"@{extra}")
    finally:
        write_profile(node.profile, node.server_port)
    assert failed.rc != 0, failed.output[-6000:]
    assert "did not become healthy" in failed.output
    assert "No readable last good spec on this host" in failed.output, failed.output[-6000:]
    assert f"the previous container {serving['Id'][:12]} is serving again" in failed.output
    restored = docker_inspect(node.prefix)
    assert restored is not None and restored["Id"] == serving["Id"]
    assert restored["State"]["Running"]
    assert restored["HostConfig"]["RestartPolicy"]["Name"] == serving["HostConfig"][
        "RestartPolicy"]["Name"]
    assert http_status(f"http://127.0.0.1:{node.server_port}/health_generate") == 200
    assert "decode_log_interval: 40" in _host_profile(node).read_text()  # the profile it read
    # The next run finds the records unreadable: drift, verified again, records rewritten.
    with _loop(node) as again:
        rerun = playbook(node.inventory)
    assert rerun.rc == 0, rerun.output[-6000:]
    assert "last good record unreadable" in rerun.output, rerun.output[-6000:]
    assert json.loads((node.state_dir / "last-good" / "spec.json").read_text())["image"]
    _assert_truth(node)
    third = _converges(node)
    _figures("last good records emptied + a failing deploy", loop, failed, rerun, third)
    _figures("last good records emptied, re-run", again, rerun)


def test_a_lock_stamped_hours_ago_by_another_controller_is_still_held(node: Deployment) -> None:
    before = docker_inspect(node.prefix)
    assert before is not None
    lock = node.state_dir / "deploy.lock"
    lock.write_text(json.dumps({
        # This controller's hostname on another machine (two controllers in containers).
        "token": "held-elsewhere", "user": "ops", "controller": socket.gethostname(),
        "controller_id": "another-machine/another-boot", "pid": 4242, "pid_start": "1",
        "play": "Deploy specserve", "node": "localhost",
        "since": "2026-12-01T00:00:00+00:00", "since_epoch": time.time() - 25 * 3600}))
    try:
        run = playbook(node.inventory, "-e", "server_lock_wait_s=0")
        held = json.loads(lock.read_text())["token"] if lock.exists() else None
    finally:
        lock.unlink(missing_ok=True)
    assert run.rc != 0
    assert "Another deploy is running on localhost: the deploy lock" in run.output, (
        run.output[-4000:])
    assert held == "held-elsewhere"
    after = docker_inspect(node.prefix)
    assert after is not None and after["Id"] == before["Id"]
    _converges(node)
