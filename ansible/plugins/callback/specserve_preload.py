"""Callback plugin: work every task's worker would repeat, done once by the controller.

Ansible runs each task in a process forked from the controller, and a fork's work dies with it:

- A worker that templates a filter (`| default`, `| to_json`: almost every task here) first loaded
  every filter plugin module from source. Loaded here, in the controller, at the start of the
  playbook, every fork inherits them.
- Each run built each module's AnsiballZ payload again (its module_utils found by compiling the
  sources), in a cache that lives in the run's own temporary directory. Here that cache is a
  directory kept across runs, named by what the payloads are built from: the ansible-core and
  collection versions and where they are installed, and the path and content of this
  repository's modules. A changed module
  gets a new directory; nothing stale is reused. A payload holds module code only: a task's
  arguments are added to it for each task, outside the cache.

Measured on a converged single-node deploy of the stand-in (py-spy): the filter plugins were 19%
and the payloads 20% of the play's CPU (docs/ansible.md, "Deploy time").
"""

from __future__ import annotations

import hashlib
import os
from importlib import metadata
from pathlib import Path
from typing import Any

import ansible
from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader
from ansible.release import __version__ as ANSIBLE_CORE_VERSION

DOCUMENTATION = r"""
name: specserve_preload
type: aggregate
short_description: Work every task's worker would repeat, done once by the controller
description:
  - At the start of a playbook, loads the Jinja filter and test plugins in the controller, so the
    worker forked for each task inherits them, and keeps the AnsiballZ payload cache across runs
    in a directory named by the ansible-core and collection versions and the modules' content.
options:
  cache_root:
    description: Where the payload caches are kept, a directory per key.
    default: ~/.ansible/specserve-ansiballz
    env:
      - name: SPECSERVE_ANSIBALLZ_CACHE
"""

PAYLOAD_CACHE = "ansiballz_cache"  # ansible.executor.module_common's name, under DEFAULT_LOCAL_TMP


def payload_key(module_dirs: list[str]) -> str:
    """What a payload is built from: the versions and where they are installed (module_utils come
    from there), and each repository module's path and bytes."""
    digest = hashlib.sha256()
    try:
        collections = metadata.version("ansible")
    except metadata.PackageNotFoundError:
        collections = "none"
    digest.update(f"{ANSIBLE_CORE_VERSION}\0{collections}\0{ansible.__file__}\0".encode())
    for directory in module_dirs:
        for path in sorted(Path(directory).expanduser().rglob("*.py")):
            digest.update(str(path.resolve()).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "specserve_preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook: Any) -> None:
        for loader in (filter_loader, test_loader):
            for _plugin in loader.all():
                pass
        self._keep_payloads()

    def _keep_payloads(self) -> None:
        run_cache = Path(C.DEFAULT_LOCAL_TMP) / PAYLOAD_CACHE
        if run_cache.exists() or run_cache.is_symlink():
            return  # built by this run already: leave it as Ansible made it
        root = Path(os.path.expanduser(str(self.get_option("cache_root"))))
        kept = root / payload_key(list(C.DEFAULT_MODULE_PATH))
        kept.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Ansible removes the run's directory at exit; a link is removed, not followed.
        run_cache.symlink_to(kept, target_is_directory=True)
