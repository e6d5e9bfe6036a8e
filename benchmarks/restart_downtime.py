"""How long clients see a stand-in restart fail: a deploy's restart against the server's own start.

    .venv/bin/python -m benchmarks.restart_downtime [--restarts N] [--interval S]

Deploys a stand-in of its own (its own container names, ports, state and log directories in a
temporary directory, no monitoring) with `playbooks/deploy.yml`, then, while a loop on loopback
sends one `/generate` (1 token) every `--interval` seconds:

- **cold start** (the peer): `docker stop` of the deployed container, then `docker start` of the
  same container; the window from the start command to the first answered request is the
  server's own start (launcher, validation, load, bind), no Ansible in it. Median of N.
- **deploy restart**: a profile change (`logging.decode_log_interval`, so a new spec) deployed
  with `deploy.yml`; the window is the longest run of failed requests, measured from the last
  answered request before it to the first answered request after it. Median of N.

Prints both, their difference and the target: a deploy's failed window no more than the server's
own start plus 2 s. Tears the deployment down with `playbooks/teardown.yml` at the end. Needs
Docker and the images of `scripts/setup/ansible.sh`; root (or passwordless sudo) as the demo does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
TARGET_MARGIN_S = 2.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Loop:
    """One request every `interval` s; keeps (sent at, answered) for every request."""

    def __init__(self, url: str, interval: float, timeout: float = 2.0) -> None:
        self.url, self.interval, self.timeout = url, interval, timeout
        self.samples: list[tuple[float, bool]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Loop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.timeout + self.interval + 1)

    def _run(self) -> None:
        body = json.dumps({"text": "ping", "sampling_params": {"max_new_tokens": 1}}).encode()
        while not self._stop.is_set():
            tic = time.monotonic()
            request = urllib.request.Request(
                self.url, data=body, method="POST", headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    response.read()
                    ok = response.status == 200
            except (OSError, urllib.error.URLError):
                ok = False
            self.samples.append((tic, ok))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - tic)))

    def outage(self, since: float = 0.0) -> tuple[float, int]:
        """The longest run of failures after `since`: seconds from the last answered request
        before it to the first answered request after it, and how many requests failed in it."""
        samples = [s for s in self.samples if s[0] >= since]
        best, best_failed = 0.0, 0
        last_ok: float | None = None
        failed = 0
        for sent, ok in samples:
            if ok:
                if failed and last_ok is not None and sent - last_ok > best:
                    best, best_failed = sent - last_ok, failed
                last_ok, failed = sent, 0
            else:
                failed += 1
        return best, best_failed

    def first_ok_after(self, since: float, deadline: float = 120.0) -> float:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            for sent, ok in list(self.samples):
                if ok and sent >= since:
                    return sent
            time.sleep(self.interval / 2)
        raise RuntimeError(f"no answer from {self.url} within {deadline} s")


def write_profile(path: Path, port: int, interval: int) -> None:
    doc = yaml.safe_load((ROOT / "profiles/standin-cpu.yaml").read_text(encoding="utf-8"))
    doc["server"]["port"] = port
    doc["logging"]["decode_log_interval"] = interval
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def write_inventory(work: Path, name: str, profile: Path) -> Path:
    base = yaml.safe_load((ROOT / "playbooks/inventory/standin/hosts.yml").read_text())
    group_vars: dict[str, Any] = dict(base["specserve_demo"]["vars"])
    group_vars.update(
        specserve_profile=str(profile),
        specserve_container_name=name,
        server_profile_host_path=str(work / "etc/profile.yaml"),
        server_state_dir=str(work / "state"),
        server_secrets_dir=str(work / "secrets"),
        specserve_log_dir=str(work / "log"),
        specserve_exporter_port=free_port(),
        server_health_poll_s=0.5,
        server_drain_poll_s=0.5,
        # Only the restart is measured: the window after the gates is not downtime.
        server_stability_window_s=3,
        server_stability_poll_s=0.5,
        verify_warmup_requests=1,
        monitoring_enabled=False,
        monitoring_export_dir=str(work / "monitoring-export"),
    )
    localhost = base["specserve_demo"]["children"]["specserve"]["hosts"]["localhost"]
    inventory = work / "inventory.yml"
    inventory.write_text(yaml.safe_dump(
        {"specserve": {"hosts": {"localhost": localhost}, "vars": group_vars}}, sort_keys=False))
    return inventory


def play(name: str, inventory: Path, *args: str) -> tuple[int, str, float]:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    tic = time.monotonic()
    proc = subprocess.run([PLAYBOOK, f"playbooks/{name}.yml", "-i", str(inventory), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - tic


def docker(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restarts", type=int, default=3, help="restarts of each kind")
    parser.add_argument("--interval", type=float, default=0.05, help="request loop period, s")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="restart-downtime-"))
    # The profile's relative model paths (../tests/...) resolve from profiles/ as in the repo.
    (work / "profiles").mkdir()
    (work / "tests").symlink_to(ROOT / "tests")
    name = f"ssdown{os.getpid()}"
    port = free_port()
    profile = work / "profiles" / "standin.yaml"
    write_profile(profile, port, 40)
    inventory = write_inventory(work, name, profile)
    url = f"http://127.0.0.1:{port}/generate"
    try:
        rc, out, seconds = play("deploy", inventory)
        if rc != 0:
            print(out[-4000:])
            return 1
        print(f"first deploy: {seconds:.1f} s")
        cold: list[float] = []
        deploys: list[tuple[float, int, float]] = []
        with Loop(url, args.interval) as loop:
            for index in range(args.restarts):
                docker("stop", name)
                tic = time.monotonic()
                docker("start", name)
                cold.append(loop.first_ok_after(tic) - tic)
                print(f"cold start {index + 1}: {cold[-1]:.2f} s to the first answer")
            for index in range(args.restarts):
                write_profile(profile, port, 41 + index)
                time.sleep(1.0)
                since = time.monotonic()
                rc, out, seconds = play("deploy", inventory)
                if rc != 0 or "Replacing" not in out:
                    print(out[-4000:])
                    return 1
                window, failed = loop.outage(since)
                deploys.append((window, failed, seconds))
                print(f"deploy restart {index + 1}: {window:.2f} s without an answer "
                      f"({failed} requests failed), play {seconds:.1f} s")
        cold_s = statistics.median(cold)
        down_s = statistics.median(d[0] for d in deploys)
        target = cold_s + TARGET_MARGIN_S
        print()
        print(f"{'':34}{'median s':>10}")
        print(f"{'stand-in cold start (docker start)':34}{cold_s:>10.2f}")
        print(f"{'deploy.yml restart, no answer':34}{down_s:>10.2f}")
        print(f"{'difference (deploy - cold start)':34}{down_s - cold_s:>10.2f}")
        verdict = "met" if down_s <= target else "NOT met"
        print(f"target: deploy restart <= cold start + {TARGET_MARGIN_S:.0f} s = {target:.2f} s:"
              f" {verdict}")
        return 0 if down_s <= target else 2
    finally:
        if (ROOT / "playbooks/teardown.yml").exists():
            play("teardown", inventory)
        names = subprocess.run(
            ["docker", "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=^{name}"],
            capture_output=True, text=True, check=False).stdout.split()
        if names:
            subprocess.run(["docker", "rm", "-f", *names], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
