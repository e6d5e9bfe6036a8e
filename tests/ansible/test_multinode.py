"""One server over two nodes (issue 19 item 3), deployed by the real ansible-playbook as one unit.

Two stand-in ranks of one multi-node profile on loopback, each its own inventory host in group
specserve_multinode (playbooks/multinode.yml, imported by deploy.yml) with its own rank, port,
state dir and container, on the real Docker engine with host networking. The stand-in behaves
per rank as SGLang does (specserve/standin/ranks.py): both join rank 0's rendezvous, rank 0
serves the API, rank 1 only the dummy health server, and a lost rank takes rank 0 down.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Deployment, _cleanup, new_deployment, require_docker
from .harness import ROOT, docker_inspect, free_port, http_status, playbook

pytestmark = [pytest.mark.docker]

API_KEY = "sk-test-4f1c2a9e7b"  # in the test vault (fixtures/vault.yml)
FAST_ENV = {"SPECSERVE_STANDIN_LOAD_SECONDS": "1", "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.5"}


def _rank_profiles(dep: Deployment, ports: tuple[int, int], rendezvous: int, **server: Any) -> None:
    """The stand-in profile over two nodes, one copy per rank differing in server.port only (on
    real nodes one file serves every rank). No rendezvous host: the deploy supplies rank 0's."""
    base = yaml.safe_load(dep.profile.read_text(encoding="utf-8"))
    multi = yaml.safe_load(
        (ROOT / "tests/fixtures/profiles/multinode-standin-2rank.yaml").read_text("utf-8")
    )
    base["parallelism"] = multi["parallelism"]
    base["nodes"] = {"count": 2, "rendezvous_host": None, "rendezvous_port": rendezvous}
    base["server"].update(server)
    for rank, port in enumerate(ports):
        base["server"]["port"] = port
        path = dep.workdir / "profiles" / f"rank{rank}.yaml"
        path.write_text(yaml.safe_dump(base, sort_keys=False), encoding="utf-8")


def _inventory(
    dep: Deployment,
    rank_env: dict[int, dict[str, str]] | None = None,
    **host_vars: Any,
) -> Path:
    scratch = dep.write_inventory(dep.workdir / "single.yml", {"localhost": {}})
    single = yaml.safe_load(scratch.read_text(encoding="utf-8"))["specserve"]
    local = single["hosts"]["localhost"]
    hosts = {}
    for rank in (0, 1):
        state = dep.workdir / f"rank{rank}"
        hosts[f"rank{rank}"] = {
            **local,
            "ansible_host": "127.0.0.1",
            "specserve_node_rank": rank,
            "specserve_profile": str(dep.workdir / "profiles" / f"rank{rank}.yaml"),
            "specserve_container_name": f"{dep.prefix}-r{rank}",
            "server_state_dir": str(state / "state"),
            "server_profile_host_path": str(state / "etc/profile.yaml"),
            "exporter_profile_dir": str(state / "etc/exporter"),
            "server_secrets_dir": str(state / "secrets"),
            "specserve_log_dir": str(state / "log"),
            "server_env": {**FAST_ENV, **(rank_env or {}).get(rank, {})},
            **host_vars,
        }
    doc = {"specserve_multinode": {"hosts": hosts, "vars": single["vars"]}}
    path = dep.workdir / "multinode.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _generate(port: int) -> dict[str, Any]:
    body = json.dumps({"text": "ping", "sampling_params": {"max_new_tokens": 4}}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/generate", data=body, method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _build_image(context: Path, tag: str, generation: int) -> str:
    """(Re)build a private tag of the stand-in image; its new ID."""
    dockerfile = context / "standin.Dockerfile"
    dockerfile.write_text(
        f"FROM specserve/standin:0.1.0\nLABEL io.specserve.test-generation={generation}\n")
    subprocess.run(["docker", "build", "-q", "-f", str(dockerfile), "-t", tag, str(context)],
                   check=True, capture_output=True)
    return subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag],
                          check=True, capture_output=True, text=True).stdout.strip()


def _ranks(dep: Deployment) -> list[dict[str, Any]]:
    found = [docker_inspect(f"{dep.prefix}-r{rank}") for rank in (0, 1)]
    assert all(found), found
    return [c for c in found if c is not None]


def _names(prefix: str) -> list[str]:
    return subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name=^{prefix}", "--format", "{{.Names}}"],
        capture_output=True, text=True, check=False,
    ).stdout.split()


def _serving(dep: Deployment, ports: tuple[int, int]) -> list[dict[str, Any]]:
    """Both ranks running as one group: rank 0 generates, rank 1 is SGLang's dummy server."""
    ranks = _ranks(dep)
    for rank, container in enumerate(ranks):
        assert container["State"]["Running"], (rank, container["State"])
        assert container["Args"][:2] == ["--node-rank", str(rank)], container["Args"]
        assert container["Args"][2:] == ["--rendezvous-host", "127.0.0.1"], container["Args"]
        # Docker's liveness check: /ready on rank 0, the dummy server's /health on rank 1.
        probe = container["Config"]["Healthcheck"]["Test"][-1]
        assert probe == f"http://127.0.0.1:{ports[rank]}/{'ready' if rank == 0 else 'health'}"
    assert _generate(ports[0])["meta_info"]["completion_tokens"] >= 1
    assert http_status(f"http://127.0.0.1:{ports[1]}/health_generate") == 200
    # No API on rank 1: the gate and the clients belong to rank 0.
    assert http_status(f"http://127.0.0.1:{ports[1]}/v1/models") == 404
    return ranks


# Four real plays of two ranks each (over 2 min per changing play on a loaded machine).
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_multinode_group_is_deployed_gated_on_rank0_and_rolled_back_as_one(
    tmp_path: Path,
) -> None:
    require_docker()
    dep = new_deployment(tmp_path, f"ssm{os.getpid()}")
    ports, rendezvous = (free_port(), free_port()), free_port()
    # A private tag of the stand-in image, rebuilt later under the same tag: the rollback must
    # restore the image each rank was verified with, by ID, not what the tag names by then.
    image = f"{dep.prefix}-standin:1"
    dep.overrides = {"specserve_image": image}
    try:
        first_id = _build_image(tmp_path, image, 1)
        _rank_profiles(dep, ports, rendezvous)
        inventory = _inventory(dep)
        first = playbook(inventory)
        assert first.rc == 0, first.output[-5000:]
        for host in ("rank0", "rank1"):
            assert first.recap(host)["failed"] == 0
        assert f"rank 1 of 2; rendezvous 127.0.0.1:{rendezvous} (rank 0 host ansible_host)" in (
            first.output)
        good = _serving(dep, ports)
        # The exporter (and the gate it feeds) only beside rank 0, the rank with the decode log.
        assert f"{dep.prefix}-r0-exporter" in _names(dep.prefix)
        assert not [n for n in _names(dep.prefix) if n.startswith(f"{dep.prefix}-r1-")]
        logs = subprocess.run(["docker", "logs", f"{dep.prefix}-r1"], capture_output=True,
                              text=True, check=False)
        launched = logs.stdout + logs.stderr
        assert "--nnodes 2" in launched and "--node-rank 1" in launched, launched[-3000:]
        assert f"--dist-init-addr 127.0.0.1:{rendezvous}" in launched

        again = playbook(inventory)
        assert again.rc == 0, again.output[-5000:]
        for host in ("rank0", "rank1"):
            assert again.recap(host)["changed"] == 0, again.output[-5000:]
        assert [c["Id"] for c in _ranks(dep)] == [c["Id"] for c in good]

        # A profile change, rank 1 crashing soon after it passed its health gate while rank 0 still
        # warms up: rank 0 goes down with it and its own gate is the one that notices. The
        # message must still name rank 1, whose loss it was (CI saw this order by chance).
        _rank_profiles(dep, ports, rendezvous, max_running_requests=40)
        crashing = _inventory(dep, {0: {"SPECSERVE_STANDIN_WARMUP_SECONDS": "8"},
                                    1: {"SPECSERVE_STANDIN_CRASH_AFTER_SECONDS": "3"}})
        check = playbook(crashing, "--check", "--diff")
        assert check.rc == 0, check.output[-5000:]
        assert "Would restart every rank of the group" in check.output
        # What would change on each rank, line by line: its launch spec and its profile (not the
        # exporter's copy on rank 0: nothing it reads, draft tokens or baseline, changed).
        changed_arg = "\n-  --max-running-requests 48\n+  --max-running-requests 40\n"
        assert check.output.count(changed_arg) == 2, check.output[-8000:]
        assert check.output.count(
            "\n-  max_running_requests: 48\n+  max_running_requests: 40\n") == 2
        assert [c["Id"] for c in _ranks(dep)] == [c["Id"] for c in good]
        recorded = [(dep.workdir / f"rank{rank}/state/last-good/launch-spec.txt").read_text()
                    for rank in (0, 1)]
        assert all("  --max-running-requests 48\n" in text for text in recorded), recorded

        # The tag is rebuilt too: the failed deploy runs the new image, the rollback the old one.
        rebuilt_id = _build_image(tmp_path, image, 2)
        assert rebuilt_id != first_id and all(c["Image"] == first_id for c in good)

        failed = playbook(crashing)
        assert failed.rc != 0, failed.output[-5000:]
        assert "Multi-node deploy FAILED" in failed.output
        # Seen after every rank's gate, or at its own gate's container check (RestartCount 0
        # required) when Docker had restarted it before that look: named either way.
        named = (f"rank 1 (rank1, {dep.prefix}-r1) passed its health gate, then did not hold"
                 " through every rank's health gate")
        died = f"{dep.prefix}-r1 died right after its health gate passed and Docker restarted it"
        assert named in failed.output or died in failed.output, failed.output[-5000:]
        assert f'rank 0 (rank0, {dep.prefix}-r0) at "Start | the server must be healthy"' in (
            failed.output)
        assert "Every rank was rolled back to its last good spec" in failed.output
        assert "simulated crash (SPECSERVE_STANDIN_CRASH_AFTER_SECONDS=3" in failed.output
        assert "lost rank 1" in failed.output  # rank 0 went down with it, as SGLang's does
        assert failed.recap("rank0")["failed"] == 1 and failed.recap("rank1")["failed"] == 1
        back = _serving(dep, ports)
        for old, new in zip(good, back, strict=True):
            # New containers (the failed ones were replaced) of the old, verified spec.
            assert new["Id"] != old["Id"]
            label = "io.specserve.spec-hash"
            assert new["Config"]["Labels"][label] == old["Config"]["Labels"][label]
            assert "SPECSERVE_STANDIN_CRASH_AFTER_SECONDS=3" not in new["Config"]["Env"]
            assert new["Image"] == first_id, (new["Image"], first_id, rebuilt_id)
        for rank in (0, 1):
            live = dep.workdir / f"rank{rank}/etc/profile.yaml"
            assert "max_running_requests: 48" in live.read_text(encoding="utf-8")
    finally:
        _cleanup(dep.prefix)
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)


def test_a_multinode_profile_outside_the_group_play_is_refused(tmp_path: Path) -> None:
    require_docker()
    dep = new_deployment(tmp_path, f"ssg{os.getpid()}")
    try:
        doc = yaml.safe_load(dep.profile.read_text(encoding="utf-8"))
        multi = yaml.safe_load(
            (ROOT / "tests/fixtures/profiles/multinode-standin-2rank.yaml").read_text("utf-8")
        )
        doc["parallelism"], doc["nodes"] = multi["parallelism"], multi["nodes"]
        dep.profile.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        run = playbook(dep.inventory)
        assert run.rc != 0, run.output[-3000:]
        assert "spans nodes.count 2 nodes" in run.output, run.output[-3000:]
        assert "Fix: put the rank hosts in inventory group specserve_multinode" in run.output
        assert "refused by `specserve check`" not in run.output
        assert "Replacing" not in run.output
        assert _names(dep.prefix) == []
        assert not (dep.workdir / "etc/profile.yaml").exists()
    finally:
        _cleanup(dep.prefix)


def test_ranks_that_do_not_cover_the_group_are_refused(tmp_path: Path) -> None:
    require_docker()
    dep = new_deployment(tmp_path, f"ssr{os.getpid()}")
    try:
        _rank_profiles(dep, (free_port(), free_port()), free_port())
        inventory = _inventory(dep)
        doc = yaml.safe_load(inventory.read_text(encoding="utf-8"))
        doc["specserve_multinode"]["hosts"]["rank1"]["specserve_node_rank"] = 0
        inventory.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        run = playbook(inventory)
        assert run.rc != 0, run.output[-3000:]
        assert "Found ranks rank0=0, rank1=0" in run.output, run.output[-3000:]
        assert "Replacing" not in run.output
        assert _names(dep.prefix) == []
    finally:
        _cleanup(dep.prefix)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_first_deploy_failing_on_one_rank_stops_every_rank(tmp_path: Path) -> None:
    """No last good spec anywhere: no rank is left running, none waiting at a rendezvous."""
    require_docker()
    dep = new_deployment(tmp_path, f"ssf{os.getpid()}")
    try:
        _rank_profiles(dep, (free_port(), free_port()), free_port())
        inventory = _inventory(dep, {1: {"SPECSERVE_STANDIN_CRASH_AFTER_SECONDS": "1"}})
        run = playbook(inventory)
        assert run.rc != 0, run.output[-5000:]
        assert "Multi-node deploy FAILED" in run.output
        assert "rank 1 (rank1," in run.output, run.output[-5000:]
        for rank in (0, 1):
            assert f"seen on rank {rank} (rank{rank})" in run.output
        assert "No last good spec for this rank" in run.output, run.output[-5000:]
        assert "simulated crash (SPECSERVE_STANDIN_CRASH_AFTER_SECONDS=1" in run.output
        # Said only when it is so: each rank's rollback stopped its server and kept it.
        assert "ROLLBACK FAILED" not in run.output, run.output[-8000:]
        assert "still under its name" not in run.output, run.output[-8000:]
        for rank in (0, 1):
            assert docker_inspect(f"{dep.prefix}-r{rank}") is None, (rank, run.output[-8000:])
            kept = docker_inspect(f"{dep.prefix}-r{rank}-prev-1")
            assert kept is not None and not kept["State"]["Running"], rank
            assert kept["HostConfig"]["RestartPolicy"]["Name"] == "no"
    finally:
        _cleanup(dep.prefix)


K3 = ROOT / "profiles" / "kimi-k3-dspark-2x8gpu.yaml"
STANDIN_MODELS = "/usr/share/specserve/tests/fixtures/models"  # the image's ../tests/fixtures


def _k3_rank_profiles(dep: Deployment, ports: tuple[int, int], rendezvous: int) -> None:
    """The shipped Kimi-K3 + DSpark profile on two stand-in ranks: its drafter block, target
    config, parsers, extra_args, env and tuning alternatives as shipped; what only GPUs serve
    replaced (the stand-in's launch command, no GPU, one rank per node: tp = ep = 2 for 16)."""
    doc = yaml.safe_load(K3.read_text(encoding="utf-8"))
    models = "../tests/fixtures/models"
    doc["target"]["path"] = f"{models}/Kimi-K3"
    for block in (doc["drafter"], *doc["tuning"]["methods"]):
        block["path"] = f"{models}/Kimi-K3-DSpark"
    doc["parallelism"] = {"tp": 2, "ep": 2}
    doc["nodes"] = {"count": 2, "rendezvous_host": None, "rendezvous_port": rendezvous}
    doc["gpu"] = {"count": 0, "topology": "any"}
    doc["server"].update(launch_command=["specserve-standin"], host="127.0.0.1")
    doc["server"].pop("mem_fraction_static")
    for rank, port in enumerate(ports):
        doc["server"]["port"] = port
        path = dep.workdir / "profiles" / f"rank{rank}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_kimi_k3_dspark_profile_deploys_as_a_multinode_group(tmp_path: Path) -> None:
    """Issue 29 item 4: the shipped two-node Kimi-K3 profile, its DSPARK drafter block as
    shipped, deployed by the multi-node group play on two stand-in ranks and gated on rank 0."""
    require_docker()
    dep = new_deployment(tmp_path, f"ssk{os.getpid()}")
    ports, rendezvous = (free_port(), free_port()), free_port()
    fixtures = ROOT / "tests" / "fixtures" / "models"
    volumes = [f"{fixtures / name}:{STANDIN_MODELS}/{name}:ro"
               for name in ("Kimi-K3", "Kimi-K3-DSpark")]
    try:
        _k3_rank_profiles(dep, ports, rendezvous)
        run = playbook(_inventory(dep, server_volumes=volumes))
        assert run.rc == 0, run.output[-5000:]
        for host in ("rank0", "rank1"):
            assert run.recap(host)["failed"] == 0
        _serving(dep, ports)
        for rank in (0, 1):
            logs = subprocess.run(["docker", "logs", f"{dep.prefix}-r{rank}"],
                                  capture_output=True, text=True, check=False)
            # The launcher prints the argv one flag a line ("  --flag value \\").
            launched = re.sub(r"\s*\\\n\s*", " ", logs.stdout + logs.stderr)
            for words in ("--speculative-algorithm DSPARK", "--speculative-dspark-block-size 7",
                          "--enable-linear-replayssm-spec", "--tool-call-parser kimi_k3",
                          f"--nnodes 2 --node-rank {rank}"):
                assert words in launched, (rank, words, launched[-3000:])
            # The server ran what SGLang resolves for it: one step verifying gamma + 1 tokens.
            assert "'speculative_num_draft_tokens': 8" in launched, launched[-3000:]
        # Rank 0's decode lines are DSPARK's, read by the exporter beside it.
        log = (dep.workdir / "rank0" / "log" / "sglang.log").read_text(encoding="utf-8")
        assert "Decode batch" in log and "accept len" in log, log[-2000:]
    finally:
        _cleanup(dep.prefix)
