"""The controller's effective uid, read in-process.

The demo and test inventories (every host is the controller, `ansible_connection: local`)
decide `ansible_become` by it: become only when not already root. Ansible templates
`ansible_become` again for every task of every host, and the `pipe` lookup that read it before
(`id -u`) forked a shell each time: 4,321 of them in one run of tests/ansible/test_fleet_router.py.
"""

from __future__ import annotations

import os
from typing import Any

from ansible.plugins.lookup import LookupBase

DOCUMENTATION = """
name: specserve_controller_uid
short_description: the controller's effective uid, as a string
description:
  - What C(id -u) prints on the controller, without a shell.
options: {}
"""

EXAMPLES = """
ansible_become: "{{ lookup('specserve_controller_uid') != '0' }}"
"""

RETURN = """
_raw:
  description: the effective uid, decimal
  type: list
  elements: str
"""


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[str]:
        return [str(os.geteuid())]
