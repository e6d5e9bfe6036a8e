"""ansible.cfg runs plays under Mitogen's strategy (docs/ansible.md, "Deploy time"): two module
tasks on one host run in one interpreter, where Ansible's stock strategy starts a new one for
each. Seen from a command each task runs: its parent process is the interpreter that ran it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .harness import BIN, ROOT

PLAY = """\
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: the interpreter of the first task
      ansible.builtin.command: sh -c 'echo "parent=$PPID"'
      register: first
      changed_when: false
    - name: the interpreter of the second task
      ansible.builtin.command: sh -c 'echo "parent=$PPID"'
      register: second
      changed_when: false
    - name: both
      ansible.builtin.debug:
        msg: "first {{ first.stdout }} second {{ second.stdout }}"
"""


def _parents(tmp_path: Path, **env: str) -> tuple[str, str]:
    (tmp_path / "play.yml").write_text(PLAY)
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml"),
         "-e", f"ansible_python_interpreter={BIN / 'python'}"],
        cwd=ROOT, env=dict(os.environ, ANSIBLE_NOCOLOR="1", **env), capture_output=True,
        text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if "first parent=" in x)
    words = line.split()
    first = next(w for w in words if w.startswith("parent="))
    second = words[words.index("second") + 1]
    return first, second.rstrip('"')


def test_the_repositorys_config_runs_a_hosts_tasks_in_one_interpreter(tmp_path: Path) -> None:
    first, second = _parents(tmp_path)
    assert first == second, (first, second)


def test_the_stock_strategy_starts_one_per_task(tmp_path: Path) -> None:
    # The same play and check tell the two apart: the fallback (ANSIBLE_STRATEGY=linear) works.
    first, second = _parents(tmp_path, ANSIBLE_STRATEGY="linear")
    assert first != second, (first, second)
