"""The preflight's `specserve check` runs once per play for one profile, image and set of model
configs (ansible/roles/preflight/tasks/check_profile.yml). The server role includes it again
after the weights role: a drafter staged since the preflight is checked then, so the field
notes' bug (an EAGLE-3 drafter run as EAGLE) cannot slip through the gap between the two. Runs
the real role with ansible-playbook on the controller; no Docker engine."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

from .harness import BIN, ROOT

MODELS = ROOT / "tests" / "fixtures" / "models"
INCLUDE = """
    - name: "{name}"
      ansible.builtin.include_role:
        name: preflight
        tasks_from: check_profile
"""


def _play(tmp_path: Path, steps: list[str]) -> subprocess.CompletedProcess[str]:
    profile = yaml.safe_load((ROOT / "profiles" / "standin-cpu.yaml").read_text())
    profile["target"]["path"] = str(tmp_path / "models" / "target")
    profile["drafter"]["path"] = str(tmp_path / "models" / "drafter")
    profile["drafter"]["algorithm"] = "EAGLE"  # wrong for an EAGLE-3 drafter
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    shutil.copytree(MODELS / "Llama-3.1-8B-Instruct", tmp_path / "models" / "target")
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  vars:\n"
        f"    specserve_profile: {tmp_path / 'profile.yaml'}\n"
        "    specserve_image: specserve/standin:0.1.0\n  tasks:\n"
        "    - name: Shared settings and the profile, as deploy.yml reads them\n"
        "      ansible.builtin.import_role:\n        name: specserve\n"
        + "".join(steps))
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [str(BIN / "ansible-playbook"), str(play), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={BIN / 'python'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def _checks(output: str) -> int:
    return output.count("TASK [preflight : Check profile | specserve check]")


def test_an_eagle3_drafter_present_at_the_preflight_is_refused_there(tmp_path: Path) -> None:
    shutil.copytree(MODELS / "EAGLE3-LLaMA3.1-Instruct-8B", tmp_path / "models" / "drafter")
    (tmp_path / "fixed").mkdir()
    run = _play(tmp_path, [INCLUDE.format(name="Preflight"), INCLUDE.format(name="Server again")])
    out = run.stdout + run.stderr
    # The first check refuses the profile: the play ends there, the second never runs.
    assert run.returncode != 0 and _checks(out) == 1, out[-3000:]
    assert "declares LlamaForCausalLMEagle3" in out and "set drafter.algorithm: EAGLE3" in out


def test_a_drafter_staged_after_the_preflight_is_checked_again(tmp_path: Path) -> None:
    stage = (
        "    - name: Weights (staged here, as the weights role does)\n"
        "      ansible.builtin.copy:\n"
        f"        src: {MODELS / 'EAGLE3-LLaMA3.1-Instruct-8B'}/\n"
        f"        dest: {tmp_path / 'models' / 'drafter'}/\n"
        "        mode: preserve\n")
    run = _play(tmp_path, [INCLUDE.format(name="Preflight"), INCLUDE.format(name="Same configs"),
                           stage, INCLUDE.format(name="Server after staging")])
    out = run.stdout + run.stderr
    # Checked at the preflight (drafter absent: a warning), skipped while nothing changed,
    # checked again once the drafter is there, and refused.
    assert _checks(out) == 2, out[-4000:]
    assert run.returncode != 0, out[-3000:]
    assert "is not on this machine" in out
    assert "declares LlamaForCausalLMEagle3" in out and "set drafter.algorithm: EAGLE3" in out
