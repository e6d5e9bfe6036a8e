"""The `start_standin` fixture: real stand-in processes, always stopped at teardown."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.standin.helpers import FAST_ENV, Standin, free_port


@pytest.fixture
def start_standin(tmp_path: Path) -> Iterator:
    started: list[Standin] = []

    def start(*flags: str, env: dict[str, str] | None = None, wait: bool = True) -> Standin:
        port = free_port()
        log = tmp_path / f"standin-{port}.log"
        full_env = {**os.environ, **FAST_ENV, **(env or {})}
        argv = [
            sys.executable, "-m", "specserve.standin.server",
            "--model-path", str(tmp_path / "model"), "--host", "127.0.0.1", "--port", str(port),
            *flags,
        ]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env)
        server = Standin(proc, port, log)
        started.append(server)
        if wait:
            server.wait_ready()
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=5)
