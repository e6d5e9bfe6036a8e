"""Real serving paths on loopback for the gate: specserve-launch execs the CPU stand-in (SGLang's
API and log format) and tees its log file, specserve-exporter follows that file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.standin.helpers import FAST_ENV, free_port

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "profiles" / "standin-cpu.yaml"
BIN = Path(sys.executable).parent
API_KEY = "sk-verify-7d3e91"


@dataclass
class Serving:
    server: str
    exporter: str
    key_file: Path
    profile: Path  # the profile the server runs
    tmp: Path

    def profile_like(self, name: str, **changes: Any) -> Path:
        """A copy of this server's profile with dotted `changes` (None deletes the key)."""
        doc = yaml.safe_load(self.profile.read_text())
        for dotted, value in changes.items():
            node = doc
            *parents, leaf = dotted.split(".")
            for key in parents:
                node = node[key]
            if value is None:
                node.pop(leaf)
            else:
                node[leaf] = value
        path = self.tmp / name
        path.write_text(yaml.safe_dump(doc))
        return path

    def verify(self, *args: str, profile: Path | None = None, key: bool = True,
               stdin: str | None = None, exporter: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        argv = [str(BIN / "specserve"), "verify", "--server", self.server,
                "--exporter", exporter or self.exporter, "--profile", str(profile or self.profile),
                "--requests", "2", "--max-tokens", "120", "--metrics-timeout", "10",
                "--request-timeout", "30"]
        if key:
            argv += ["--api-key-file", str(self.key_file)]
        clean = {k: v for k, v in os.environ.items() if k != "SPECSERVE_API_KEY"}
        return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=120,
                              env={**clean, **(env or {})}, input=stdin, check=False)


def _wait_http(url: str, timeout: float, request_timeout: float = 1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=request_timeout).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} not up in {timeout} s")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _exporter(log: Path, metrics: int, profile: Path, out: Path) -> subprocess.Popen[bytes]:
    with out.open("wb") as sink:
        return subprocess.Popen(
            [str(BIN / "specserve-exporter"), "--source", "file", "--file", str(log),
             "--profile", str(profile), "--listen-address", f"127.0.0.1:{metrics}"],
            stdout=sink, stderr=subprocess.STDOUT,
        )


@contextmanager
def idle_exporter(tmp: Path) -> Iterator[str]:
    """An exporter following a file no server writes: it never sees a decode line."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "empty.log").write_text("")
    metrics = free_port()
    proc = _exporter(tmp / "empty.log", metrics, STANDIN, tmp / "idle-exporter.out")
    try:
        _wait_http(f"http://127.0.0.1:{metrics}/healthz", 20)
        yield f"http://127.0.0.1:{metrics}/metrics"
    finally:
        _stop([proc])


@contextmanager
def serving(tmp: Path, acceptance: float = 0.8, api_key: str = API_KEY,
            **changes: Any) -> Iterator[Serving]:
    """The stand-in profile with an API key file, the behaviour model's draft `acceptance`
    and `changes` (dotted keys; None deletes)."""
    tmp.mkdir(parents=True, exist_ok=True)
    port, metrics, log = free_port(), free_port(), tmp / "logs" / "sglang.log"
    key = tmp / "api-key"
    key.write_text(f"{api_key}\n")
    behaviour = tmp / "behaviour.json"
    behaviour.write_text(json.dumps({"acceptance": acceptance}))
    doc = yaml.safe_load(STANDIN.read_text())
    for section in ("target", "drafter"):
        doc[section]["path"] = str((STANDIN.parent / doc[section]["path"]).resolve())
    doc["server"].update(port=port, api_key={"file": str(key)})
    doc["logging"] = {"file": str(log), "decode_log_interval": 10}
    doc["env"] = {**FAST_ENV, "SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour)}
    profile = tmp / "profile.yaml"
    profile.write_text(yaml.safe_dump(doc))
    serving_ = Serving(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics}/metrics",
                       key, profile, tmp)
    profile = serving_.profile_like("profile.yaml", **changes)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with (tmp / "server.out").open("wb") as out:
            procs.append(subprocess.Popen([str(BIN / "specserve-launch"), str(profile)],
                                          stdout=out, stderr=subprocess.STDOUT, env=env))
        procs.append(_exporter(log, metrics, profile, tmp / "exporter.out"))
        # /health_generate generates a token and, as SGLang's, takes 1 s to 20 s to answer.
        _wait_http(f"http://127.0.0.1:{port}/health_generate", 60, request_timeout=30)
        _wait_http(f"http://127.0.0.1:{metrics}/healthz", 20)
        yield serving_
    finally:
        _stop(procs)


@pytest.fixture(scope="module")
def speculative(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("speculative")) as s:
        yield s
