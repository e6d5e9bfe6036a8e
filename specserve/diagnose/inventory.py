"""Where diagnose reads from, taken from the Ansible inventory the deployment was made with.

`ansible-inventory --host H` gives the host's variables as Ansible merges them (group vars,
host vars); what the inventory leaves unset is the role's default, read from the role's own
defaults file, the one place it is written. Prometheus binds `monitoring_listen_host`
(127.0.0.1 by default): on a remote node it is reached through a tunnel, which the note says.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROLES = Path(__file__).resolve().parents[2] / "ansible" / "roles"
DEFAULTS = (ROLES / "monitoring" / "defaults" / "main.yml",
            ROLES / "specserve" / "defaults" / "main.yml")  # fmt: skip
GROUP = "specserve"  # the deploy's node group (playbooks/deploy.yml)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class InventoryError(RuntimeError):
    """The inventory cannot say where to read from: the message names what and the fix."""


@dataclass(frozen=True)
class Targets:
    host: str
    prometheus: str
    overrides: Path | None
    profile: Path | None
    note: str = ""


def _ansible_inventory() -> str:
    found = shutil.which("ansible-inventory") or str(Path(sys.executable).parent /
                                                        "ansible-inventory")  # fmt: skip
    if not Path(found).exists():
        raise InventoryError("ansible-inventory is not installed (the deploy extra: pip install "
                             "'specserve[deploy]'); pass --prometheus instead of --inventory")
    return found


def _run(*args: str) -> Any:
    done = subprocess.run([_ansible_inventory(), *args], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    if done.returncode != 0:
        raise InventoryError(f"ansible-inventory {' '.join(args)} failed: "
                             f"{(done.stderr or done.stdout).strip()[-500:]}")
    return json.loads(done.stdout)


def _first_host(inventory: Path) -> str:
    listing = _run("-i", str(inventory), "--list")
    hosts = listing.get(GROUP, {}).get("hosts", [])
    if not hosts:
        raise InventoryError(f"{inventory}: no host in the group '{GROUP}'; pass --host")
    return str(hosts[0])


def _defaults() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for path in DEFAULTS:
        if not path.is_file():
            raise InventoryError(f"{path} is missing: --inventory reads the roles' defaults "
                                 "from the repository checkout; run diagnose there, or pass "
                                 "--prometheus, --overrides and --profile")
        merged.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return merged


def _value(variables: dict[str, Any], name: str, host: str) -> Any:
    value = variables.get(name)
    if isinstance(value, str) and "{{" in value:
        raise InventoryError(f"{host}: {name} is a template ({value!r}), which only a play "
                             "renders; pass the value itself (--prometheus, --overrides, "
                             "--profile)")
    return value


def targets(inventory: Path, host: str | None = None) -> Targets:
    if not inventory.exists():
        raise InventoryError(f"--inventory {inventory}: no such file; give the inventory the "
                             "deployment was made with (e.g. playbooks/inventory/<site>/hosts.yml)")
    host = host or _first_host(inventory)
    variables = {**_defaults(), **_run("-i", str(inventory), "--host", host)}
    port = int(_value(variables, "monitoring_prometheus_port", host))
    listen = str(_value(variables, "monitoring_listen_host", host))
    address = str(_value(variables, "ansible_host", host) or host)
    local = variables.get("ansible_connection") == "local" or address in LOOPBACK
    note = ""
    if listen in LOOPBACK:
        if not local:
            note = (f"Prometheus listens on {listen}:{port} of {host}: run diagnose there, or "
                    f"tunnel first (ssh -L {port}:127.0.0.1:{port} {address})")
        url = f"http://127.0.0.1:{port}"
    else:
        url = f"http://{listen if listen not in ('0.0.0.0', '::') else address}:{port}"
    overrides = _value(variables, "specserve_alert_overrides", host) or None
    profile = _value(variables, "specserve_profile", host) or None
    return Targets(host, url, Path(overrides) if overrides else None,
                   Path(profile) if profile else None, note)  # fmt: skip
