"""What smg's own draining does with a request in flight (issue 28 item 2).

The rolling deploy takes a node out of the router (DELETE /workers/{id}) and restarts its server
only once the node's own in-flight count, SGLang's /v1/loads, is 0
(ansible/roles/router/tasks/drain.yml). smg 1.x has a `draining` state that could look like the
same thing; this measures it against the real binary in front of a stand-in: the router drops the
worker a fixed settle time after the removal, with the generation still running on the node, and
the generation still finishes (200). So the router's drain cannot replace the node's count: a
restart at the router's word would cut the generation. The day smg waits for in-flight requests
this fails, and the drain role can lean on the router instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.e2e.processes import Services, free_port, http_ok, wait_until
from tests.e2e.router import Router, start_router

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / ".venv" / "bin" / "specserve-standin"
MODEL = ROOT / "tests" / "fixtures" / "models" / "Llama-3.1-8B-Instruct"
# At the stand-in's real pace (time scale 1) this many tokens take ~10 s: longer than smg's
# 5 s settle.
TOKENS = 900


@pytest.fixture
def node_behind_router(tmp_path: Path) -> Iterator[tuple[str, Router]]:
    services = Services(tmp_path)
    try:
        port = free_port()
        services.start(
            "standin",
            [str(STANDIN), "--model-path", str(MODEL), "--host", "127.0.0.1", "--port",
             str(port)],
            {"SPECSERVE_STANDIN_LOAD_SECONDS": "0.2", "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.1",
             "SPECSERVE_STANDIN_TIME_SCALE": "1"},
        )  # fmt: skip
        node = f"http://127.0.0.1:{port}"
        wait_until("the stand-in's /health", http_ok(node + "/health"), 60, services=services)
        yield node, start_router(services, [node])
    finally:
        services.stop_all()


def _in_flight(node: str) -> int:
    loads = requests.get(node + "/v1/loads", timeout=10).json()["loads"]
    return sum(int(rank["num_running_reqs"]) + int(rank["num_waiting_reqs"]) for rank in loads)


def test_smg_drops_a_removed_worker_with_its_request_still_running(
    node_behind_router: tuple[str, Router],
) -> None:
    node, router = node_behind_router
    answer: dict[str, int] = {}

    def generate() -> None:
        response = requests.post(
            router.url + "/generate",
            json={"text": "hi", "sampling_params": {"max_new_tokens": TOKENS,
                                                      "ignore_eos": True}},
            timeout=120,
        )  # fmt: skip
        answer["status"] = response.status_code

    client = threading.Thread(target=generate)
    client.start()
    wait_until("the generation running on the node", lambda: _in_flight(node) == 1, 30)
    removed_at = time.monotonic()
    router.remove(node)
    # Out of routing within moments: smg answers the DELETE before its worker job runs, so on a
    # loaded machine the first read may still say ready (a CI run saw it once).
    wait_until("the removed worker out of routing (draining or gone)",
               lambda: {w["status"] for w in router.workers() if w["url"] == node}
               <= {"draining"}, 5)  # fmt: skip
    wait_until("the router to drop the worker",
               lambda: node not in {w["url"] for w in router.workers()}, 30)  # fmt: skip
    dropped_after = time.monotonic() - removed_at
    still_running = _in_flight(node)
    client.join(timeout=120)
    finished_after = time.monotonic() - removed_at
    print(f"\nsmg drain: worker dropped {dropped_after:.1f} s after its removal with "
          f"{still_running} request in flight on the node; the generation answered "
          f"{answer.get('status')} {finished_after:.1f} s after the removal")
    assert still_running == 1, "the router waited for the request: the drain could use it"
    assert answer == {"status": 200}
    assert finished_after > dropped_after + 1
