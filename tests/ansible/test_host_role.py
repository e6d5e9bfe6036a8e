"""The host role registers the NVIDIA runtime with Docker only when the profile asks for GPUs and
Docker lacks it, keeping the rest of daemon.json, and restarts Docker only through its handler.

No NVIDIA toolkit can be installed here and restarting the test machine's Docker engine would
stop every other test's containers, so the change path runs in check mode with --diff against a
daemon.json of the test's own: the real probe (docker_host_info on the real engine, which has no
NVIDIA runtime), the real merge, and the handler notification are what is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .harness import BIN, ROOT


def run_host_role(tmp_path: Path, gpu_count: int, *args: str) -> subprocess.CompletedProcess[str]:
    daemon_json = tmp_path / "daemon.json"
    playbook = tmp_path / "host.yml"
    playbook.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  vars:\n"
        f"    specserve_facts: {{name: test-profile, gpu_count: {gpu_count}}}\n"
        f"    host_docker_daemon_json: {daemon_json}\n"
        "  roles:\n"
        "    - host\n"
    )
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [str(BIN / "ansible-playbook"), str(playbook), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={BIN / 'python'}", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )


@pytest.mark.docker  # the probe asks the real engine for its runtimes
def test_gpu_profile_adds_the_nvidia_runtime_and_notifies_the_restart(tmp_path: Path) -> None:
    daemon_json = tmp_path / "daemon.json"
    original = {"log-driver": "json-file", "log-opts": {"max-size": "50m"}}
    daemon_json.write_text(json.dumps(original))
    result = run_host_role(tmp_path, 8, "--check", "--diff")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "changed: [localhost]" in out
    # The merge keeps what was there and adds the runtime.
    assert '"nvidia-container-runtime"' in out
    assert '"log-driver": "json-file"' in out
    assert "RUNNING HANDLER [host : Restart Docker]" in out
    # Check mode: nothing written.
    assert json.loads(daemon_json.read_text()) == original


def test_cpu_profile_changes_nothing_and_restarts_nothing(tmp_path: Path) -> None:
    daemon_json = tmp_path / "daemon.json"
    daemon_json.write_text("{}")
    result = run_host_role(tmp_path, 0)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "changed=0" in out
    assert "Restart Docker" not in out
    assert daemon_json.read_text() == "{}"
