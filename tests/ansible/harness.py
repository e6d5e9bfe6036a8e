"""Drive real `ansible-playbook` runs against the local Docker engine for the Ansible tests."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
VAULT_PASSWORD = FIXTURES / "vault-password.txt"
_RECAP = re.compile(
    r"^(?P<host>\S+)\s+: ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)"
    r"\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)",
    re.MULTILINE,
)


@dataclass
class Run:
    rc: int
    output: str
    seconds: float

    def recap(self, host: str = "localhost") -> dict[str, int]:
        for match in _RECAP.finditer(self.output):
            if match["host"] == host:
                return {k: int(v) for k, v in match.groupdict().items() if k != "host"}
        raise AssertionError(f"no PLAY RECAP line for {host}:\n{self.output[-3000:]}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def playbook(inventory: Path, *args: str, timeout: int = 420) -> Run:
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", PYTHONUNBUFFERED="1")
    start = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "playbooks/deploy.yml", "-i", str(inventory),
         "--vault-password-file", str(VAULT_PASSWORD), "-e", f"@{FIXTURES / 'vault.yml'}",
         *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )
    return Run(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start)


def docker_inspect(name: str) -> dict[str, Any] | None:
    proc = subprocess.run(["docker", "inspect", name], capture_output=True, text=True, check=False)
    return json.loads(proc.stdout)[0] if proc.returncode == 0 else None


def http_get(url: str, headers: dict[str, str] | None = None, timeout: float = 10) -> str:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read().decode()


def http_status(url: str, timeout: float = 30) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def write_profile(path: Path, port: int, **changes: Any) -> None:
    """The stand-in profile on `port`, with an API key read from a file, and `changes` as
    dotted keys (e.g. {"drafter.algorithm": "EAGLE"})."""
    doc = yaml.safe_load((ROOT / "profiles" / "standin-cpu.yaml").read_text(encoding="utf-8"))
    doc["server"]["port"] = port
    doc["server"]["api_key"] = {"file": "/run/secrets/specserve/api-key"}
    for dotted, value in changes.items():
        node = doc
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
