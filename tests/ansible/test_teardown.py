"""Two stand-in deployments side by side on one Docker engine, the second named with the first's
name as its prefix (`<a>` and `<a>-b`, the trap a prefix match falls into):

- `--check --diff` on the first shows what would change, line by line (the command's argument,
  the profile's key), and changes nothing;
- the second runs private images; rebuilt under the same tags, the next deploy reports the
  server's and the exporter's images as drift and replaces both, and the deploy after that is
  changed=0; rebuilt again into a server that dies at start, the deploy fails its gate and the
  rollback restores the verified image by ID, which the tag no longer names;
- `playbooks/teardown.yml` on the first (check mode, then for real, then again) removes every
  container of the first and none of the second, which keeps serving.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import Deployment, _cleanup, new_deployment, require_docker
from .harness import (
    BIN,
    FIXTURES,
    ROOT,
    Background,
    Run,
    docker_inspect,
    http_status,
    playbook,
    write_profile,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SKIP_MONITORING = ("--skip-tags", "monitoring")


@dataclass
class Pair:
    a: Deployment
    b: Deployment
    images: dict[str, str]  # the second deployment's private tags: standin, exporter
    context: Path


def _build(pair: Pair, generation: int, standin_env: str = "") -> dict[str, str]:
    """(Re)build the second deployment's images under the same tags; their new IDs.
    `standin_env`: an ENV line for the stand-in image (a broken build)."""
    ids = {}
    for kind, base in (("standin", "specserve/standin:0.1.0"),
                       ("exporter", "specserve/exporter:0.1.0")):
        dockerfile = pair.context / f"{kind}.Dockerfile"
        extra = f"ENV {standin_env}\n" if standin_env and kind == "standin" else ""
        dockerfile.write_text(
            f"FROM {base}\nLABEL io.specserve.test-generation={generation}\n{extra}")
        subprocess.run(["docker", "build", "-q", "-f", str(dockerfile), "-t", pair.images[kind],
                        str(pair.context)], check=True, capture_output=True)
        ids[kind] = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", pair.images[kind]],
            check=True, capture_output=True, text=True).stdout.strip()
    return ids


def _teardown(dep: Deployment, *args: str) -> Run:
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "playbooks/teardown.yml", "-i", str(dep.inventory),
         "--vault-password-file", str(FIXTURES / "vault-password.txt"), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    return Run(proc.returncode, proc.stdout + proc.stderr, 0.0)


def _names() -> set[str]:
    return set(subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"],
                              capture_output=True, text=True, check=True).stdout.split())


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    require_docker()
    name = f"sstd{os.getpid()}"
    a = new_deployment(tmp_path_factory.mktemp("first"), name)
    b = new_deployment(tmp_path_factory.mktemp("second"), f"{name}-b")
    context = tmp_path_factory.mktemp("images")
    images = {"standin": f"{name}-b-standin:1", "exporter": f"{name}-b-exporter:1"}
    pair = Pair(a, b, images, context)
    b.overrides = {"specserve_image": images["standin"],
                   "specserve_exporter_image": images["exporter"],
                   "monitoring_enabled": False,
                   "monitoring_export_dir": str(b.workdir / "monitoring-export")}
    b.write_inventory(b.inventory, {"localhost": {}})
    try:
        _build(pair, 1)
        # Side by side, at the same time: the first with its monitoring, the second without.
        plays = [Background(a.inventory), Background(b.inventory)]
        runs = [play.finish() for play in plays]
        for run in runs:
            assert run.rc == 0, run.output[-6000:]
        yield pair
    finally:
        _cleanup(name)  # both: the second's names start with the first's
        subprocess.run(["docker", "rmi", *images.values()], capture_output=True, check=False)


# Two deployments' plays in one test: under a loaded 2-core run it went past the 300 s default
# (CI at 809b8b7, load average near 12), not for a fault.
@pytest.mark.timeout(900)
def test_check_diff_shows_the_launch_spec_and_the_profile_line_by_line(pair: Pair) -> None:
    a = pair.a
    before = docker_inspect(a.prefix)
    assert before is not None
    spec_file = a.state_dir / "last-good" / "launch-spec.txt"
    recorded = spec_file.read_text()
    # The launch spec the deploy recorded: the image by ID and the command, one line each.
    assert f"image id: {before['Image']}" in recorded
    assert "  --decode-log-interval 40\n" in recorded
    assert "  --speculative-num-steps 3\n" in recorded
    live = (a.workdir / "etc/profile.yaml").read_text()
    write_profile(a.profile, a.server_port, **{"logging.decode_log_interval": 41})
    try:
        run = playbook(a.inventory, "--check", "--diff", *SKIP_MONITORING)
    finally:
        write_profile(a.profile, a.server_port)
    assert run.rc == 0, run.output[-6000:]
    assert "Would replace" in run.output and "spec changed" in run.output
    # What would change in the server's command line and in the profile, not two hashes.
    assert "\n-  --decode-log-interval 40\n+  --decode-log-interval 41\n" in run.output, (
        run.output[-6000:])
    assert "\n-  decode_log_interval: 40\n+  decode_log_interval: 41\n" in run.output
    assert "-profile sha256: " in run.output and "+profile sha256: " in run.output
    # Nothing changed: the same container, the recorded spec and the host's profile as they were.
    after = docker_inspect(a.prefix)
    assert after is not None and after["Id"] == before["Id"]
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]
    assert spec_file.read_text() == recorded
    assert (a.workdir / "etc/profile.yaml").read_text() == live
    assert not (a.state_dir / "deploy-in-progress.json").exists()


def test_a_rebuilt_image_is_drift_and_replaced(pair: Pair) -> None:
    b = pair.b
    server, exporter = docker_inspect(b.prefix), docker_inspect(f"{b.prefix}-exporter")
    assert server is not None and exporter is not None
    new = _build(pair, 2)
    assert new["standin"] != server["Image"] and new["exporter"] != exporter["Image"]
    run = playbook(b.inventory, *SKIP_MONITORING)
    assert run.rc == 0, run.output[-6000:]
    assert (f"image rebuilt ({pair.images['standin']} is now {new['standin'][7:19]}, the "
            f"container runs {server['Image'][7:19]})") in run.output, run.output[-6000:]
    assert (f"{b.prefix}-exporter runs {exporter['Image'][7:19]}, and {pair.images['exporter']} "
            f"now resolves to {new['exporter'][7:19]}") in run.output
    replaced = docker_inspect(b.prefix)
    assert replaced is not None and replaced["Id"] != server["Id"]
    assert replaced["Image"] == new["standin"]
    recreated = docker_inspect(f"{b.prefix}-exporter")
    assert recreated is not None and recreated["Image"] == new["exporter"]
    record = json.loads((b.state_dir / "last-good" / "verified.json").read_text())
    assert record["container_id"] == replaced["Id"] and record["image_id"] == new["standin"]
    assert f"image id: {new['standin']}" in (
        b.state_dir / "last-good" / "launch-spec.txt").read_text()
    # The same IDs: nothing to do.
    again = playbook(b.inventory, *SKIP_MONITORING)
    assert again.rc == 0, again.output[-6000:]
    assert again.recap()["changed"] == 0, again.output[-6000:]
    assert "Replacing" not in again.output and "re-creating it" not in again.output


def test_a_rebuilt_image_that_fails_is_rolled_back_to_the_verified_image_by_id(
    pair: Pair,
) -> None:
    """The tag is rebuilt into an image whose server dies at start: the deploy replaces the
    server (drift), the new one fails its gate, and the rollback restores the image the server
    was verified with, by ID, which the tag no longer names."""
    b = pair.b
    server = docker_inspect(b.prefix)
    assert server is not None
    verified = json.loads((b.state_dir / "last-good" / "verified.json").read_text())
    assert verified["image_id"] == server["Image"]
    broken = _build(pair, 3, standin_env="SPECSERVE_STANDIN_CRASH_AFTER_SECONDS=0")
    assert broken["standin"] != server["Image"]
    run = playbook(b.inventory, *SKIP_MONITORING)
    assert run.rc != 0, run.output[-6000:]
    assert f"image rebuilt ({pair.images['standin']} is now {broken['standin'][7:19]}" in (
        run.output)
    assert "Rolled back to the last good spec" in run.output, run.output[-6000:]
    assert f"image {server['Image']}" in run.output  # the message names the ID it restored
    restored = docker_inspect(b.prefix)
    assert restored is not None and restored["Id"] != server["Id"]
    assert restored["Image"] == server["Image"] != broken["standin"]
    assert restored["State"]["Running"] and restored["RestartCount"] == 0
    assert http_status(f"http://127.0.0.1:{b.server_port}/health_generate") == 200
    after = json.loads((b.state_dir / "last-good" / "verified.json").read_text())
    assert after["container_id"] == restored["Id"] and after["image_id"] == server["Image"]


def test_teardown_removes_this_deployment_and_no_other(pair: Pair) -> None:
    a, b = pair.a, pair.b
    first = {a.prefix, f"{a.prefix}-exporter", f"{a.prefix}-prometheus",
             f"{a.prefix}-alertmanager"}
    second = {b.prefix, f"{b.prefix}-exporter", f"{b.prefix}-prev-1"}
    assert first | second <= _names()
    # Every container of the first (whatever the monitoring role runs): its name, or its name
    # and a suffix; the second's names start with the first's too, and are not among them.
    ours = {n for n in _names() if n == a.prefix or (
        n.startswith(f"{a.prefix}-") and n != b.prefix and not n.startswith(f"{b.prefix}-"))}
    assert first <= ours
    kept = {n: docker_inspect(n)["Id"] for n in second}  # type: ignore[index]
    check = _teardown(a, "--check")
    assert check.rc == 0, check.output[-6000:]
    assert check.recap()["changed"] > 0, check.output[-6000:]
    assert f"Would remove {len(ours)} container(s) of {a.prefix}" in check.output
    assert ours <= _names(), "check mode removed something"
    run = _teardown(a)
    assert run.rc == 0, run.output[-6000:]
    assert f"Removed {len(ours)} container(s) of {a.prefix}" in run.output, run.output[-3000:]
    assert not ours & _names()
    assert {n: docker_inspect(n)["Id"] for n in second} == kept  # type: ignore[index]
    assert http_status(f"http://127.0.0.1:{b.server_port}/health_generate") == 200
    assert not (a.state_dir / "deploy.lock").exists()
    again = _teardown(a)
    assert again.rc == 0 and again.recap()["changed"] == 0, again.output[-3000:]
    assert f"Removed 0 container(s) of {a.prefix}" in again.output
