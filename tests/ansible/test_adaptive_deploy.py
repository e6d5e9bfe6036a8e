"""A profile asking for adaptive speculation, deployed by the real ansible-playbook on the Docker
engine: the launcher renders --speculative-adaptive, the stand-in runs SGLang's step policy, and
the exporter reads the switch from the profile (--profile) and takes the draft-token count from
the server's log."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import Deployment
from .harness import docker_inspect, http_get, playbook, write_profile

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_an_adaptive_profile_deploys_with_an_exporter_that_follows_the_server(
    deployment: Deployment,
) -> None:
    write_profile(deployment.profile, deployment.server_port, **{"drafter.adaptive": True})
    run = playbook(deployment.inventory)
    assert run.rc == 0, run.output[-6000:]
    logs = subprocess.run(
        ["docker", "logs", deployment.prefix], capture_output=True, text=True, check=False
    )
    output = logs.stdout + logs.stderr
    # The launcher printed the rendered command; the stand-in started SGLang's policy.
    assert "--speculative-adaptive" in output
    assert "AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]" in output
    exporter = docker_inspect(f"{deployment.prefix}-exporter")
    # The exporter was re-created on the changed profile and reads the switch from it.
    assert exporter is not None and "--profile" in exporter["Config"]["Cmd"]
    metrics = http_get(f"http://127.0.0.1:{deployment.exporter_port}/metrics")
    assert "specserve_speculative_adaptive 1.0" in metrics
    assert "specserve_speculative_adaptive_switches_total" in metrics
