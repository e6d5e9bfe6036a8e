"""The `helm test` script against the real product path on loopback: specserve-launch execs the
CPU stand-in (SGLang's API and log format), tees the log file, specserve-exporter follows it, and
the script must pass; with every draft rejected (accept length 1.00) it must fail."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import requests
import yaml

from tests.helm.conftest import CHART, REPO
from tests.standin.helpers import FAST_ENV, free_port

SCRIPT = CHART / "files" / "helm-test" / "check_serving.py"
STANDIN = REPO / "profiles" / "standin-cpu.yaml"
BIN = Path(sys.executable).parent


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


@contextmanager
def serving(
    tmp_path: Path, acceptance: float | None, api_key: str = "test-key"
) -> Iterator[dict[str, str]]:
    port, metrics, log = free_port(), free_port(), tmp_path / "logs" / "sglang.log"
    key = tmp_path / "api-key"
    key.write_text(f"{api_key}\n")
    doc = yaml.safe_load(STANDIN.read_text())
    for section in ("target", "drafter"):
        doc[section]["path"] = str((STANDIN.parent / doc[section]["path"]).resolve())
    doc["server"].update(port=port, api_key={"file": str(key)})
    doc["logging"] = {"file": str(log), "decode_log_interval": 10}
    doc["env"] = dict(FAST_ENV)
    if acceptance is not None:
        behaviour = tmp_path / "behaviour.json"
        behaviour.write_text(json.dumps({"acceptance": acceptance}))
        doc["env"]["SPECSERVE_STANDIN_BEHAVIOUR_FILE"] = str(behaviour)
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump(doc))
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    procs = []
    try:
        with (tmp_path / "server.out").open("wb") as out:
            launch = [str(BIN / "specserve-launch"), str(profile)]
            procs.append(subprocess.Popen(launch, stdout=out, stderr=subprocess.STDOUT, env=env))
        with (tmp_path / "exporter.out").open("wb") as out:
            procs.append(subprocess.Popen(
                [str(BIN / "specserve-exporter"), "--source", "file", "--file", str(log),
                 "--profile", str(profile), "--listen-address", f"127.0.0.1:{metrics}"],
                stdout=out, stderr=subprocess.STDOUT, env=env,
            ))  # fmt: skip
        # Like the pod's readiness probe: /health_generate generates a token and, as SGLang's,
        # takes at least 1 s and up to 20 s to answer, so each request may take 30 s.
        _wait_http(f"http://127.0.0.1:{port}/health_generate", 60, request_timeout=30)
        _wait_http(f"http://127.0.0.1:{metrics}/healthz", 20)
        yield {
            "SPECSERVE_TEST_API_URL": f"http://127.0.0.1:{port}",
            "SPECSERVE_TEST_PODS_HOST": "127.0.0.1",
            "SPECSERVE_TEST_METRICS_PORT": str(metrics),
            "SPECSERVE_TEST_API_KEY_FILE": str(key),
            "SPECSERVE_TEST_SPECULATIVE": "true",
            "SPECSERVE_TEST_FLOOR": "1.5",
            "SPECSERVE_TEST_MAX_TOKENS": "120",
            "SPECSERVE_TEST_MAX_REQUESTS": "4",
            "SPECSERVE_TEST_TIMEOUT_SECONDS": "60",
        }
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _run_script(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT)], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=90, check=False)  # fmt: skip


def test_passes_with_real_decode_lines_above_the_floor(tmp_path: Path) -> None:
    with serving(tmp_path, acceptance=None) as env:
        result = _run_script(env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "chat completion ok" in result.stdout
    mean = float(result.stdout.split("mean accept length ")[1].split()[0])
    assert mean > 1.5


def test_fails_when_every_draft_is_rejected(tmp_path: Path) -> None:
    with serving(tmp_path, acceptance=0.0) as env:
        result = _run_script(env)
    assert result.returncode == 1
    assert "mean accept length 1.00" in result.stderr
    assert "is not above the floor 1.5" in result.stderr


def test_fails_without_the_api_key(tmp_path: Path) -> None:
    with serving(tmp_path, acceptance=None) as env:
        env.pop("SPECSERVE_TEST_API_KEY_FILE")
        result = _run_script(env)
    assert result.returncode == 1
    assert "HTTP 401" in result.stderr


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_serving", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


@contextmanager
def _old_sglang(missing: str) -> Iterator[tuple[str, list[str]]]:
    """A server that answers 404 on `missing` and a server_info document anywhere else."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            status = 404 if self.path == missing else 200
            body = json.dumps({"version": "0.4.0", "speculative_algorithm": "EAGLE3"}).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_server_info_falls_back_to_the_deprecated_alias_only_on_404(tmp_path: Path) -> None:
    script = _load_script()
    assert script.SERVER_INFO_PATHS == ("/server_info", "/get_server_info")
    for missing, expected in (
        ("/nothing", ["/server_info"]),  # a current SGLang: the alias is never asked
        ("/server_info", ["/server_info", "/get_server_info"]),  # an older one
    ):
        with _old_sglang(missing) as (url, asked):
            cfg = script.load_config({"SPECSERVE_TEST_API_URL": url})
            summary = script.server_summary(cfg)
        assert asked == expected
        assert summary.startswith("SGLang 0.4.0, speculative algorithm EAGLE3"), summary
