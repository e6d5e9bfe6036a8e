"""Only tests marked `docker` reach the Docker engine (tests/conftest.py), which is what lets
`scripts/test-fast` run `-m "not docker"` on a machine without one."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import NO_ENGINE


def _engine_answers() -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                          capture_output=True, text=True, timeout=60, check=False)


def test_an_unmarked_test_cannot_reach_the_engine() -> None:
    assert os.environ["DOCKER_HOST"] == NO_ENGINE
    run = _engine_answers()
    assert run.returncode != 0, run.stdout
    assert "nonexistent" in run.stderr, run.stderr


@pytest.mark.docker
def test_a_marked_test_reaches_the_engine() -> None:
    assert os.environ.get("DOCKER_HOST") != NO_ENGINE
    run = _engine_answers()
    assert run.returncode == 0 and run.stdout.strip(), run.stderr
