"""The router's metrics as the real binary exports them (issue 19 item 4, issue 28).

The pinned smg runs on loopback in front of two stand-in servers and goes through
what a fleet goes through: traffic, a worker taken out of rotation and put back (as the rolling
deploy does), a worker that dies under traffic (retries, failing health checks). Its /metrics
must then carry every family specserve.monitoring.metrics.ROUTER_METRICS declares, with that
type and those labels, every router name the generated rules, dashboard and Grafana alerts
query, and the worker states SpecServeWorkerOutOfRotation reads (1 in rotation, 0 failing or
draining; a removed worker's series are gone, which the alert reads as -1).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from specserve.monitoring import metrics
from tests.e2e.processes import Services, free_port, http_ok, wait_until
from tests.e2e.router import Router, start_router

from .conftest import MONITORING, REPO
from .expressions import all_promql_expressions

BIN = REPO / ".venv" / "bin"
MODEL = REPO / "tests" / "fixtures" / "models" / "Llama-3.1-8B-Instruct"
_TYPE = re.compile(r"^# TYPE (\S+) (\S+)$", re.MULTILINE)
_ROUTER_NAME = re.compile(r"\bsmg_[a-z_]+")


def _standin(services: Services, name: str, root: Path) -> str:
    port = free_port()
    behaviour = root / f"{name}-behaviour.yaml"
    behaviour.write_text("acceptance: 0.6\n", encoding="utf-8")
    services.start(
        name,
        [str(BIN / "specserve-standin"), "--model-path", str(MODEL), "--host", "127.0.0.1",
         "--port", str(port)],
        {"SPECSERVE_STANDIN_LOAD_SECONDS": "0.2", "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.1",
         "SPECSERVE_STANDIN_TIME_SCALE": "0.02",
         "SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour)},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_until(f"stand-in {name} /health", http_ok(url + "/health"), 60, services=services)
    return url


def _chat(router: Router, stream: bool = False) -> int:
    # smg routes by model: the body must name a model a worker serves (its served model name;
    # the stand-in's is its model path), or the answer is 404 model_not_found.
    response = requests.post(
        router.url + "/v1/chat/completions",
        json={"model": str(MODEL), "messages": [{"role": "user", "content": "hi"}],
              "max_tokens": 4, "stream": stream},
        timeout=60,
    )  # fmt: skip
    assert response.content is not None  # a stream is read to its end
    return response.status_code


def _gauge(router: Router, name: str) -> dict[str, float]:
    return {
        sample.labels["worker"]: sample.value
        for family in text_string_to_metric_families(router.metrics())
        for sample in family.samples
        if sample.name == name
    }


def _health(router: Router) -> dict[str, float]:
    return _gauge(router, metrics.ROUTER_WORKER_HEALTH)


def _circuit(router: Router) -> dict[str, float]:
    return _gauge(router, metrics.ROUTER_WORKER_CIRCUIT)


class Scrapes:
    """What the router exported at each step the test cares about."""

    def __init__(self) -> None:
        self.health: dict[str, dict[str, float]] = {}
        self.circuit: dict[str, dict[str, float]] = {}
        self.final = ""
        self.statuses: list[int] = []
        self.workers: tuple[str, str] = ("", "")


@pytest.fixture(scope="module")
def scrapes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scrapes]:
    root = tmp_path_factory.mktemp("router-metrics")
    services = Services(root)
    seen = Scrapes()
    try:
        one, two = _standin(services, "standin-1", root), _standin(services, "standin-2", root)
        seen.workers = (one, two)
        # round_robin: after `two` dies, every other request is sent to it first and retried.
        router = start_router(services, [one, two], extra=["--policy", "round_robin"])
        seen.statuses += [_chat(router) for _ in range(3)] + [_chat(router, stream=True)]
        wait_until("both workers healthy", lambda: _health(router) == {one: 1, two: 1}, 30,
                   services=services)  # fmt: skip
        seen.health["serving"], seen.circuit["serving"] = _health(router), _circuit(router)

        router.remove(one)  # a rolling deploy takes the node out: draining, then gone
        wait_until("the removed worker draining", lambda: _health(router).get(one) == 0, 30,
                   services=services)  # fmt: skip
        seen.health["draining"], seen.circuit["draining"] = _health(router), _circuit(router)
        wait_until("the removed worker's series gone", lambda: one not in _health(router), 30,
                   services=services)  # fmt: skip
        seen.health["removed"], seen.circuit["removed"] = _health(router), _circuit(router)
        seen.statuses += [_chat(router) for _ in range(2)]
        router.add(one)  # ... and puts it back
        wait_until("the worker back at 1", lambda: _health(router).get(one) == 1, 30,
                   services=services)  # fmt: skip
        seen.health["re-added"], seen.circuit["re-added"] = _health(router), _circuit(router)

        dead = next(s for s in services.started if s.name == "standin-2")
        dead.stop()
        services.started.remove(dead)  # stopped on purpose: no longer checked for being alive
        seen.statuses += [_chat(router) for _ in range(4)]
        wait_until("the dead worker at 0", lambda: _health(router).get(two) == 0, 30,
                   services=services)  # fmt: skip
        seen.health["dead"] = _health(router)
        seen.final = router.metrics()
        yield seen
    finally:
        services.stop_all()


def test_requests_are_served_through_the_router(scrapes: Scrapes) -> None:
    # Retries hide the dead worker from clients: every request succeeds.
    assert scrapes.statuses == [200] * 10


def test_worker_health_is_one_or_zero_and_a_removed_worker_has_no_series(
    scrapes: Scrapes,
) -> None:
    one, two = scrapes.workers
    # The values SpecServeWorkerOutOfRotation reads: 1 in rotation, 0 unhealthy or draining;
    # a removed worker has no series at all (metrics.router_worker_state reads that as -1).
    assert scrapes.health["serving"] == {one: 1, two: 1}
    assert scrapes.circuit["serving"] == {one: 0, two: 0}
    assert scrapes.health["draining"] == {one: 0, two: 1}
    assert scrapes.health["removed"] == {two: 1}
    assert scrapes.circuit["removed"] == {two: 0}
    assert scrapes.health["re-added"] == {one: 1, two: 1}
    assert scrapes.circuit["re-added"] == {one: 0, two: 0}
    assert scrapes.health["dead"] == {one: 1, two: 0}


@pytest.mark.parametrize("declared", metrics.ROUTER_METRICS, ids=lambda m: m.name)
def test_each_declared_family_has_its_type_and_labels(
    scrapes: Scrapes, declared: metrics.RouterMetric
) -> None:
    types = dict(_TYPE.findall(scrapes.final))
    assert types.get(declared.name) == declared.type, (declared.name, sorted(types))
    wanted = {declared.name} if declared.type != "histogram" else {
        declared.name + suffix for suffix in ("_bucket", "_sum", "_count")}  # fmt: skip
    found: dict[str, set[frozenset[str]]] = {}
    for family in text_string_to_metric_families(scrapes.final):
        for sample in family.samples:
            if sample.name in wanted:
                found.setdefault(sample.name, set()).add(frozenset(sample.labels) - {"le"})
    assert set(found) == wanted, (declared.name, sorted(found))
    for name, label_sets in found.items():
        assert label_sets == {frozenset(declared.labels)}, (name, label_sets)


def _queried_router_names() -> set[str]:
    text = "\n".join(expr for _where, expr in all_promql_expressions())
    for path in ("prometheus/specserve-rules.yml", "grafana/dashboards/specserve.json",
                 "grafana/provisioning/alerting/specserve-alerts.yml"):  # fmt: skip
        text += (MONITORING / path).read_text(encoding="utf-8")
    # Histograms are declared by family; queries read their `_bucket` series.
    return {re.sub(r"_bucket$", "", name) for name in _ROUTER_NAME.findall(text)}


def test_every_router_name_the_monitoring_queries_is_exported(scrapes: Scrapes) -> None:
    queried = _queried_router_names()
    assert {metrics.ROUTER_WORKER_HEALTH, metrics.ROUTER_WORKER_CIRCUIT} <= queried
    exported = set(dict(_TYPE.findall(scrapes.final)))
    assert queried <= exported, sorted(queried - exported)
    assert queried <= {m.name for m in metrics.ROUTER_METRICS}, sorted(queried)


def test_the_router_measures_no_ttft_for_http_workers(scrapes: Scrapes) -> None:
    # smg records smg_router_ttft_seconds / _tpot_seconds only on its gRPC path; the fleet's
    # workers are HTTP, so a streamed request through the router leaves them out. The
    # dashboard compares the router's whole-request duration with the servers' own latency
    # instead (docs/router.md); this fails the day the HTTP path starts recording them.
    types = dict(_TYPE.findall(scrapes.final))
    assert "smg_router_requests_total" in types
    assert 'streaming="true"' in scrapes.final
    assert not {"smg_router_ttft_seconds", "smg_router_tpot_seconds"} & set(types)


def test_5xx_responses_less_retries_count_the_failed_requests(scrapes: Scrapes) -> None:
    """The availability SLO's bad events (specserve.monitoring.slo): the router's 5xx responses
    less its retries. A dead worker's requests are retried and each attempt adds a response, so
    5xx responses alone would overcount; each retry follows one failed attempt, so what is left
    is one per request that failed in the end (those refused with no worker left included)."""
    samples = [s for f in text_string_to_metric_families(scrapes.final) for s in f.samples]
    requests_total = sum(s.value for s in samples if s.name == metrics.ROUTER_REQUESTS)
    failed = sum(s.value for s in samples if s.name == metrics.ROUTER_UPSTREAM_RESPONSES
                 and s.labels["status_code"].startswith("5"))  # fmt: skip
    retries = sum(s.value for s in samples if s.name == metrics.ROUTER_WORKER_RETRIES)
    assert requests_total == len(scrapes.statuses)
    # This run retried failed attempts (a dead worker in the rotation): the correction matters.
    assert failed > 0 and retries > 0, (failed, retries)
    assert failed - retries == sum(code >= 500 for code in scrapes.statuses)
