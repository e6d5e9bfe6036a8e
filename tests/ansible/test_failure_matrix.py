"""The failure matrix (issue 16): each failure, interruption and race against a real stand-in
deployment (real `ansible-playbook`, the Docker engine), while a 1 request/s loop on loopback
counts what a client sees. After each scenario a verified server is serving, last good is true,
a re-run converges to changed=0, and the play's exit status and message told the truth.

The scenarios run in order on one deployment (each leaves it verified for the next). The
figures (requests sent / failed per scenario) are printed and written to
$SPECSERVE_MATRIX_REPORT when set; docs/reliability.md quotes a measured run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from .conftest import Deployment, _cleanup, new_deployment, require_docker
from .harness import (
    Background,
    RequestLoop,
    Run,
    docker_inspect,
    http_status,
    playbook,
    write_profile,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

API_KEY = "sk-test-4f1c2a9e7b"  # in the test vault (fixtures/vault.yml)
# The stand-in five times faster (its time scale: a decode line every ~0.1 s under load) and a
# short stability window; the crash scenario widens the window past the crash.
BASE_ENV = {"SPECSERVE_STANDIN_LOAD_SECONDS": "1", "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.5",
            "SPECSERVE_STANDIN_TIME_SCALE": "0.2",
            "SPECSERVE_STANDIN_BEHAVIOUR_FILE": "/etc/standin/behaviour.yaml"}
FIGURES: dict[str, dict[str, object]] = {}


def matrix_deployment(workdir: Path, prefix: str) -> Deployment:
    """The matrix's stand-in deployment settings (test_failure_state.py uses them too)."""
    dep = new_deployment(workdir, prefix)
    # A behaviour file the servers re-read when it changes: how the restored last good server
    # is made to fail its own gate in the last scenario.
    behaviour = dep.workdir / "behaviour.yaml"
    behaviour.write_text("acceptance: 0.6\n")
    behaviour.chmod(0o644)
    dep.overrides = {
        "server_env": BASE_ENV,
        "server_volumes": [f"{behaviour}:/etc/standin/behaviour.yaml:ro"],
        "server_stability_window_s": 4,
        "server_stability_poll_s": 0.5,
        "monitoring_enabled": False,
        "monitoring_export_dir": str(dep.workdir / "monitoring-export"),
    }
    dep.write_inventory(dep.inventory, {"localhost": {}})
    return dep


@contextmanager
def deployed_matrix_node(workdir: Path, prefix: str, what: str,
                         report_suffix: str = "") -> Iterator[Deployment]:
    """A stand-in node deployed and checked against its own records; at the end the scenarios'
    figures printed (and written to $SPECSERVE_MATRIX_REPORT + report_suffix when set) and its
    containers removed. The module fixture of this file and of test_failure_state.py."""
    require_docker()
    dep = matrix_deployment(workdir, prefix)
    try:
        run = playbook(dep.inventory)
        assert run.rc == 0, run.output[-6000:]
        _assert_truth(dep)
        yield dep
    finally:
        report = json.dumps(FIGURES, indent=2, sort_keys=True)
        print(f"\n{what} figures:\n" + report)
        if os.environ.get("SPECSERVE_MATRIX_REPORT"):
            Path(os.environ["SPECSERVE_MATRIX_REPORT"] + report_suffix).write_text(report + "\n")
        _cleanup(dep.prefix)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployed_matrix_node(tmp_path_factory.mktemp("matrix"), f"ssm{os.getpid()}",
                              "failure matrix") as dep:
        yield dep


def _last_good(dep: Deployment) -> str:
    return (dep.state_dir / "last-good" / "spec-hash").read_text().strip()


def _assert_truth(dep: Deployment) -> dict:
    """A verified server is serving and the record says so: the running container is the last
    good spec, the one the verification record names, not restarted since, answering."""
    info = docker_inspect(dep.prefix)
    assert info is not None and info["State"]["Running"], "no server running"
    assert not info["State"]["Restarting"]
    record = json.loads((dep.state_dir / "last-good" / "verified.json").read_text())
    assert record["container_id"] == info["Id"], "the running container is not the verified one"
    assert record["restart_count"] == info["RestartCount"]
    label = info["Config"]["Labels"]["io.specserve.spec-hash"]
    assert record["spec_hash"] == label == _last_good(dep)
    assert http_status(f"http://127.0.0.1:{dep.server_port}/health_generate") == 200
    assert not (dep.state_dir / "deploy-in-progress.json").exists()
    assert not (dep.state_dir / "deploy.lock").exists(), "the deploy lock was not released"
    _assert_no_strays(dep)
    return info


def _assert_no_strays(dep: Deployment) -> None:
    """Every container of the server's name is the server or a kept predecessor that really ran
    (labelled, started once), at most server_keep_previous (2) of them."""
    names = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name=^{dep.prefix}", "--format", "{{.Names}}"],
        capture_output=True, text=True, check=True).stdout.split()
    servers = [n for n in names if n == dep.prefix or n.startswith(f"{dep.prefix}-prev-")]
    assert set(servers) <= {dep.prefix, f"{dep.prefix}-prev-1", f"{dep.prefix}-prev-2"}, names
    for name in servers:
        info = docker_inspect(name)
        assert info is not None
        assert info["Config"]["Labels"].get("io.specserve.spec-hash"), f"{name} is unlabeled"
        assert not info["State"]["StartedAt"].startswith("0001-"), f"{name} never started"
        if name != dep.prefix:
            assert info["HostConfig"]["RestartPolicy"]["Name"] == "no"


def _converges(dep: Deployment) -> Run:
    run = playbook(dep.inventory)
    assert run.rc == 0, run.output[-6000:]
    assert run.recap()["changed"] == 0, run.output[-6000:]
    assert "Replacing" not in run.output
    _assert_truth(dep)
    return run


def _loop(dep: Deployment) -> RequestLoop:
    return RequestLoop(f"http://127.0.0.1:{dep.server_port}/generate", API_KEY)


def _figures(name: str, loop: RequestLoop, *runs: Run) -> None:
    FIGURES[name] = {"requests": loop.sent, "failed": loop.failed,
                     "plays": [{"rc": r.rc, "seconds": round(r.seconds, 1)} for r in runs]}


@pytest.mark.parametrize(
    ("extra_args", "judge", "said"),
    [
        # The image's own parser: `specserve check` knows the flag, not that its value is no int.
        (["--chunked-prefill-size", "abc"], "the image's SGLang parser",
         "specserve-standin: error: argument --chunked-prefill-size: invalid int value: 'abc'"),
        # SGLang's option table, on the controller, before anything reaches the host.
        (["--no-such-flag", "1"], "specserve check",
         "--no-such-flag is not an option of SGLang"),
    ],
    ids=["value-the-image-parser-refuses", "flag-check-refuses"],
)
def test_refused_argv_stops_the_play_with_zero_downtime(
    matrix: Deployment, extra_args: list[str], judge: str, said: str
) -> None:
    """Validate before stopping: an argv refused by specserve check or by the new image's own
    parser (a dry run in a throwaway container) fails the play before the old server is
    touched: the same container keeps serving, no request fails, nothing is recorded."""
    before = _assert_truth(matrix)
    good, text = _last_good(matrix), matrix.profile.read_text()
    write_profile(matrix.profile, matrix.server_port, **{"server.extra_args": extra_args})
    try:
        with _loop(matrix) as loop:
            run = playbook(matrix.inventory)
            after = _assert_truth(matrix)
    finally:
        matrix.profile.write_text(text)
    assert run.rc != 0
    assert said in run.output, run.output[-6000:]
    if judge == "specserve check":
        assert "refused by `specserve check`" in run.output
    else:
        assert "refuses profile standin-cpu (its launcher's dry run in a throwaway" in run.output
        assert "was not touched and keeps serving" in run.output
    assert "Stop | " not in run.output and "Rollback" not in run.output
    assert after["Id"] == before["Id"]
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]
    assert _last_good(matrix) == good
    assert loop.failed == 0, f"{loop.failed} of {loop.sent} requests failed"
    # This deployment's only: other test files deploy (and validate) at the same time.
    ours = ["docker", "ps", "-a", "--format", "{{.Names}}",
            "--filter", f"label=io.specserve.server={matrix.prefix}"]
    leftovers = subprocess.run([*ours, "--filter", "label=io.specserve.role=validate"],
                               capture_output=True, text=True, check=True).stdout.split()
    assert leftovers == [], "the throwaway validation container was left behind"
    # The filter finds what this deployment labels so (its exporter), so the empty list above
    # is not a filter that matches nothing.
    labelled = subprocess.run(ours, capture_output=True, text=True, check=True).stdout.split()
    assert labelled, "no container carries io.specserve.server=" + matrix.prefix
    rerun = _converges(matrix)
    _figures(f"argv refused by {judge}", loop, run, rerun)


def test_crash_20s_after_start_is_rolled_back(matrix: Deployment, tmp_path: Path) -> None:
    """Passes the health and verification gates, crashes 20 s after start: the stability window
    catches it, the deploy fails and rolls back, last good is not touched."""
    good = _last_good(matrix)
    extra = tmp_path / "crash.yml"
    extra.write_text(yaml.safe_dump({
        "server_env": {**BASE_ENV, "SPECSERVE_STANDIN_CRASH_AFTER_SECONDS": "20"},
        # Past the crash: the gates end ~5-8 s after start.
        "server_stability_window_s": 18,
    }))
    with _loop(matrix) as loop:
        run = playbook(matrix.inventory, "-e", f"@{extra}")
        assert run.rc != 0, run.output[-6000:]
        assert "gate passed" in run.output  # the gates alone would have recorded it
        assert "Stability window FAILED" in run.output and "server_stability_window_s" in run.output
        assert "Rolled back to the last good spec" in run.output and "verified" in run.output
        assert "Not recorded as last good" in run.output
        assert _last_good(matrix) == good
        _assert_truth(matrix)
    rerun = _converges(matrix)
    _figures("crash 20 s after start", loop, run, rerun)


def _change(dep: Deployment, interval: int) -> None:
    write_profile(dep.profile, dep.server_port, **{"logging.decode_log_interval": interval})


def test_sigkill_during_verify_then_rerun(matrix: Deployment) -> None:
    good = _last_good(matrix)
    _change(matrix, 20)
    with _loop(matrix) as loop:
        play = Background(matrix.inventory)
        play.wait_for("Verify | warm-up requests")
        play.signal(signal.SIGKILL)
        killed = play.finish()
        assert killed.rc == -signal.SIGKILL
        # Killed before the stability window: nothing recorded, the lock left behind.
        assert _last_good(matrix) == good
        assert (matrix.state_dir / "deploy.lock").exists()
        rerun = playbook(matrix.inventory)
        assert rerun.rc == 0, rerun.output[-6000:]
        assert "took over a stale deploy lock" in rerun.output and "is gone on" in rerun.output
        assert "did not finish: it was interrupted while verifying the new server" in rerun.output
        assert "not verified (container" in rerun.output
        info = _assert_truth(matrix)
        assert _last_good(matrix) != good
        assert info["Config"]["Labels"]["io.specserve.spec-hash"] == _last_good(matrix)
    third = _converges(matrix)
    _figures("SIGKILL during verify, re-run", loop, killed, rerun, third)


def test_two_deploys_at_once(matrix: Deployment) -> None:
    _change(matrix, 30)
    with _loop(matrix) as loop:
        first = Background(matrix.inventory)
        first.wait_for("Replacing ")
        refused = playbook(matrix.inventory, "-e", "server_lock_wait_s=0")
        waiting = Background(matrix.inventory)
        done = first.finish()
        after = waiting.finish()
    assert refused.rc != 0
    assert "Another deploy is running on localhost: the deploy lock" in refused.output
    assert "server_lock_wait_s = 0" in refused.output and "since" in refused.output
    assert refused.recap()["changed"] == 0 and "Replacing" not in refused.output
    assert done.rc == 0, done.output[-6000:]
    assert after.rc == 0, after.output[-6000:]
    assert "deploy lock held by" in after.output and "waiting" in after.output
    assert after.recap()["changed"] == 0 and "Replacing" not in after.output
    _assert_truth(matrix)
    third = _converges(matrix)
    _figures("two deploys at once", loop, done, refused, after, third)


class LongGenerations:
    """Back-to-back long generations (one at a time): whenever the old server gets its SIGTERM,
    one is running, and the stand-in lets it finish before it exits (bounded, 10 s), so the
    swap is still waiting for the old server's processes when the test interrupts it."""

    def __init__(self, dep: Deployment) -> None:
        self.url = f"http://127.0.0.1:{dep.server_port}/generate"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LongGenerations:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        body = json.dumps({"text": "long", "sampling_params": {
            "max_new_tokens": 4000, "ignore_eos": True}}).encode()
        while not self._stop.is_set():
            request = urllib.request.Request(self.url, data=body, method="POST", headers={
                "Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    response.read()
            except OSError:
                self._stop.wait(0.2)


def test_sigint_right_after_the_stop_then_rerun(matrix: Deployment) -> None:
    """Ctrl-C between the old server's stop and the new one's start: the swap is waiting for
    the old server's processes (a long generation drains) when the play is interrupted."""
    good = _last_good(matrix)
    old = docker_inspect(matrix.prefix)
    assert old is not None
    _change(matrix, 45)  # not 40: the stand-in profile's own value, no change alone
    with _loop(matrix) as loop:
        with LongGenerations(matrix):
            play = Background(matrix.inventory)
            play.wait_for(f"old server {old['Id'][:12]} (pid, status): ")
            play.signal(signal.SIGINT)
            interrupted = play.finish()
        assert interrupted.rc != 0
        assert "User interrupted execution" in interrupted.output
        assert f"started {matrix.prefix} (" not in interrupted.output  # interrupted before it
        # Not only Ansible's one line: the state the node is in, and the command that converges.
        assert ("specserve: localhost: interrupted while the old server was being stopped and the"
                " new one started: the node may have NO server running") in interrupted.output, (
                    interrupted.output[-3000:])
        assert "to converge, run the same play again: ansible-playbook playbooks/deploy.yml" in (
            interrupted.output)
        assert _last_good(matrix) == good
        rerun = playbook(matrix.inventory)
        assert rerun.rc == 0, rerun.output[-6000:]
        assert ("did not finish: it was interrupted while replacing the server (stopping the old "
                "one, starting the new one)") in rerun.output, rerun.output[-6000:]
        _assert_truth(matrix)
        # The interrupted play's stopped container is kept with its logs, not re-created.
        kept = subprocess.run(["docker", "logs", f"{matrix.prefix}-prev-1"], capture_output=True,
                              text=True, check=False)
        assert "specserve-launch" in kept.stdout + kept.stderr
    third = _converges(matrix)
    _figures("SIGINT right after the stop, re-run", loop, interrupted, rerun, third)


def test_rollback_that_fails_its_own_gate_says_so(matrix: Deployment, tmp_path: Path) -> None:
    """The new server crashes at once; the restored last good server then fails its own
    verification gate (accept length 1.00): the play prints the first failure's evidence, the
    rollback's failure and the state it left, and records nothing. A re-run converges."""
    good = _last_good(matrix)
    behaviour = matrix.workdir / "behaviour.yaml"
    extra = tmp_path / "crash.yml"
    extra.write_text(yaml.safe_dump({
        "server_env": {**BASE_ENV, "SPECSERVE_STANDIN_CRASH_AFTER_SECONDS": "0.3"}}))
    behaviour.write_text("acceptance: 0.0\n")
    try:
        with _loop(matrix) as loop:
            run = playbook(matrix.inventory, "-e", f"@{extra}")
    finally:
        behaviour.write_text("acceptance: 0.6\n")
    assert run.rc != 0
    assert "did not become healthy: crashed" in run.output
    assert "server_health_budget_s" in run.output
    assert "Offending lines of the failed server's log" in run.output
    assert 'ROLLBACK FAILED at "Verify | the gate"' in run.output, run.output[-6000:]
    assert "The node is NOT serving a verified server. State left:" in run.output
    assert "Rolled back to the last good spec" not in run.output
    assert _last_good(matrix) == good
    record = json.loads((matrix.state_dir / "last-good" / "verified.json").read_text())
    info = docker_inspect(matrix.prefix)
    assert info is not None and record["container_id"] != info["Id"]  # not claimed verified
    with _loop(matrix) as again:
        rerun = playbook(matrix.inventory)
    assert rerun.rc == 0, rerun.output[-6000:]
    assert "not verified (container" in rerun.output
    _assert_truth(matrix)
    third = _converges(matrix)
    _figures("rollback fails its own gate", loop, run)
    _figures("  ... its re-run", again, rerun, third)
