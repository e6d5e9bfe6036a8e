"""The real SGLang router (the pinned smg from PyPI) on loopback, for tests.

scripts/setup/router.sh installs it into .cache/router-venv at the versions.yaml pin and prints
its bin directory; a failed install fails the test that needs it (never a skip).
"""

from __future__ import annotations

import functools
import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.e2e.processes import Service, Services, free_port, http_ok, wait_until

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup" / "router.sh"


@functools.cache
def router_bin() -> Path:
    """The directory holding the pinned router's `smg` entry point (installed once a run)."""
    done = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=900,
                          check=False)  # fmt: skip
    assert done.returncode == 0, f"scripts/setup/router.sh failed:\n{done.stderr[-2000:]}"
    bindir = Path(done.stdout.strip().splitlines()[-1])
    assert (bindir / "smg").is_file(), f"no smg in {bindir}: {done.stdout[-500:]}"
    return bindir


# Everything `smg launch` does but serve (smg.launch_router.main, the upstream image's
# entrypoint): parse, switch IGW on for discovery, validate, build the Rust Router from the
# arguments. Prints the final arguments.
LAUNCH = """\
import dataclasses, json, sys
import smg.launch_router as launcher
launcher.Router.start = lambda self: None
args = launcher.parse_router_args(sys.argv[1:])
launcher.launch_router(args)
print(json.dumps(dataclasses.asdict(args), default=str))
"""


def launched_args(argv: Sequence[str]) -> dict[str, Any]:
    """The arguments the pinned router ends up with for `argv`, as it would start with them;
    an argv it refuses fails the calling test with the router's own words."""
    result = subprocess.run([str(router_bin() / "python"), "-c", LAUNCH, *argv],
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, f"the real router refused the argv {argv}:\n{result.stderr}"
    parsed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


@dataclass
class Router:
    service: Service
    url: str
    metrics_target: str  # host:port of its metrics listener, as Prometheus scrapes it
    api_key: str | None = None  # its --api-key, which its worker API then requires

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def metrics_url(self) -> str:
        return f"http://{self.metrics_target}/metrics"

    def workers(self) -> list[dict[str, object]]:
        response = requests.get(self.url + "/workers", headers=self.headers, timeout=10)
        response.raise_for_status()
        return list(response.json()["workers"])

    def remove(self, worker_url: str) -> None:
        """Take a worker out of rotation the way a rolling deploy does (DELETE /workers/{id})."""
        ids = [w["id"] for w in self.workers() if w["url"] == worker_url]
        assert ids, f"{worker_url} is not a worker of the router: {self.workers()}"
        requests.delete(f"{self.url}/workers/{ids[0]}", headers=self.headers,
                        timeout=10).raise_for_status()

    def add(self, worker_url: str, timeout: float = 30) -> None:
        """Put a worker (back) in, as the deploy's join does: a URL smg still drains after its
        removal (5 s) answers 409 until it is gone, so the add is retried until accepted."""
        deadline = time.monotonic() + timeout
        while True:
            response = requests.post(self.url + "/workers", json={"url": worker_url},
                                     headers=self.headers, timeout=10)
            if response.status_code != 409 or time.monotonic() > deadline:
                response.raise_for_status()
                return
            time.sleep(0.5)

    def metrics(self) -> str:
        response = requests.get(self.metrics_url, timeout=10)
        response.raise_for_status()
        return response.text


def start_router(
    services: Services,
    workers: Sequence[str],
    *,
    name: str = "router",
    extra: Sequence[str] = (),
    api_key: str | None = None,
) -> Router:
    """`smg launch` in front of `workers`, serving and exporting metrics on 127.0.0.1 only.

    Health checks every second (the default is 60 s) so a test sees a worker's state change
    within seconds."""
    port, metrics_port = free_port(), free_port()
    argv = [
        str(router_bin() / "smg"), "launch", "--host", "127.0.0.1", "--port", str(port),
        "--worker-urls", *workers,
        "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port),
        "--health-check-interval-secs", "1", "--log-level", "warn", *extra,
        *(["--api-key", api_key] if api_key else []),
    ]  # fmt: skip
    service = services.start(name, argv)
    url = f"http://127.0.0.1:{port}"
    wait_until("the router's /health", http_ok(url + "/health"), 60, services=services)
    router = Router(service, url, f"127.0.0.1:{metrics_port}", api_key)
    wait_until(
        f"the router to list {len(workers)} worker(s)",
        lambda: len(router.workers()) == len(workers), 30, services=services,
    )  # fmt: skip
    return router
