"""Real server processes on loopback for the end-to-end test: start, wait ready, always stop.

Every wait is bounded and fails with the process's own last log lines, so a red test says which
component broke and why instead of timing out silently.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import requests


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Service:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(
                f"{self.name} exited with {self.proc.returncode}; last output:\n{self.tail()}"
            )

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


class Services:
    """The processes one test started; `stop_all` ends them in reverse start order."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.started: list[Service] = []

    def start(
        self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> Service:
        log = self.logdir / f"{name}.out"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                list(argv), stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
            )  # fmt: skip
        service = Service(name, proc, log)
        self.started.append(service)
        return service

    def stop_all(self) -> None:
        for service in reversed(self.started):
            service.stop()

    def check_alive(self) -> None:
        for service in self.started:
            service.check_alive()


def wait_until(
    what: str,
    probe: Callable[[], bool],
    timeout: float,
    interval: float = 0.2,
    services: Services | None = None,
) -> float:
    """Poll `probe` until it is true; returns the seconds it took, raises naming `what`."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        if services is not None:
            services.check_alive()
        if probe():
            return time.monotonic() - start
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def http_ok(url: str) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            return requests.get(url, timeout=1).status_code == 200
        except requests.RequestException:
            return False

    return probe
