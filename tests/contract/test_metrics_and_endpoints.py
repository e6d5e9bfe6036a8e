"""Every `sglang:*` metric and label, and every SGLang HTTP endpoint the product relies on, exists
in every verified SGLang version; probes ask the endpoint that answers their question, wait longer
than SGLang does, and reach it without the API key.

What the product asks is read from its own files (tests/contract/product_refs.py); what SGLang
offers is its contract (specserve.upstream, extracted from SGLang's code) and, for deprecated
routes, SGLang's own `http_server.py` in the version's venv (`bash scripts/setup/sglang.sh`).
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache

import httpx
import pytest

from specserve.bench.client import describe_http_error
from specserve.bench.server import SERVER_INFO_PATHS, ServerError, server_info
from specserve.profile.classlabel import RULES_CLASS_LABEL
from specserve.upstream import VERIFIED_VERSIONS, SGLangContract, sglang_contract
from tests.contract.product_refs import CALL_SOURCES, METRIC_SOURCES, ROOT, EndpointCall, MetricRef
from tests.contract.promql import selectors
from tests.contract.sglang_venv import venv_python, venv_root
from tests.standin.helpers import FAST_ENV, Standin, free_port

# Labels a query may use that SGLang does not declare: Prometheus' own target labels, the
# Prometheus Operator's (ServiceMonitor / PodMonitor targets; the chart's `match_on` examples)
# and the Ansible scrape job's `node` (ansible/roles/monitoring/templates/scrape-jobs.yml.j2).
TARGET_LABELS = frozenset(
    {"instance", "job", "node", "namespace", "pod", "container", "service", "endpoint"}
)
HISTOGRAM_LABELS = {"_bucket": frozenset({"le"})}


def _sglang_refs() -> list[MetricRef]:
    return [
        r for source in METRIC_SOURCES.values() for r in source() if r.name.startswith("sglang:")
    ]


def _calls() -> list[EndpointCall]:
    return [c for source in CALL_SOURCES.values() for c in source()]


# Collectors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", list(METRIC_SOURCES))
def test_every_metric_source_yields_references(source: str) -> None:
    """A collector that reads nothing would make every check below pass vacuously."""
    refs = METRIC_SOURCES[source]()
    assert refs, f"{source}: no metric name found; the collector no longer reads these files"


@pytest.mark.parametrize("source", list(CALL_SOURCES))
def test_every_call_source_yields_calls(source: str) -> None:
    calls = CALL_SOURCES[source]()
    assert calls, f"{source}: no SGLang URL found; the collector no longer reads these files"


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (
            "histogram_quantile(0.9, sum by (instance, le) (rate(sglang:t_bucket[$__interval])))",
            [("sglang:t_bucket", {"instance", "le"})],
        ),
        (
            "(time() - max without (dp) (specserve_last)) and on () (sum by () (sglang:run) > 0)",
            [("specserve_last", {"dp"}), ("sglang:run", set())],
        ),
        (
            'sum(rate(sglang:a_total{job="$job", kind=~"x|y"}[5m])) by (pod) / ignoring(kind) b',
            [("sglang:a_total", {"job", "kind", "pod"}), ("b", {"kind"})],
        ),
        ('{__name__="sglang:c", tp_rank="0"} offset 5m', [("sglang:c", {"tp_rank"})]),
    ],
)
def test_the_promql_reader(expr: str, expected: list[tuple[str, set[str]]]) -> None:
    assert [(s.name, set(s.labels)) for s in selectors(expr)] == expected


def test_the_collectors_find_what_the_product_is_known_to_ask() -> None:
    """Spot checks that the readers work: a dashboard histogram read with `le`, the alert's
    running-requests metric, the gate's generation, every probe of the chart."""
    refs = _sglang_refs()
    assert len({r.name for r in refs}) >= 5
    assert any(
        r.name == "sglang:time_to_first_token_seconds_bucket" and "le" in r.labels and r.in_query
        for r in refs
    )
    assert any(r.name == "sglang:num_running_reqs" and r.in_query for r in refs)
    roles = {(c.role, c.path) for c in _calls()}
    assert {"startup", "readiness", "liveness", "gate", "scrape"} <= {role for role, _ in roles}
    assert ("call", "/generate") in roles and ("call", "/v1/chat/completions") in roles


# Metrics ----------------------------------------------------------------------------------------


def _base_metric(contract: SGLangContract, series: str) -> str | None:
    if series in contract.metrics:
        return series
    for name, metric in contract.metrics.items():
        if series in metric.series:
            return name
    return None


def _allowed_labels(contract: SGLangContract, series: str, base: str) -> frozenset[str]:
    extra = [labels for suffix, labels in HISTOGRAM_LABELS.items() if series.endswith(suffix)]
    labels = contract.metric_labels(base) | TARGET_LABELS | frozenset().union(*extra)
    # The request-class label (server.request_class_label) is one of SGLang's allowed custom
    # labels, declared on every tokenizer metric beside `priority` (0.5.21: TokenizerManager's
    # metric labels; 0.5.23: metrics_collector.tokenizer_metric_labels), so where `priority` is.
    if "priority" in contract.metric_labels(base):
        labels |= {RULES_CLASS_LABEL}
    return labels


def _unknown_metric(contract: SGLangContract, ref: MetricRef) -> str:
    close = difflib.get_close_matches(ref.name, sorted(contract.metric_series), n=3, cutoff=0.7)
    base = _base_metric(contract, ref.name)
    hint = (
        f"{ref.name} is a metric name; /metrics exposes {sorted(contract.metrics[base].series)}"
        if base == ref.name
        else f"closest series: {close}"
    )
    return f"{ref.source}: {ref.name}: not in SGLang {contract.version}'s /metrics ({hint})"


def metric_problems(contract: SGLangContract, refs: list[MetricRef]) -> list[str]:
    problems: list[str] = []
    for ref in refs:
        base = _base_metric(contract, ref.name)
        # In a query a name must be a series as exposed (a histogram only as _bucket/_sum/_count,
        # a counter with _total); in code or prose the metric's own name is fine too.
        exposed = ref.name in contract.metric_series or (not ref.in_query and base == ref.name)
        if base is None or not exposed:
            problems.append(_unknown_metric(contract, ref))
            continue
        unknown = ref.labels - _allowed_labels(contract, ref.name, base)
        if unknown:
            problems.append(
                f"{ref.source}: {ref.name} queried by {sorted(unknown)}, labels SGLang "
                f"{contract.version} does not give it (it has "
                f"{sorted(contract.metric_labels(base))})"
            )
    return sorted(set(problems))


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_every_sglang_metric_and_label_the_product_queries_exists(version: str) -> None:
    refs = _sglang_refs()
    assert refs, "no sglang:* reference found at all"
    problems = metric_problems(sglang_contract(version), refs)
    assert not problems, "\n".join(problems)


def test_a_wrong_name_suffix_or_label_would_be_caught() -> None:
    """The check itself, on references the product does not make: a histogram queried by its
    bare name, a counter without _total, a label SGLang does not set, a name it never had."""
    contract = sglang_contract(VERIFIED_VERSIONS[0])
    counter = next(m.name for m in contract.metrics.values() if m.type == "Counter")
    assert counter.endswith("_total"), counter
    bad = [
        MetricRef("q1", "sglang:time_to_first_token_seconds", frozenset(), in_query=True),
        MetricRef("q2", counter.removesuffix("_total"), frozenset(), in_query=True),
        MetricRef("q3", "sglang:gen_throughput", frozenset({"dp"}), in_query=True),
        MetricRef("q4", "sglang:speculative_accept_length", frozenset(), in_query=False),
    ]
    problems = metric_problems(contract, bad)
    assert [p.split(":", 1)[0] for p in problems] == ["q1", "q2", "q3", "q4"], problems
    good = [
        MetricRef("ok", "sglang:time_to_first_token_seconds_bucket", frozenset({"le"}), True),
        MetricRef("ok", "sglang:time_to_first_token_seconds", frozenset(), in_query=False),
        MetricRef("ok", "sglang:gen_throughput", frozenset({"dp_rank", "instance"}), True),
    ]
    assert metric_problems(contract, good) == []


# Endpoints --------------------------------------------------------------------------------------


@cache
def deprecated_routes(version: str) -> dict[str, str | None]:
    """Routes whose handler in SGLang's own http_server.py warns that it is deprecated, each
    with the path the warning names instead (read from the version's venv, not summarized)."""
    venv_python(version)  # fails, naming bash scripts/setup/sglang.sh, when the venv is missing
    found = sorted(
        (venv_root() / version).glob(
            "lib/python3*/site-packages/sglang/srt/entrypoints/http_server.py"
        )
    )
    assert found, (
        f"SGLang {version}'s http_server.py is not in its venv; run bash scripts/setup/sglang.sh"
    )
    tree = ast.parse(found[0].read_text(encoding="utf-8"))
    out: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        routes = [
            d.args[0].value
            for d in node.decorator_list
            if isinstance(d, ast.Call)
            and isinstance(d.func, ast.Attribute)
            and d.func.attr in ("get", "post", "put", "delete", "api_route")
            and d.args
            and isinstance(d.args[0], ast.Constant)
        ]
        warnings = [
            "".join(
                c.value
                for c in ast.walk(call)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
            for call in ast.walk(node)
            if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr in ("warning", "warn")
        ]
        for text in warnings:
            if "deprecated" in text:
                use = re.search(r"use '(/[A-Za-z0-9_/]+)'", text)
                out.update({route: use[1] if use else None for route in routes})
    return out


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_every_endpoint_the_product_calls_exists(version: str) -> None:
    contract = sglang_contract(version)
    problems = [
        f"{c.source}: {c.method or 'request to'} {c.path}: SGLang {version} serves no such route"
        for c in _calls()
        if c.path not in contract.endpoints
    ]
    problems += [
        f"{c.source}: {c.method} {c.path}: SGLang {version} serves it only for "
        f"{sorted(contract.endpoint_methods(c.path))}"
        for c in _calls()
        if c.method
        and c.path in contract.endpoints
        and c.method not in contract.endpoint_methods(c.path)
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_calls_without_the_api_key_reach_exempt_paths(version: str) -> None:
    """Probes, the health gate, Docker's health check and the scrapes carry no key; with
    --api-key set (the default profile sets it) SGLang must let their paths through."""
    contract = sglang_contract(version)
    keyless = [c for c in _calls() if c.keyless]
    assert keyless
    problems = [
        f"{c.source}: {c.path} is sent without the API key, but SGLang {version} exempts only "
        f"{list(contract.auth_exempt_prefixes)}"
        for c in keyless
        if not contract.auth_exempt(c.path, c.method or "GET")
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_no_call_uses_a_deprecated_alias(version: str) -> None:
    """SGLang logs a warning on every call to a deprecated route (/get_server_info,
    /get_model_info): the product asks the new name, and the old one only as a 404 fallback."""
    deprecated = deprecated_routes(version)
    assert deprecated.get("/get_server_info") == "/server_info", deprecated  # the reader works
    calls = _calls()
    problems = []
    for call in calls:
        if call.path not in deprecated:
            continue
        new = deprecated[call.path]
        fallback = call.role == "fallback" and any(
            c.path == new and c.source.split(":")[0] == call.source.split(":")[0] for c in calls
        )
        if not fallback:
            problems.append(
                f"{call.source}: {call.path} is deprecated in SGLang {version}: use {new}"
            )
    assert not problems, "\n".join(problems)


def _generating_paths(contract: SGLangContract) -> frozenset[str]:
    health = contract.facts["health"]
    same_handler = health["health_is_health_generate_handler"]
    by_default = health["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"]["default"]
    return frozenset({"/health_generate"} | ({"/health"} if same_handler and by_default else set()))


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_probes_wait_longer_than_sglang_and_liveness_generates_nothing(version: str) -> None:
    """SGLang's /health_generate (and, by default, /health) answers 503 only after its own
    health-check timeout: a probe that gives up sooner fails a busy, healthy server, and a
    liveness check on it restarts one."""
    contract = sglang_contract(version)
    limit = contract.facts["health"]["health_check_timeout_s"]
    generating = _generating_paths(contract)
    probes = [c for c in _calls() if c.role in ("startup", "readiness", "liveness", "gate", "poll")]
    assert {c.role for c in probes} == {"startup", "readiness", "liveness", "gate", "poll"}
    problems = [
        f"{c.source}: {c.role} on {c.path} waits {c.timeout_s} s; SGLang {version} answers "
        f"503 only after {limit} s"
        for c in probes
        if c.path in generating and not (c.timeout_s is not None and c.timeout_s > limit)
    ]
    problems += [
        f"{c.source}: liveness on {c.path}, which makes SGLang {version} generate a token; "
        "use /ready"
        for c in probes
        if c.role == "liveness" and c.path in generating
    ]
    assert not problems, "\n".join(problems)


def test_the_chart_and_its_tests_assume_sglangs_own_health_timeout() -> None:
    """The 20 s written in the chart's guardrail and in the render test is SGLang's."""
    limits = {
        sglang_contract(v).facts["health"]["health_check_timeout_s"] for v in VERIFIED_VERSIONS
    }
    helpers = (ROOT / "charts" / "specserve" / "templates" / "_helpers.tpl").read_text("utf-8")
    chart = re.search(r'"SGLANG_HEALTH_CHECK_TIMEOUT"\) \| default "(\d+)"', helpers)
    render_test = (ROOT / "tests" / "helm" / "test_render.py").read_text("utf-8")
    test = re.search(r"^SGLANG_HEALTH_CHECK_TIMEOUT_S = (\d+)$", render_test, re.M)
    assert chart and test, "the chart's or the render test's health timeout moved; update this test"
    assert limits == {int(chart[1])} == {int(test[1])}, (limits, chart[1], test[1])


# The benchmark against the stand-in: /server_info, and /get_server_info only on a 404 -----------

API_KEY = "sk-contract-5e1d"


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standin]:
    root = tmp_path_factory.mktemp("standin")
    port = free_port()
    log = root / "standin.log"
    argv = [
        sys.executable, "-m", "specserve.standin.server", "--model-path", str(root / "model"),
        "--host", "127.0.0.1", "--port", str(port), "--api-key", API_KEY,
    ]  # fmt: skip
    env = {**{k: v for k, v in os.environ.items() if "proxy" not in k.lower()}, **FAST_ENV}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    server = Standin(proc, port, log)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


class _Recording(httpx.BaseTransport):
    """Forwards to the real server, records each path, and answers `fake` for some paths."""

    def __init__(self, fake: dict[str, int] | None = None) -> None:
        self.real = httpx.HTTPTransport()
        self.fake = fake or {}
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        status = self.fake.get(request.url.path)
        if status is not None:
            return httpx.Response(status, text="faked by the test", request=request)
        return self.real.handle_request(request)


def _client(transport: _Recording) -> httpx.Client:
    return httpx.Client(transport=transport, headers={"Authorization": f"Bearer {API_KEY}"})


def _deprecation_warnings(server: Standin) -> int:
    return sum("deprecated" in line for line in server.lines())


def test_bench_asks_server_info_and_never_the_alias(standin: Standin) -> None:
    assert SERVER_INFO_PATHS == ("/server_info", "/get_server_info")
    transport = _Recording()
    before = _deprecation_warnings(standin)
    with _client(transport) as client:
        info = server_info(client, standin.url)
    assert transport.paths == ["/server_info"]
    assert "speculative_algorithm" in info and "model_path" in info, sorted(info)
    assert _deprecation_warnings(standin) == before  # nothing deprecated was asked


def test_bench_falls_back_to_get_server_info_on_404(standin: Standin) -> None:
    """An older SGLang without /server_info: the same facts from the deprecated alias."""
    transport = _Recording(fake={"/server_info": 404})
    before = _deprecation_warnings(standin)
    with _client(transport) as client:
        info = server_info(client, standin.url)
        direct = client.get(standin.url + "/get_server_info").json()
    assert transport.paths[:2] == ["/server_info", "/get_server_info"]
    assert info["model_path"] == direct["model_path"] and "speculative_algorithm" in info
    assert _deprecation_warnings(standin) > before  # the stand-in, like SGLang, warns on it


def test_bench_does_not_fall_back_on_other_errors(standin: Standin) -> None:
    transport = _Recording(fake={"/server_info": 500})
    with _client(transport) as client, pytest.raises(ServerError) as failed:
        server_info(client, standin.url)
    assert transport.paths == ["/server_info"]
    assert str(failed.value) == describe_http_error(
        standin.url + "/server_info", 500, "faked by the test"
    )
