"""Like for like, end to end (issue 18 item 2), against the stand-in on the real Docker engine.

A profile that leaves max_running_requests unset: `playbooks/baseline.yml` starts the
non-speculative server with the cap the speculative one gets from SGLang (48, the stand-in's
resolution derived from the contract) and records it with the other settings; the deploy then
passes `specserve check` like for like. A baseline recorded with another running-request cap,
image or TP is refused by deploy.yml's preflight with the message, and the serving container is
left as it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.standin import STANDIN_NAME
from specserve.upstream import PINNED_VERSION

from .conftest import Deployment, _cleanup, new_deployment, require_docker
from .harness import BIN, FIXTURES, ROOT, Run, docker_inspect, http_status, playbook

# Loaded CI machines: a deploy, the baseline run and a second deploy take minutes.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

FAST = {"SPECSERVE_STANDIN_LOAD_SECONDS": "0.5", "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.3",
        "SPECSERVE_STANDIN_TIME_SCALE": "0.05"}
IMAGE = "specserve/standin:0.1.0"  # the stand-in inventory's specserve_image


def _run(dep: Deployment, play: str, *args: str, timeout: int = 420) -> Run:
    import subprocess
    import time

    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", PYTHONUNBUFFERED="1")
    start = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), f"playbooks/{play}.yml", "-i", str(dep.inventory),
         "--vault-password-file", str(FIXTURES / "vault-password.txt"),
         "-e", f"@{FIXTURES / 'vault.yml'}", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    return Run(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start)


def _doc(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


@pytest.fixture(scope="module")
def likeness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    require_docker()
    work = tmp_path_factory.mktemp("likeness")
    dep = new_deployment(work, f"ssl{os.getpid()}")
    doc = _doc(dep.profile)
    # SGLang's own cap acts: the profile does not write it.
    del doc["server"]["max_running_requests"]
    doc["logging"]["decode_log_interval"] = 10
    dep.profile.write_text(yaml.safe_dump(doc, sort_keys=False))
    dep.overrides = {
        "server_env": FAST,
        "monitoring_enabled": False,
        "tune_runs_dir": str(work / "runs"),
        "tune_baseline_concurrency": [1, 4],
        "tune_bench_max_tokens": 64,
        "tune_bench_requests_per_level": 8,
        "verify_warmup_requests": 1,
        "verify_warmup_max_tokens": 120,
    }
    dep.write_inventory(dep.inventory, {"localhost": {}})
    try:
        run = playbook(dep.inventory, "--skip-tags", "monitoring")
        assert run.rc == 0, run.output[-6000:]
        # The shipped stand-in baseline records nothing: a warning, not a refusal.
        assert "records none of the settings it was measured with" in run.output
        yield dep
    finally:
        _cleanup(dep.prefix)


def test_baseline_runs_with_the_speculative_cap_and_records_its_settings(
    likeness: Deployment,
) -> None:
    run = _run(likeness, "baseline")
    assert run.rc == 0, run.output[-8000:]
    assert "accept length n/a (no speculation)" in run.output
    doc = _doc(likeness.profile)
    recorded = doc["baseline"]
    # baseline-from refuses a run whose server reported another cap than the profile it ran,
    # so 48 here is also what the non-speculative server itself said in /server_info.
    assert recorded["max_running_requests"] == 48
    assert "max_running_requests" not in doc["server"]  # the pin is the baseline variant's only
    assert recorded["image"] == IMAGE
    # What the server reported in /server_info: the stand-in says it is one.
    assert recorded["sglang_version"] == f"{PINNED_VERSION}+{STANDIN_NAME}"
    assert recorded["target"] == doc["target"]["path"]
    assert (recorded["tp"], recorded["dp"], recorded["ep"]) == (1, 1, 1)
    assert recorded["context_length"] is None and recorded["cuda_graph_max_bs"] is None
    assert recorded["disable_cuda_graph"] is False
    assert recorded["nccl_preset"] == "default"
    assert "measured with max_running_requests 48" in run.output
    # The speculative profile with that baseline deploys: check finds it like for like.
    again = playbook(likeness.inventory, "--skip-tags", "monitoring")
    assert again.rc == 0, again.output[-6000:]
    assert "the baseline was measured under other settings" not in again.output
    assert "records none of the settings" not in again.output


UNLIKE = {
    "max_running_requests": (
        32,
        "baseline.max_running_requests = 32 but server.max_running_requests (effective) = 48",
    ),
    "image": ("specserve/standin:0.0.9", "baseline.image = 'specserve/standin:0.0.9' but the "
              f"deploy's server image = '{IMAGE}'"),
    "tp": (2, "baseline.tp = 2 but parallelism.tp = 1"),
}


@pytest.mark.parametrize("setting", list(UNLIKE))
def test_a_deploy_with_an_unlike_baseline_is_refused_before_any_change(
    likeness: Deployment, setting: str, tmp_path: Path
) -> None:
    before = docker_inspect(likeness.prefix)
    assert before is not None and before["State"]["Running"]
    doc = _doc(likeness.profile)
    assert "image" in doc["baseline"], "the baseline test records the settings first"
    value, said = UNLIKE[setting]
    doc["baseline"][setting] = value
    unlike = likeness.profile.parent / f"unlike-{setting}.yaml"
    unlike.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        run = playbook(likeness.inventory, "--skip-tags", "monitoring",
                       "-e", f"specserve_profile={unlike}")  # fmt: skip
    finally:
        unlike.unlink()
    assert run.rc != 0
    assert "is refused by `specserve check`" in run.output, run.output[-6000:]
    assert said in run.output, run.output[-6000:]
    assert "re-run playbooks/baseline.yml" in run.output
    # Refused in preflight: the serving container is the same one, still healthy.
    after = docker_inspect(likeness.prefix)
    assert after is not None and after["Id"] == before["Id"] and after["State"]["Running"]
    assert http_status(f"http://127.0.0.1:{likeness.server_port}/health_generate") == 200
