"""Ansible module: the node's deploy lock, one JSON file created atomically (O_EXCL).

The action plugin of the same name (ansible/plugins/action/specserve_lock.py) decides on the
controller whether a holder is stale (its play's PID is gone there, or the lock is older than
the stale age) and loops while it waits; this module only reads, creates, takes over and
removes the file on the host, so two plays on two controllers agree through the host's
filesystem.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: specserve_lock
short_description: Read, take, take over or release the node's deploy lock file
description:
  - "state=acquired: create the file with O_EXCL; when it exists, report its holder."
  - "With takeover_token: replace the file only if it still holds that token (a stale holder)."
  - "state=released: remove the file if it holds our token."
  - "state=renewed: restamp the file with the host's clock if it holds our token (the lease)."
options:
  path: {description: Lock file path, type: path, required: true}
  state:
    description: acquired or released
    type: str
    choices: [acquired, released, renewed]
    default: acquired
  holder:
    description: Who takes the lock (token, controller, pid, user, play, since)
    type: dict
    required: true
  takeover_token: {description: Token of a stale holder to replace, type: str}
"""

RETURN = r"""
acquired: {description: we hold the lock now, type: bool, returned: state=acquired}
holder:
  description: the lock file's content when someone else holds it
  type: dict
  returned: when held
"""


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        # A half-written or unreadable file is a holder nobody can name: stale by age only.
        return {"token": "", "unreadable": True, "since": 0}
    return data if isinstance(data, dict) else {"token": "", "unreadable": True, "since": 0}


def boot_id() -> str:
    """This machine's boot (Linux); "" where the kernel does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def stamped(holder: dict[str, Any]) -> dict[str, Any]:
    """The holder with the host's own clock: its monotonic time and boot, so the lock's age is
    measured where the file lives and never from a controller's wall clock (which may be hours
    off, or another controller's)."""
    return {**holder, "host_boot_id": boot_id(), "host_monotonic": time.monotonic()}


def age(holder: dict[str, Any]) -> dict[str, Any]:
    """How long ago the holder took or last renewed the lock, by the host's monotonic clock;
    host_rebooted when the host has booted since (whatever held it there is gone)."""
    if holder.get("unreadable") or "host_monotonic" not in holder:
        return {"age_s": None, "host_rebooted": False}
    if holder.get("host_boot_id") != boot_id():
        return {"age_s": None, "host_rebooted": True}
    return {"age_s": max(0.0, time.monotonic() - float(holder["host_monotonic"])),
            "host_rebooted": False}


def _create(path: str, holder: dict[str, Any]) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(stamped(holder), handle, sort_keys=True)
        handle.write("\n")
    return True


def _replace(path: str, holder: dict[str, Any]) -> None:
    """Write `holder` over the lock file atomically (rename)."""
    tmp = f"{path}.{holder.get('token')}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(stamped(holder), handle, sort_keys=True)
        handle.write("\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["acquired", "released", "renewed"],
                      "default": "acquired"},
            "holder": {"type": "dict", "required": True},
            "takeover_token": {"type": "str", "no_log": False},
        },
        supports_check_mode=True,
    )
    path, holder = module.params["path"], module.params["holder"]
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    if module.params["state"] == "renewed":
        # The holder's lease: each phase of a deploy renews it, so a live deploy's lock is young
        # by the host's clock however long the whole play runs.
        current = _read(path)
        if current is not None and current.get("token") == holder.get("token"):
            _replace(path, {k: v for k, v in current.items()
                            if k not in ("host_boot_id", "host_monotonic")})
            module.exit_json(changed=False, renewed=True)
        module.exit_json(changed=False, renewed=False, holder=current)
    if module.params["state"] == "released":
        current = _read(path)
        if current is not None and current.get("token") == holder.get("token"):
            os.unlink(path)
            module.exit_json(changed=False, released=True)
        module.exit_json(changed=False, released=False, holder=current)
    takeover = module.params["takeover_token"]
    if takeover is not None:
        current = _read(path)
        if current is not None and current.get("token", "") != takeover:
            module.exit_json(changed=False, acquired=False, holder=current)
        # Rename over the stale file: atomic, so two takers cannot both end up holding it
        # unnoticed (the loser re-reads a token that is not its own).
        _replace(path, holder)
        mine = (_read(path) or {}).get("token") == holder.get("token")
        module.exit_json(changed=False, acquired=mine, holder=None if mine else _read(path),
                         took_over=mine)
    if _create(path, holder):
        module.exit_json(changed=False, acquired=True)
    current = _read(path)
    if current is None and _create(path, holder):  # released between our two looks
        module.exit_json(changed=False, acquired=True)
    seen = age(current or {})
    if current is not None and seen["age_s"] is None and not seen["host_rebooted"]:
        # Half-written (a writer between its create and its write, or a crash there), or a
        # holder that did not stamp the host's clock: its age is the file's, by the host's
        # clock, not "infinitely old".
        try:
            seen["age_s"] = max(0.0, time.time() - os.stat(path).st_mtime)
        except OSError:
            seen["age_s"] = 0.0
    module.exit_json(changed=False, acquired=False, holder=current, **seen)


if __name__ == "__main__":
    main()
