"""The specserve_preload callback (ansible.cfg) with the real ansible-playbook: module payloads kept
across runs are named by the modules' content, so an edited module runs as edited, and templates
still resolve their filters in the forked workers."""

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
    - name: the module under test
      probe_mod: {}
      register: probe
    - name: a builtin module
      ansible.builtin.stat:
        path: /etc/hostname
    - name: filters resolve in the worker
      ansible.builtin.debug:
        msg: "answer={{ probe.answer | to_json }} {{ [3, 1] | sort | join(',') }}"
"""

MODULE = """\
from ansible.module_utils.basic import AnsibleModule
AnsibleModule(argument_spec={}).exit_json(changed=False, answer=%r)
"""


def _run(tmp_path: Path, cache: Path, library: Path) -> str:
    # The payload cache serves Ansible's stock strategy, the fallback from Mitogen's (ansible.cfg):
    # Mitogen runs modules in its own interpreter and builds no AnsiballZ payload.
    env = dict(os.environ, SPECSERVE_ANSIBALLZ_CACHE=str(cache), ANSIBLE_LIBRARY=str(library),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "local"),
               ANSIBLE_STRATEGY="linear")
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml"),
         "-e", f"ansible_python_interpreter={BIN / 'python'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_payloads_are_kept_across_runs_and_named_by_the_modules_content(tmp_path: Path) -> None:
    (tmp_path / "play.yml").write_text(PLAY)
    library, cache = tmp_path / "library", tmp_path / "cache"
    library.mkdir()
    (library / "probe_mod.py").write_text(MODULE % "first")

    first = _run(tmp_path, cache, library)
    assert 'answer=\\"first\\" 1,3' in first  # the debug output escapes the JSON's quotes
    [kept] = list(cache.iterdir())
    payload = kept / "ansible.legacy.probe_mod-ZIP_DEFLATED-none"
    assert payload.is_file() and (kept / "ansible.modules.stat-ZIP_DEFLATED-none").is_file()
    built = payload.stat().st_mtime_ns
    # The run's own temporary directory is gone, the kept cache is not.
    assert not any((tmp_path / "local").iterdir())

    again = _run(tmp_path, cache, library)
    assert 'answer=\\"first\\"' in again
    assert payload.stat().st_mtime_ns == built, "the second run built the payload again"

    # An edited module: a new cache directory, and the task runs the new code, not the old payload.
    (library / "probe_mod.py").write_text(MODULE % "second")
    edited = _run(tmp_path, cache, library)
    assert 'answer=\\"second\\"' in edited, edited[-2000:]
    assert len(list(cache.iterdir())) == 2
