"""Shared fixtures for the exporter's integration tests.

Every test runs the real `specserve-exporter` console script as a subprocess on 127.0.0.1 and
asserts on what its /metrics and /healthz endpoints say, never on the exporter's internals.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")

# --poll-interval for every file test: fast enough that waits finish in a few polls.
POLL_INTERVAL = "0.05"
READY_TIMEOUT = 20.0  # the first start on a busy 2-core CI machine imports docker + kubernetes
STOP_TIMEOUT = 5.0
UNPRIVILEGED_UID = 65534  # "nobody" on Debian


def exporter_binary() -> str:
    """The console script of this venv (next to the Python running pytest), else from PATH."""
    candidate = Path(sys.executable).parent / "specserve-exporter"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("specserve-exporter")
    if found is None:
        raise RuntimeError("specserve-exporter is not installed: pip install -e . in the venv")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment minus SPECSERVE_EXPORTER_* (flags must be the only input)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECSERVE_EXPORTER_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def decode_line(
    *,
    running: int = 1,
    accept: float = 2.15,
    throughput: float = 66.89,
    queue: int = 0,
    tokens: int = 671,
    usage: float = 0.01,
    rate: float = 0.13,
    graph: bool = True,
    stamp: str = "2026-02-23 17:53:14",
    ranks: str = " TP0",
    newline: str = "\n",
) -> str:
    """A decode stats line exactly as SGLang's scheduler prints it (generation 4 layout)."""
    return (
        f"[{stamp}{ranks}] Decode batch, #running-req: {running}, #token: {tokens}, "
        f"token usage: {usage:.2f}, accept len: {accept:.2f}, accept rate: {rate:.2f}, "
        f"cuda graph: {graph}, gen throughput (token/s): {throughput:.2f}, "
        f"#queue-req: {queue}{newline}"
    )


def noise_line(text: str = 'INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 200 OK') -> str:
    """A line SGLang also prints that is not a stats line (an access log line)."""
    return f"[2026-02-23 17:53:15] {text}\n"


@dataclass(frozen=True)
class Metrics:
    """One scrape, parsed: sample name -> list of (labels, value)."""

    samples: dict[str, list[tuple[dict[str, str], float]]]
    text: str

    @classmethod
    def parse(cls, text: str) -> Metrics:
        samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
        return cls(samples, text)

    def has(self, name: str, **labels: str) -> bool:
        return any(_matches(s, labels) for s, _ in self.samples.get(name, []))

    def value(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`; 0 when there is none."""
        return sum(v for s, v in self.samples.get(name, []) if _matches(s, labels))

    # Shorthands for the numbers most tests look at.
    @property
    def decode(self) -> float:
        return self.value("specserve_log_lines_parsed_total", kind="decode")

    @property
    def read(self) -> float:
        return self.value("specserve_log_lines_read_total")

    @property
    def reopens(self) -> float:
        return self.value("specserve_source_reopens_total")

    @property
    def up(self) -> float:
        return self.value("specserve_source_up")

    @property
    def accept_count(self) -> float:
        return self.value("specserve_decode_accept_length_count")

    @property
    def accept_sum(self) -> float:
        return self.value("specserve_decode_accept_length_sum")


def _matches(sample_labels: dict[str, str], wanted: Mapping[str, str]) -> bool:
    return all(sample_labels.get(k) == v for k, v in wanted.items())


def wait_until(
    probe: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.02
) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


@dataclass
class Exporter:
    """A running `specserve-exporter` subprocess and the means to scrape it."""

    proc: subprocess.Popen[bytes]
    port: int
    stderr_file: IO[bytes]
    args: list[str]
    session: requests.Session = field(default_factory=requests.Session)
    exit_code: int | None = None

    def __post_init__(self) -> None:
        self.session.trust_env = False  # loopback only: never through a configured proxy

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> requests.Response:
        return self.session.get(self.url + path, headers=dict(headers or {}), timeout=3)

    def metrics(self) -> Metrics:
        response = self.get("/metrics")
        assert response.status_code == 200, response.text
        return Metrics.parse(response.text)

    def healthz(self) -> tuple[int, dict[str, Any]]:
        response = self.get("/healthz")
        body: dict[str, Any] = response.json()
        return response.status_code, body

    def state(self) -> str:
        state: str = self.healthz()[1]["source"]["state"]
        return state

    def stderr(self) -> str:
        self.stderr_file.flush()
        return Path(self.stderr_file.name).read_text(errors="replace")

    def wait_for(
        self, check: Callable[[Metrics], bool], what: str, timeout: float = 5.0
    ) -> Metrics:
        """Scrape until `check(metrics)` holds; the failure names `what` and the last scrape."""
        last: list[Metrics] = []

        def probe() -> Metrics | None:
            self.assert_alive()
            m = self.metrics()
            last[:] = [m]
            return m if check(m) else None

        try:
            return wait_until(probe, timeout=timeout, what=what)
        except AssertionError as exc:
            shown = _interesting(last[0].text) if last else "(no scrape)"
            raise AssertionError(f"{exc}\n--- last scrape ---\n{shown}\n--- stderr ---\n"
                                 f"{self.stderr()}") from None

    def wait_until(self, probe: Callable[[], T | None], what: str, timeout: float = 5.0) -> T:
        """Poll `probe` while checking that the exporter stays up."""

        def checked() -> T | None:
            self.assert_alive()
            return probe()

        return wait_until(checked, timeout=timeout, what=what)

    def wait_state(self, state: str, timeout: float = 5.0) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            self.assert_alive()
            _, body = self.healthz()
            return body if body["source"]["state"] == state else None

        return wait_until(probe, timeout=timeout, what=f"source state {state!r}")

    def assert_alive(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise AssertionError(
                f"exporter exited with {code}; stderr:\n{self.stderr()}"
            )

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, float]:
        """Signal the exporter, wait for it; returns (exit code, seconds it took)."""
        if self.exit_code is not None:
            return self.exit_code, 0.0
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.exit_code = self.proc.wait(timeout=STOP_TIMEOUT + 5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.exit_code = self.proc.wait()
            raise AssertionError(
                f"exporter ignored signal {sig}; stderr:\n{self.stderr()}"
            ) from None
        finally:
            self.session.close()
        return self.exit_code, time.monotonic() - started


def _interesting(text: str) -> str:
    return "\n".join(
        line for line in text.splitlines()
        if line.startswith(("specserve_log_lines", "specserve_source", "specserve_decode_accept"))
    )


StartExporter = Callable[..., Exporter]


@pytest.fixture
def start_exporter(tmp_path: Path) -> Iterator[StartExporter]:
    """Start `specserve-exporter ARGS` on a free loopback port; stopped with SIGTERM at teardown,
    where a non-zero exit code or a stop slower than 5 s fails the test."""
    started: list[Exporter] = []

    def start(
        *args: str,
        uid: int | None = None,
        stdin: int | IO[bytes] | None = subprocess.DEVNULL,
        ready: bool = True,
    ) -> Exporter:
        port = free_port()
        argv = [exporter_binary(), *args, "--listen-address", f"127.0.0.1:{port}"]
        if uid is not None:
            # Drop to an unprivileged user: root reads any file, so permission errors need one.
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        stderr_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed at teardown)
            prefix="exporter-stderr-", dir=tmp_path, delete=False
        )
        proc = subprocess.Popen(
            argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=stderr_file, env=clean_env(),
            cwd="/",
        )
        exporter = Exporter(proc, port, stderr_file, argv)
        started.append(exporter)
        if ready:
            wait_until(lambda: _answers(exporter), timeout=READY_TIMEOUT,
                       what=f"the exporter to answer on port {port}")
        return exporter

    yield start

    failures: list[str] = []
    for exporter in started:
        code, took = exporter.stop()
        if code != 0:
            failures.append(f"{exporter.args}: exit code {code}\n{exporter.stderr()}")
        elif took > STOP_TIMEOUT:
            failures.append(f"{exporter.args}: SIGTERM took {took:.1f}s (limit {STOP_TIMEOUT}s)")
        exporter.stderr_file.close()
    assert not failures, "\n".join(failures)


def _answers(exporter: Exporter) -> bool:
    exporter.assert_alive()
    try:
        return exporter.get("/healthz").status_code in (200, 503)
    except requests.ConnectionError:
        return False


@pytest.fixture
def line() -> Callable[..., str]:
    """Builder of real SGLang decode lines (see decode_line)."""
    return decode_line


@pytest.fixture
def noise() -> Callable[..., str]:
    return noise_line
