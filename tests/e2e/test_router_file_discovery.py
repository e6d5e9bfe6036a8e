"""Why the Ansible path keeps its rotation instead of smg's file-based discovery (issue 28 item 3).

smg 1.13 can read its workers from a watched JSON manifest (`--discovery-provider file
--discovery-file PATH`), which would replace the rotation's launcher (ansible/roles/router/files/
launch.sh) and the deploy's POST / DELETE calls with one file. Measured here against the real
binary in front of two stand-in nodes that require the deployment's key, on loopback:

- the manifest is watched: a worker added to it is routed to, a worker taken out is `draining`
  at once and dropped a few seconds on (the same as a DELETE), and the manifest's workers get the
  router's `--api-key` (the stand-ins answer 401 without it);
- but service discovery switches smg to IGW mode, where SGLang's native `/generate` must name a
  `model` (400 `missing_model`) while the rotation's router (`--worker-urls`, what the fleet runs)
  serves it without one. Adopting the manifest would break every client of the fleet that uses
  `/generate` as SGLang documents it.

The day smg serves a model-less `/generate` with file discovery, the first test fails: adopt
the manifest then (docs/router.md, "File-based discovery").
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.e2e.processes import Services, free_port, http_ok, wait_until
from tests.e2e.router import router_bin, start_router

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / ".venv" / "bin" / "specserve-standin"
MODEL = ROOT / "tests" / "fixtures" / "models" / "Llama-3.1-8B-Instruct"
KEY = "file-discovery-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
GENERATE = {"text": "hi", "sampling_params": {"max_new_tokens": 4}}


@dataclass
class Fleet:
    services: Services
    nodes: list[str]
    manifest: Path


def write_manifest(path: Path, urls: list[str]) -> None:
    """Replace the manifest by rename, as a deploy would write it."""
    staged = path.with_suffix(".tmp")
    staged.write_text(json.dumps({"version": 1, "workers": [{"url": u} for u in urls]}))
    os.replace(staged, path)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    services = Services(tmp_path)
    try:
        nodes = []
        for index in range(2):
            port = free_port()
            services.start(
                f"standin{index}",
                [str(STANDIN), "--model-path", str(MODEL), "--host", "127.0.0.1", "--port",
                 str(port), "--api-key", KEY],
                {"SPECSERVE_STANDIN_LOAD_SECONDS": "0.2",
                 "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.1"},
            )  # fmt: skip
            nodes.append(f"http://127.0.0.1:{port}")
        for node in nodes:
            wait_until("a stand-in's /health", http_ok(node + "/health"), 60, services=services)
        yield Fleet(services, nodes, tmp_path / "workers.json")
    finally:
        services.stop_all()


def start_file_router(fleet: Fleet) -> str:
    port = free_port()
    fleet.services.start("file-router", [
        str(router_bin() / "smg"), "launch", "--host", "127.0.0.1", "--port", str(port),
        "--discovery-provider", "file", "--discovery-file", str(fleet.manifest),
        "--api-key", KEY, "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
        "--health-check-interval-secs", "1", "--log-level", "warn",
    ])  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_until("the file router's /liveness", http_ok(url + "/liveness"), 60,
               services=fleet.services)  # fmt: skip
    return url


def workers(router: str) -> list[dict[str, object]]:
    response = requests.get(router + "/workers", headers=AUTH, timeout=10)
    response.raise_for_status()
    return list(response.json()["workers"])


def listed(router: str) -> dict[str, str]:
    """url -> status (`healthy`, `draining`, ...) of the router's workers."""
    return {str(w["url"]): str(w.get("status", "")) for w in workers(router)}


def routable(router: str, node: str) -> bool:
    """Listed, healthy and not draining, from one listing."""
    return any(w["url"] == node and w["is_healthy"] and w.get("status") != "draining"
               for w in workers(router))  # fmt: skip


def served_model(node: str) -> str:
    models = requests.get(node + "/v1/models", headers=AUTH, timeout=10)
    models.raise_for_status()
    return str(models.json()["data"][0]["id"])


def test_file_discovery_makes_generate_need_a_model_the_rotation_does_not(fleet: Fleet) -> None:
    write_manifest(fleet.manifest, fleet.nodes[:1])
    file_router = start_file_router(fleet)
    wait_until("the file router to route to the manifest's node",
               lambda: routable(file_router, fleet.nodes[0]), 60,
               services=fleet.services)  # fmt: skip
    rotation_router = start_router(fleet.services, fleet.nodes[:1], name="rotation-router",
                                   api_key=KEY)  # fmt: skip
    wait_until("the rotation router to route to its node",
               lambda: routable(rotation_router.url, fleet.nodes[0]), 60,
               services=fleet.services)  # fmt: skip

    plain = requests.post(rotation_router.url + "/generate", json=GENERATE, headers=AUTH,
                          timeout=60)  # fmt: skip
    assert plain.status_code == 200, plain.text  # the fleet's contract: no model needed

    without = requests.post(file_router + "/generate", json=GENERATE, headers=AUTH, timeout=60)
    assert without.status_code == 400 and "missing_model" in without.text, (
        f"smg {without.status_code} {without.text[:300]!r}: with file discovery it now serves "
        "/generate without a model, the one reason the Ansible path kept its rotation; adopt "
        "the manifest (docs/router.md, 'File-based discovery')"
    )
    named = requests.post(file_router + "/generate", headers=AUTH, timeout=60,
                          json={**GENERATE, "model": served_model(fleet.nodes[0])})  # fmt: skip
    # 200 through nodes that refuse a request without the key: the manifest's workers got it.
    assert named.status_code == 200, named.text


def test_the_manifest_is_watched_like_the_worker_api(fleet: Fleet) -> None:
    first, second = fleet.nodes
    write_manifest(fleet.manifest, [first])
    router = start_file_router(fleet)
    wait_until("the manifest's first node routed to", lambda: routable(router, first), 60,
               services=fleet.services)  # fmt: skip

    started = time.monotonic()
    write_manifest(fleet.manifest, [first, second])
    wait_until("a node added to the manifest routed to", lambda: routable(router, second), 60,
               services=fleet.services)  # fmt: skip
    added_after = time.monotonic() - started

    started = time.monotonic()
    write_manifest(fleet.manifest, [second])
    wait_until("a node taken out of the manifest out of routing",
               lambda: not routable(router, first), 30, services=fleet.services)  # fmt: skip
    out_after = time.monotonic() - started
    status = listed(router).get(first)
    wait_until("the node dropped", lambda: first not in listed(router), 30,
               services=fleet.services)  # fmt: skip
    dropped_after = time.monotonic() - started
    print(f"\nsmg file discovery: a node added to the manifest routed to {added_after:.1f} s on; "
          f"one taken out left routing {out_after:.1f} s on ({status or 'gone'}), dropped "
          f"{dropped_after:.1f} s on")
    assert status in (None, "draining"), status
    assert routable(router, second)
