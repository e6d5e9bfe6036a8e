"""Real images on the real Docker engine: the stand-in container (launcher -> stand-in, log file
on a shared volume) and the exporter container (non-root, read-only root filesystem) following
that file, both with host networking on 127.0.0.1."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from specserve.logpath import LOG_DIR, LOG_FILE
from tests.standin.helpers import FAST_ENV, free_port

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
VERSIONS: dict[str, Any] = yaml.safe_load((ROOT / "versions.yaml").read_text(encoding="utf-8"))


def ref(name: str) -> str:
    image = VERSIONS["specserve_images"][name]
    return f"{image['repository']}:{image['tag']}"


def docker(*args: str, check: bool = True, timeout: float = 120) -> str:
    result = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout.strip()


def build() -> float:
    start = time.monotonic()
    result = subprocess.run(
        [str(ROOT / "scripts/build-images.sh"), "--local-base"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return time.monotonic() - start


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        pytest.fail("no Docker engine answers: run scripts/setup/docker.sh")
    build()
    return {name: docker("image", "inspect", "--format", "{{.Id}}", ref(name))
            for name in ("exporter", "standin")}  # fmt: skip


def test_unchanged_inputs_rebuild_from_cache(images: dict[str, str]) -> None:
    # Build once more first: on a shared checkout another edit may have landed since the
    # fixture's build; the next build then has nothing new to do.
    build()
    first = {name: docker("image", "inspect", "--format", "{{.Id}}", ref(name)) for name in images}
    seconds = build()
    for name, image_id in first.items():
        assert docker("image", "inspect", "--format", "{{.Id}}", ref(name)) == image_id
    assert seconds < 30


@pytest.fixture
def stack(images: dict[str, str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    tag = uuid.uuid4().hex[:8]
    volume, standin, exporter = f"specserve-test-{tag}", f"ss-standin-{tag}", f"ss-exp-{tag}"
    port, metrics_port = free_port(), free_port()
    doc = yaml.safe_load((ROOT / "profiles/standin-cpu.yaml").read_text(encoding="utf-8"))
    doc["server"]["port"] = port
    doc["logging"] = {"file": LOG_FILE, "decode_log_interval": 10}
    doc["env"] = dict(FAST_ENV)
    profile = tmp_path / "test.yaml"
    profile.write_text(yaml.safe_dump(doc), encoding="utf-8")
    profile.chmod(0o644)
    docker("volume", "create", volume)
    try:
        # Mounted next to the baked profile so its relative model paths still resolve.
        docker(
            "run", "-d", "--name", standin, "--network", "host",
            "-v", f"{volume}:{LOG_DIR}",
            "-v", f"{profile}:/usr/share/specserve/profiles/test.yaml:ro",
            "-e", "SPECSERVE_PROFILE=/usr/share/specserve/profiles/test.yaml",
            ref("standin"),
        )  # fmt: skip
        docker(
            "run", "-d", "--name", exporter, "--network", "host", "--read-only",
            "-v", f"{volume}:{LOG_DIR}:ro",
            "-e", f"SPECSERVE_EXPORTER_HEALTHCHECK_URL=http://127.0.0.1:{metrics_port}/healthz",
            ref("exporter"),
            "--source", "file", "--file", LOG_FILE, "--from-beginning",
            "--listen-address", f"127.0.0.1:{metrics_port}", "--draft-tokens", "4",
        )  # fmt: skip
        yield {
            "standin": standin, "exporter": exporter,
            "url": f"http://127.0.0.1:{port}", "metrics": f"http://127.0.0.1:{metrics_port}",
        }  # fmt: skip
    finally:
        for name in (standin, exporter):
            docker("rm", "-f", name, check=False)
        docker("volume", "rm", "-f", volume, check=False)


def _until(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except requests.RequestException:
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _sample(text: str, name: str) -> float | None:
    match = re.search(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, flags=re.MULTILINE)
    return float(match[1]) if match else None


def test_standin_and_exporter_containers_together(stack: dict[str, Any]) -> None:
    url, metrics = stack["url"], stack["metrics"]
    _until(lambda: requests.get(url + "/health", timeout=1).status_code == 200, 30, "stand-in")
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 60, "ignore_eos": True}
    for _ in range(3):
        reply = requests.post(url + "/v1/chat/completions", json=body, timeout=30)
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 60

    def decode_metrics() -> str | None:
        text = requests.get(metrics + "/metrics", timeout=2).text
        parsed = _sample(text, 'specserve_log_lines_parsed_total{kind="decode"}')
        return text if parsed else None

    text = _until(decode_metrics, 30, "decode metrics from the exporter")
    accept = _sample(text, "specserve_decode_last_accept_length")
    assert accept is not None and 1.9 <= accept <= 2.5  # the model's 2.18 for steps 3, top-k 1
    graph = re.search(r'^specserve_decode_graph_enabled\{[^}]*graph="cuda"[^}]*\} 1\.0$', text,
                      flags=re.MULTILINE)  # fmt: skip
    assert graph, "graph state not exported"
    assert (_sample(text, "specserve_decode_accept_length_count") or 0) >= 1

    # The exporter runs as a non-root user on a read-only root filesystem, and turns healthy.
    assert docker("exec", stack["exporter"], "id", "-u") == "10001"
    assert docker("inspect", "--format", "{{.HostConfig.ReadonlyRootfs}}", stack["exporter"]) == (
        "true"
    )
    health = _until(
        lambda: (
            docker("inspect", "--format", "{{.State.Health.Status}}", stack["exporter"])
            == "healthy"
        ),
        40,
        "exporter HEALTHCHECK healthy",
    )
    assert health

    # The stand-in container's own log (stdout) carries the launcher's command line.
    logs = docker("logs", stack["standin"])
    assert "--speculative-algorithm EAGLE3" in logs or "EAGLE3" in docker(
        "logs", stack["standin"], check=False
    )
    # docker stop = SIGTERM to the exec'd server: graceful, exit 0.
    docker("stop", "-t", "20", stack["standin"], timeout=60)
    assert docker("inspect", "--format", "{{.State.ExitCode}}", stack["standin"]) == "0"
