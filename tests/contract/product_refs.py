"""What the product asks of a running SGLang, collected from the product's own files.

Metric references: every metric selector in the Prometheus rules, the Grafana dashboards and
alerts (the generated files and the chart's rendered golden), every metric name the exporter
declares (names.py) and the verification gate (`specserve verify`, which Ansible and the Helm
test run), the benchmark and the monitoring sources read, and every `sglang:*` name the
docs give in backticks. HTTP calls: the chart's probes and scrapes (rendered goldens), the Ansible
roles' requests (uri tasks, the health-gate poll, Docker's health check, the Prometheus scrape
job), the Helm test's and the benchmark's URLs, and the URLs the docs tell a user to curl. The
exporter reads SGLang's log, not its HTTP API, and the launcher execs SGLang: neither calls it.

Nothing here lists a metric or an endpoint: they are read from the files, so a new query or a
new request is checked the day it is written.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.contract.promql import selectors

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "helm" / "golden"
# Every metric-like name a Python source may hold: SGLang's and the exporter's prefixes.
METRIC_NAME = re.compile(r"^(?:sglang:|specserve_)[a-z0-9_:]*[a-z0-9]$")
DOC_FILES = sorted(
    [
        ROOT / "README.md",
        ROOT / "charts" / "specserve" / "README.md",
        *(ROOT / "docs").rglob("*.md"),
    ]
)


@dataclass(frozen=True)
class MetricRef:
    source: str  # file (and where in it)
    name: str
    labels: frozenset[str]
    # True: a series name inside a query, which /metrics must expose exactly as written.
    # False: a name in code or prose, which may be a metric's name or one of its series.
    in_query: bool


@dataclass(frozen=True)
class EndpointCall:
    source: str
    path: str
    method: str  # "" when the caller's code does not say
    keyless: bool  # sent without the API key: SGLang must exempt the path from --api-key
    role: str  # startup | readiness | liveness | gate | poll | scrape | call | fallback | doc
    timeout_s: float | None  # how long the caller waits for an answer, where it says


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _exprs(node: Any) -> Iterator[str]:
    """Every `expr` string anywhere in a loaded YAML/JSON document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str) and value.strip():
                yield value
            else:
                yield from _exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _exprs(item)


def _query_refs(source: str, exprs: Iterator[str]) -> list[MetricRef]:
    return [MetricRef(source, s.name, s.labels, in_query=True) for e in exprs for s in selectors(e)]


def _yaml_docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


# Metric sources -------------------------------------------------------------------------------


def rules_files() -> list[MetricRef]:
    out: list[MetricRef] = []
    for path in sorted((ROOT / "monitoring" / "prometheus").glob("*.yml")):
        for doc in _yaml_docs(path):
            out += _query_refs(_rel(path), _exprs(doc))
    return out


def grafana_dashboards() -> list[MetricRef]:
    out: list[MetricRef] = []
    for path in sorted((ROOT / "monitoring" / "grafana" / "dashboards").glob("*.json")):
        out += _query_refs(_rel(path), _exprs(json.loads(path.read_text(encoding="utf-8"))))
    return out


def grafana_alerts() -> list[MetricRef]:
    out: list[MetricRef] = []
    for path in sorted((ROOT / "monitoring" / "grafana" / "provisioning").rglob("*.yml")):
        for doc in _yaml_docs(path):
            out += _query_refs(_rel(path), _exprs(doc))
    return out


def _configmap_payloads(doc: dict[str, Any]) -> Iterator[Any]:
    for key, text in (doc.get("data") or {}).items():
        if key.endswith(".json"):
            yield json.loads(text)
        elif key.endswith((".yml", ".yaml")):
            yield from (d for d in yaml.safe_load_all(text) if d)


def helm_renders() -> list[MetricRef]:
    """The chart as rendered (the goldens that tests/helm/test_render.py keeps current)."""
    out: list[MetricRef] = []
    for path in sorted(GOLDEN.glob("*.yaml")):
        for doc in _yaml_docs(path):
            if doc["kind"] == "PrometheusRule":
                out += _query_refs(f"{_rel(path)}: PrometheusRule", _exprs(doc["spec"]))
            elif doc["kind"] == "ConfigMap":
                for payload in _configmap_payloads(doc):
                    name = doc["metadata"]["name"]
                    out += _query_refs(f"{_rel(path)}: ConfigMap {name}", _exprs(payload))
    return out


def names_read(paths: list[Path]) -> list[MetricRef]:
    """The exporter metrics code reads through `specserve_exporter.names` (`names.X` and
    `names.X.total`-style series), resolved with that module: the names the verification gate,
    the Helm test (the same gate) and the bench read."""
    from specserve_exporter import names

    out: list[MetricRef] = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "specserve_exporter.names":
                used = [alias.name for alias in node.names]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id == "names"
            ):
                used = [node.attr]
            else:
                continue
            for attr in used:
                metric = getattr(names, attr, None)
                if isinstance(metric, names.Metric):
                    out.append(MetricRef(f"{_rel(path)}:{node.lineno}", metric.name,
                                         frozenset(), in_query=False))  # fmt: skip
    return out


def exporter_names() -> list[MetricRef]:
    """Every metric the exporter declares (names.ALL), as the module builds them."""
    from specserve_exporter import names

    where = "exporter/specserve_exporter/names.py"
    return [MetricRef(where, m.name, frozenset(m.labels), in_query=False) for m in names.ALL]


def verify_gate() -> list[MetricRef]:
    return names_read(sorted((ROOT / "specserve" / "verify").glob("*.py")))


def _python_names(paths: list[Path]) -> list[MetricRef]:
    """Metric names written as string constants, and the metric selectors of PromQL constants
    (a prose string that does not read as PromQL gives the names in it)."""
    out: list[MetricRef] = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            text = node.value
            where = f"{_rel(path)}:{node.lineno}"
            if METRIC_NAME.match(text):
                out.append(MetricRef(where, text, frozenset(), in_query=False))
            elif "sglang:" in text or "specserve_" in text:
                try:
                    found = [(s.name, s.labels) for s in selectors(text)]
                except ValueError:
                    found = [(n, frozenset()) for n in _NAMES_IN_TEXT.findall(text)]
                out += [
                    MetricRef(where, name, labels, in_query=False)
                    for name, labels in found
                    if METRIC_NAME.match(name)
                ]
    return out


_NAMES_IN_TEXT = re.compile(r"(?:sglang:|specserve_)[a-z0-9_:]*[a-z0-9]")




def monitoring_sources() -> list[MetricRef]:
    return _python_names(sorted((ROOT / "specserve" / "monitoring").glob("*.py")))


def docs() -> list[MetricRef]:
    out: list[MetricRef] = []
    for path in DOC_FILES:
        for match in re.finditer(r"`(sglang:[a-z0-9_:]*[a-z0-9])`", path.read_text("utf-8")):
            out.append(MetricRef(_rel(path), match[1], frozenset(), in_query=False))
    return out


METRIC_SOURCES: dict[str, Callable[[], list[MetricRef]]] = {
    "prometheus rules (monitoring/prometheus)": rules_files,
    "grafana dashboards (monitoring/grafana/dashboards)": grafana_dashboards,
    "grafana alerts (monitoring/grafana/provisioning)": grafana_alerts,
    "helm renders (tests/helm/golden)": helm_renders,
    "exporter metric names (exporter/specserve_exporter/names.py)": exporter_names,
    "verification gate, Ansible's and the Helm test's (specserve/verify)": verify_gate,
    # The bench reads the exporter through specserve.verify.window (the gate's source above).
    "monitoring sources (specserve/monitoring)": monitoring_sources,
    "docs (backticked sglang:* names)": docs,
}


# HTTP calls -------------------------------------------------------------------------------------


def chart_calls() -> list[EndpointCall]:
    """Probes of the SGLang container and scrapes of its port, in every rendered golden."""
    out: list[EndpointCall] = []
    for path in sorted(GOLDEN.glob("*.yaml")):
        for doc in _yaml_docs(path):
            where = f"{_rel(path)}: {doc['kind']} {doc['metadata']['name']}"
            if doc["kind"] in ("Deployment", "StatefulSet"):
                for container in doc["spec"]["template"]["spec"]["containers"]:
                    if container["name"] != "sglang":
                        continue  # the exporter and the router are not SGLang's server
                    for kind in ("startup", "readiness", "liveness"):
                        probe = container.get(f"{kind}Probe")
                        if probe and "httpGet" in probe:
                            out.append(EndpointCall(
                                f"{where} {kind}Probe", probe["httpGet"]["path"], "GET", True,
                                kind, float(probe.get("timeoutSeconds", 1)),
                            ))  # fmt: skip
            elif doc["kind"] in ("ServiceMonitor", "PodMonitor"):
                spec = doc["spec"]
                for endpoint in spec.get("endpoints") or spec.get("podMetricsEndpoints") or []:
                    if endpoint.get("port") == "http":  # the SGLang container's port
                        path_ = endpoint.get("path", "/metrics")
                        out.append(EndpointCall(where, path_, "GET", True, "scrape", None))
    return out


_SERVER_URL = re.compile(r"server_port \}\}(/[A-Za-z0-9_/]*)")
# The URLs specserve.profile.facts derives (specserve_facts.<key> in the roles) -> their path.
_FACT_URLS = re.compile(r"specserve_facts\.(health_url|ready_url|metrics_url|server_url)\s*\}\}"
                        r"(/[A-Za-z0-9_/]*)?")


def _fact_paths(text: str) -> Iterator[str]:
    from specserve.profile import endpoints

    by_key = {"health_url": endpoints.HEALTH_PATH, "ready_url": endpoints.LIVENESS_PATH,
              "metrics_url": endpoints.METRICS_PATH, "server_url": ""}  # fmt: skip
    for match in _FACT_URLS.finditer(text):
        path = by_key[match[1]] + (match[2] or "")
        if path:
            yield path
_JINJA_VAR = re.compile(r"^\{\{\s*([A-Za-z_][\w.]*)\s*(?:\|\s*\w+\s*)*\}\}$")
# set_fact'ed from another variable (tasks/restart.yml, rollback.yml): read as that one.
_ALIASES = {"server_start_spec": "server_spec"}
_TASK_LISTS = ("block", "rescue", "always")
# Modules that hold a URL as data (the spec, a file's content) without requesting it.
_DATA_MODULES = ("ansible.builtin.set_fact", "set_fact", "ansible.builtin.copy", "copy")


def ansible_vars() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for kind in ("defaults", "vars"):
        for path in sorted((ROOT / "ansible" / "roles").glob(f"*/{kind}/main.yml")):
            merged.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return merged


def resolve(value: Any, variables: dict[str, Any], depth: int = 0) -> Any:
    """A `{{ name }}` / `{{ a.b | filter }}` string as the role variable it names, else as is."""
    if not isinstance(value, str) or depth > 5:
        return value
    match = _JINJA_VAR.match(value.strip())
    if not match:
        return value
    head, *rest = match[1].split(".")
    node: Any = variables.get(_ALIASES.get(head, head))
    for part in rest:
        node = node.get(part) if isinstance(node, dict) else None
    return value if node is None else resolve(node, variables, depth + 1)


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def _tasks(node: Any) -> Iterator[dict[str, Any]]:
    for task in node or []:
        if not isinstance(task, dict):
            continue
        nested = [task[k] for k in _TASK_LISTS if k in task]
        if nested:
            for tasks in nested:
                yield from _tasks(tasks)
        else:
            yield task


def _probe_module_default_timeout() -> float:
    text = (ROOT / "ansible" / "plugins" / "modules" / "specserve_server_probe.py").read_text()
    match = re.search(r'"timeout": \{"type": "float", "default": ([\d.]+)\}', text)
    assert match, "specserve_server_probe.py: cannot find the timeout option's default"
    return float(match[1])


def _task_call(task: dict[str, Any], path: str, variables: dict[str, Any]) -> EndpointCall:
    name = task.get("name", "?")
    uri = task.get("ansible.builtin.uri") or task.get("uri")
    if isinstance(uri, dict):
        headers = json.dumps(uri.get("headers") or {})
        timeout = resolve(uri.get("timeout", 30), variables)  # the uri module's default: 30 s
        method = str(uri.get("method", "GET")).upper()
        role = "poll" if "health" in path else "call"
        if re.search(r"\.status\b.*==\s*404", str(task.get("when", ""))):
            role = "fallback"  # asked only when the previous request got a 404
        return EndpointCall(name, path, method, "Authorization" not in headers, role,
                            _seconds(timeout))  # fmt: skip
    poll = task.get("specserve_poll")
    if isinstance(poll, dict) and poll.get("module") == "specserve_server_probe":
        args = poll.get("module_args") or {}
        timeout = resolve(args.get("timeout"), variables) or _probe_module_default_timeout()
        return EndpointCall(name, path, "GET", True, "gate", _seconds(timeout))
    stability = task.get("specserve_stability")
    if isinstance(stability, dict):
        # specserve_stability sends `api_key` as a Bearer token (ansible/plugins/modules/).
        keyless = not str(stability.get("api_key") or "").strip()
        timeout = resolve(stability.get("request_timeout_s"), variables)
        return EndpointCall(name, path, "POST", keyless, "call", _seconds(timeout))
    container = task.get("community.docker.docker_container")
    if isinstance(container, dict) and "healthcheck" in container:
        test = " ".join(container["healthcheck"]["test"])
        found = re.search(r"timeout=([\d.]+)", test)
        return EndpointCall(name, path, "GET", True, "liveness",
                            float(found[1]) if found else None)  # fmt: skip
    return EndpointCall(name, path, "", True, "call", None)


def _seconds(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def ansible_calls() -> list[EndpointCall]:
    variables = ansible_vars()
    out: list[EndpointCall] = []
    files = sorted((ROOT / "ansible" / "roles").glob("*/tasks/*.yml"))
    files += sorted((ROOT / "playbooks").glob("*.yml"))
    for file in files:
        for doc in _yaml_docs(file):
            plays = doc if isinstance(doc, list) else [doc]
            for task in _tasks(plays):
                if any(module in task for module in _DATA_MODULES):
                    continue
                for text in _strings(task):
                    resolved = str(resolve(text, variables))
                    paths = [m[1] for m in _SERVER_URL.finditer(resolved)]
                    for path in [*paths, *_fact_paths(resolved)]:
                        call = _task_call(task, path, variables)
                        out.append(EndpointCall(f"{_rel(file)}: {call.source}", *_fields(call)))
    return out + _ansible_scrapes()


def _fields(call: EndpointCall) -> tuple[str, str, bool, str, float | None]:
    return call.path, call.method, call.keyless, call.role, call.timeout_s


def _ansible_scrapes() -> list[EndpointCall]:
    """Prometheus scrape jobs whose target is the server (metrics_path, default /metrics)."""
    out: list[EndpointCall] = []
    for path in sorted((ROOT / "ansible" / "roles").glob("*/templates/*scrape*")):
        for job in path.read_text(encoding="utf-8").split("- job_name:")[1:]:
            if "server" in job.split("targets:", 1)[-1].split("\n", 1)[0]:
                found = re.search(r"metrics_path:\s*(\S+)", job)
                metrics_path = found[1].strip("\"'") if found else "/metrics"
                where = f"{_rel(path)}: job {job.split()[0]}"
                out.append(EndpointCall(where, metrics_path, "GET", True, "scrape", None))
    return out


def _url_paths(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """`f"{...base_url}/path"` / `f"{...api_url}/path"` as calls, and module-level `*_PATHS`
    tuples: the first path is the call, the others its fallbacks (asked only on a 404)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and len(node.values) >= 2:
            head, tail = node.values[0], node.values[1]
            if (
                isinstance(head, ast.FormattedValue)
                and ast.unparse(head.value).endswith(("base_url", "api_url"))
                and isinstance(tail, ast.Constant)
                and str(tail.value).startswith("/")
            ):
                path = re.match(r"/[A-Za-z0-9_/]*", str(tail.value))
                assert path is not None
                yield node.lineno, path[0], "call"
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if any(n.endswith("_PATHS") for n in names):
                for i, element in enumerate(node.value.elts):
                    if isinstance(element, ast.Constant) and str(element.value).startswith("/"):
                        yield node.lineno, str(element.value), "fallback" if i else "call"


def python_calls(paths: list[Path]) -> list[EndpointCall]:
    out: list[EndpointCall] = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, url_path, role in _url_paths(tree):
            out.append(EndpointCall(f"{_rel(path)}:{line}", url_path, "", False, role, None))
    return out


def _verify_default(dest: str) -> float | None:
    """A default of `specserve verify`'s own parser."""
    import argparse

    from specserve.verify.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    namespace = parser.parse_args(["verify"])
    return _seconds(getattr(namespace, dest))


def verify_calls() -> list[EndpointCall]:
    """What `specserve verify` requests (Ansible's gate and the Helm test run it): the health
    path from facts (keyless: the gate's first request, a poll), then the paths in its code."""
    from specserve.profile.endpoints import HEALTH_PATH

    paths = sorted((ROOT / "specserve" / "verify").glob("*.py"))
    # Its health request waits --request-timeout: the CLI's default, or what each caller passes.
    values = yaml.safe_load((ROOT / "charts" / "specserve" / "values.yaml").read_text("utf-8"))
    waits = {
        "specserve verify (--request-timeout default)": _verify_default("request_timeout"),
        "ansible verify role (verify_warmup_timeout_s)": _seconds(
            resolve("{{ verify_warmup_timeout_s }}", ansible_vars())
        ),
        "helm test (tests.timeoutSeconds)": _seconds(values["tests"]["timeoutSeconds"]),
    }
    out = [EndpointCall(f"specserve/verify/gate.py: health, {who}", HEALTH_PATH, "GET", True,
                        "poll", wait) for who, wait in waits.items()]  # fmt: skip
    # The gate also joins paths onto its base URL with `+` (url + "/server_info").
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Add)
                and isinstance(node.right, ast.Constant)
                and str(node.right.value).startswith("/")
            ):
                out.append(EndpointCall(f"{_rel(path)}:{node.lineno}", str(node.right.value),
                                        "", False, "call", None))  # fmt: skip
    return out + python_calls(paths)


def bench_calls() -> list[EndpointCall]:
    return python_calls(sorted((ROOT / "specserve" / "bench").glob("*.py")))


_DOC_URL = re.compile(
    r"(?:127\.0\.0\.1|localhost):(?:8000|30000|\{\{ \.Values\.service\.port \}\})"
    r"(/[A-Za-z0-9_/]*[A-Za-z0-9_])"
)


def doc_calls() -> list[EndpointCall]:
    """URLs of the SGLang server (ports 8000 and 30000) the docs tell a user to request."""
    files = [*DOC_FILES, ROOT / "charts" / "specserve" / "templates" / "NOTES.txt"]
    out: list[EndpointCall] = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _DOC_URL.finditer(line):
                out.append(EndpointCall(f"{_rel(path)}:{number}", match[1], "", False, "doc", None))
    return out


CALL_SOURCES: dict[str, Callable[[], list[EndpointCall]]] = {
    "chart probes and scrapes (tests/helm/golden)": chart_calls,
    "ansible roles and playbooks": ansible_calls,
    "verification gate (specserve/verify)": verify_calls,
    "bench (specserve/bench)": bench_calls,
    "docs (server URLs)": doc_calls,
}
