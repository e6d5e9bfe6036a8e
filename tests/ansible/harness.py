"""Drive real `ansible-playbook` runs against the local Docker engine for the Ansible tests."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
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


def tasks_in(node: Any) -> Iterator[dict[str, Any]]:
    """Every task of a loaded task file, those inside block / rescue / always included."""
    if isinstance(node, list):
        for item in node:
            yield from tasks_in(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            yield from tasks_in(node.get(key))


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
    output = proc.stdout + proc.stderr
    # Every play of every test: a task name or message that did not render (a loop variable
    # in a name: "'item' is undefined", CI of bda968e) is a defect users read, whatever the rc.
    at = output.find("template error")
    assert at < 0, output[max(0, at - 2000):at + 2000]
    return Run(proc.returncode, output, time.monotonic() - start)


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


class Background:
    """An `ansible-playbook` run in its own process group, its output read as it comes, so a
    test can wait for a task to start and then kill (SIGKILL) or interrupt (SIGINT) the play the
    way an operator's Ctrl-C or a dying shell does: the whole group."""

    def __init__(self, inventory: Path, *args: str) -> None:
        env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", PYTHONUNBUFFERED="1")
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            [str(BIN / "ansible-playbook"), "playbooks/deploy.yml", "-i", str(inventory),
             "--vault-password-file", str(VAULT_PASSWORD), "-e", f"@{FIXTURES / 'vault.yml'}",
             *args],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.proc.poll() is not None and text not in self.output:
                self._reader.join(5)
                if text in self.output:
                    return
                raise AssertionError(f"play ended before {text!r}:\n{self.output[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {timeout} s:\n{self.output[-4000:]}")
            time.sleep(0.1)

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def finish(self, timeout: float = 420) -> Run:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            rc = self.proc.wait()
        self._reader.join(10)
        return Run(rc, self.output, time.monotonic() - self.start)


class RequestLoop:
    """A bounded request loop on loopback, one generation a second, counting failures: what a
    client sees while the play runs."""

    def __init__(self, url: str, api_key: str, interval: float = 1.0, timeout: float = 5.0) -> None:
        self.url, self.api_key, self.interval, self.timeout = url, api_key, interval, timeout
        self.sent = 0
        self.failed = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RequestLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.timeout + self.interval + 1)

    def _run(self) -> None:
        body = json.dumps({"text": "ping", "sampling_params": {"max_new_tokens": 4}}).encode()
        while not self._stop.is_set():
            tic = time.monotonic()
            request = urllib.request.Request(
                self.url, data=body, method="POST",
                headers={"Content-Type": "application/json",
                         "Authorization": f"Bearer {self.api_key}"})
            self.sent += 1
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    response.read()
            except (OSError, urllib.error.URLError) as exc:
                self.failed += 1
                self.failures.append(f"{time.strftime('%H:%M:%S')} {getattr(exc, 'reason', exc)}")
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - tic)))
