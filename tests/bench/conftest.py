"""Real processes for the benchmark's end-to-end tests: stand-in servers and exporters on
127.0.0.1, each started once per module and always stopped at teardown."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

BIN = Path(sys.executable).parent
# Fast enough for CI, slow enough that a decode step (several ms of wall time) dwarfs the
# HTTP and scheduling overhead of a shared 2-core machine; the model's numbers do not change.
TIME_SCALE = 0.5
RECIPE_FLAGS = (
    "--speculative-algorithm", "EAGLE3",
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4",
)  # fmt: skip
REPO = Path(__file__).resolve().parents[2]
DRAFTER = REPO / "tests" / "fixtures" / "models" / "EAGLE3-LLaMA3.1-Instruct-8B"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def loopback_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without proxy settings (test traffic stays on 127.0.0.1)."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env = {k: v for k, v in env.items() if not k.startswith("SPECSERVE_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args} exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except (requests.ConnectionError, requests.Timeout):
            pass  # not listening yet, or slow to answer on a busy machine: ask again
        time.sleep(0.05)
    raise AssertionError(f"{url} not ready in {timeout} s: {log.read_text()[-2000:]}")


@dataclass
class Served:
    """A stand-in server and the exporter following its log."""

    url: str
    exporter_url: str | None
    log: Path


class Processes:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self, argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs.append(proc)
        return proc

    def standin(
        self,
        name: str,
        *flags: str,
        exporter: bool = True,
        behaviour: str = "acceptance: 0.6\n",
        time_scale: float = TIME_SCALE,
    ) -> Served:
        port = free_port()
        log = self.root / f"{name}.log"
        behaviour_file = self.root / f"{name}-behaviour.yaml"
        behaviour_file.write_text(behaviour)
        env = loopback_env(
            {
                "SPECSERVE_STANDIN_LOAD_SECONDS": "0.2",
                "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.1",
                "SPECSERVE_STANDIN_TIME_SCALE": str(time_scale),
                "SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour_file),
            }
        )
        argv = [
            str(BIN / "specserve-standin"), "--model-path", str(self.root / "model"),
            "--host", "127.0.0.1", "--port", str(port), "--decode-log-interval", "5", *flags,
        ]  # fmt: skip
        server = self._spawn(argv, log, env)
        exporter_url = None
        exporter_proc = None
        exporter_log = self.root / f"{name}-exporter.log"
        if exporter:
            eport = free_port()
            argv = [
                str(BIN / "specserve-exporter"), "--source", "file", "--file", str(log),
                "--from-beginning", "--poll-interval", "0.05",
                "--listen-address", f"127.0.0.1:{eport}",
            ]  # fmt: skip
            exporter_proc = self._spawn(argv, exporter_log, loopback_env())
            exporter_url = f"http://127.0.0.1:{eport}/metrics"
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", server, log)
        if exporter_proc is not None and exporter_url is not None:
            wait_http(exporter_url, exporter_proc, exporter_log)
        return Served(url=url, exporter_url=exporter_url, log=log)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    procs = Processes(tmp_path_factory.mktemp("bench-procs"))
    try:
        yield procs
    finally:
        procs.stop_all()


@dataclass
class BenchRun:
    returncode: int
    stdout: str
    stderr: str
    out_dir: Path


@pytest.fixture
def bench(tmp_path: Path) -> Callable[..., BenchRun]:
    """Run the real `specserve bench` console script; bounded in time."""

    def run(*args: str, out: str = "out", env: dict[str, str] | None = None) -> BenchRun:
        out_dir = tmp_path / out
        argv = [str(BIN / "specserve"), "bench", *args]
        if args and args[0] not in ("baseline-from", "report"):
            argv += ["--out-dir", str(out_dir)]
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=loopback_env(env)
        )
        return BenchRun(done.returncode, done.stdout, done.stderr, out_dir)

    return run
