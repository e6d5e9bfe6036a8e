"""The stand-in's /v1/loads: SGLang's live load endpoint, which the fleet's drain step reads to
know a node has finished its requests (ansible/roles/router/tasks/drain.yml). Its field names
are checked against SGLang's own LoadSnapshot in every verified version."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from specserve.upstream import VERIFIED_VERSIONS, sglang_contract
from tests.contract.sglang_venv import run_snippet

FIELDS = """
import json, sys
from sglang.srt.managers.load_snapshot import LoadSnapshot
print(json.dumps(list(LoadSnapshot.__struct_fields__)))
"""


def _loads(url: str, key: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = requests.get(url + "/v1/loads", headers=headers, timeout=5)
    response.raise_for_status()
    return dict(response.json())


def _running(doc: dict[str, Any]) -> int:
    return sum(load["num_running_reqs"] + load["num_waiting_reqs"] for load in doc["loads"])


def test_loads_counts_the_requests_being_answered(start_standin: Callable[..., Any]) -> None:
    server = start_standin("--api-key", "sk-loads")
    assert _running(_loads(server.url, "sk-loads")) == 0
    # Not exempt from the API key in SGLang (only /health, /ready, /metrics are).
    assert requests.get(server.url + "/v1/loads", timeout=5).status_code == 401
    done = threading.Event()

    def long_generation() -> None:
        requests.post(server.url + "/generate", timeout=60,
                      headers={"Authorization": "Bearer sk-loads"},
                      json={"text": "x", "sampling_params": {"max_new_tokens": 600,
                                                             "ignore_eos": True}})
        done.set()

    threads = [threading.Thread(target=long_generation) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    seen = 0
    while time.monotonic() < deadline and not done.is_set():
        seen = max(seen, _running(_loads(server.url, "sk-loads")))
        if seen == 2:
            break
        time.sleep(0.02)
    for thread in threads:
        thread.join(60)
    assert seen == 2, "/v1/loads did not count the two generations in flight"
    assert _running(_loads(server.url, "sk-loads")) == 0


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_loads_fields_are_sglangs(version: str, start_standin: Callable[..., Any]) -> None:
    assert "/v1/loads" in sglang_contract(version).endpoints
    fields = set(run_snippet(version, FIELDS))
    doc = _loads(start_standin().url)
    assert {"timestamp", "version", "accelerator", "num_accelerators", "loads"} == set(doc)
    for load in doc["loads"]:
        assert set(load) <= fields, sorted(set(load) - fields)
        assert {"dp_rank", "num_running_reqs", "num_waiting_reqs"} <= set(load)
