"""The chart's router, run for real: the pinned smg binary (Shepherd Model Gateway, versions.yaml
tools.smg, the package the chart's lightseekorg/smg image is built from) with the argv the chart
renders, in front of stand-in SGLang servers on 127.0.0.1.

- Its own launcher (smg.launch_router, what the image's entrypoint `python3 -m smg.launch_router`
  runs: parse_router_args, the IGW switch that discovery turns on, the validation, the Rust
  Router's construction; everything but serving) reads every rendered flag as the chart means it.
  The chart's policy choices are the parser's own; overload protection and warm-up reach it as set;
  the values schema's bounds are the binary's (what one accepts the other starts with, what one
  refuses the other refuses).
- With the rendered Kubernetes discovery flags unchanged, pointed at a fake API server on loopback
  (KUBECONFIG), it adds only the release's Ready server pod, routes an authenticated completion to
  it, serves smg_* metrics on the metrics port, and asks the API for exactly what the chart's Role
  grants: list and watch of pods in the release namespace, with the chart's selector.
- With the discovery flags swapped for the equivalent static worker list, it balances over three
  stand-ins and keeps answering when one of them dies.
- The rendered probe paths: readiness 503 without a healthy worker and 200 with one, liveness 200;
  neither asks for the API key (the kubelet sends none).
- On SIGTERM (a router rollout, after the chart's preStop sleep) readiness turns 503 at once, new
  requests are still served for smg's 5 s settle window, then refused, and a running generation
  finishes, which is why the chart gives it a grace period (--shutdown-grace-period-secs,
  terminationGracePeriodSeconds) longer than its default.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.e2e.router import launched_args
from tests.e2e.router import router_bin as installed_router_bin
from tests.helm.conftest import CHART, template
from tests.helm.fake_kube_api import FakeKubeApi, pod
from tests.standin.helpers import FAST_ENV, Standin, free_port

ROUTER_VALUES = CHART / "ci" / "replicas-router-values.yaml"
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA = json.loads((CHART / "values.schema.json").read_text())["properties"]["router"]
NAMESPACE = "inference"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
KEY = "router-test-key-3f9a"  # a throwaway key: the test checks it never reaches the router's log
# The upstream image's ENTRYPOINT (lightseekorg/smg docker/Dockerfile, router-image).
IMAGE_ENTRYPOINT = ["python3", "-m", "smg.launch_router"]
RELEASE = {"app.kubernetes.io/name": "specserve", "app.kubernetes.io/instance": "specserve",
           "app.kubernetes.io/component": "server"}  # fmt: skip

# The parser's own --policy choices and default (the parser parse_router_args builds).
POLICY = """\
import argparse, json
from smg.router_args import RouterArgs
parser = argparse.ArgumentParser()
RouterArgs.add_cli_args(parser, use_router_prefix=False)
(action,) = [a for a in parser._actions if "--policy" in a.option_strings]
print(json.dumps({"choices": list(action.choices), "default": action.default}))
"""


@pytest.fixture(scope="module")
def router_bin() -> Path:
    return installed_router_bin()


def _tools() -> Path:
    from tests.helm.conftest import _install_tools

    return _install_tools()


def _router_docs(*args: str) -> list[dict[str, Any]]:
    result = template(_tools(), "--show-only", "templates/router.yaml", *args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _router_container(*args: str) -> dict[str, Any]:
    (deploy,) = [d for d in _router_docs(*args) if d["kind"] == "Deployment"]
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    return container


def _role_rules() -> list[dict[str, Any]]:
    (role,) = [d for d in _router_docs("--values", str(ROUTER_VALUES)) if d["kind"] == "Role"]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def _set(argv: list[str], flag: str, value: str) -> list[str]:
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def _without_discovery(argv: list[str]) -> list[str]:
    """The rendered argv minus --service-discovery and its three options (--selector takes
    every value up to the next flag)."""
    out: list[str] = []
    skipping = False
    for arg in argv:
        if arg.startswith("--"):
            skipping = arg in ("--service-discovery", "--service-discovery-namespace",
                               "--service-discovery-port", "--selector")  # fmt: skip
        if not skipping:
            out.append(arg)
    return out


def _python(router_bin: Path, code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(router_bin / "python"), "-c", code, *argv],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_the_image_entrypoint_and_the_real_parser_read_the_rendered_flags() -> None:
    values = yaml.safe_load(ROUTER_VALUES.read_text())
    defaults = VALUES["router"]
    # Without an API key in the profile the container runs the image's entrypoint itself.
    plain = _router_container("--values", str(CHART / "ci" / "small-model-values.yaml"),
                              "--set", "router.enabled=true")  # fmt: skip
    assert plain["command"] == IMAGE_ENTRYPOINT
    assert launched_args(plain["args"])["service_discovery_port"] == 30000  # its profile's
    keyed = _router_container("--values", str(ROUTER_VALUES))
    parsed = launched_args(keyed["args"])
    check = defaults["healthCheck"]
    assert {k: parsed[k] for k in (
        "service_discovery", "enable_igw", "selector", "service_discovery_namespace",
        "service_discovery_port", "host", "port", "policy", "prometheus_host", "prometheus_port",
        "health_check_endpoint", "health_check_timeout_secs", "health_check_interval_secs",
        "health_failure_threshold", "shutdown_grace_period_secs",
    )} == {
        "service_discovery": True,
        # The launcher switches IGW mode on for discovery: workers grouped by served model.
        "enable_igw": True,
        # The Deployment's own pod selector: the server pods of this release, nothing else.
        "selector": RELEASE,
        "service_discovery_namespace": NAMESPACE,
        "service_discovery_port": 8000,  # the default profile's server.port
        "host": "0.0.0.0", "port": defaults["port"], "policy": defaults["policy"],
        "prometheus_host": "0.0.0.0", "prometheus_port": defaults["metricsPort"],
        "health_check_endpoint": check["endpoint"],
        "health_check_timeout_secs": check["timeoutSeconds"],
        "health_check_interval_secs": check["intervalSeconds"],
        "health_failure_threshold": check["failureThreshold"],
        "shutdown_grace_period_secs": defaults["shutdownGracePeriodSeconds"],
    }  # fmt: skip
    assert values["router"]["enabled"] is True
    # With the profile's API key the image's entrypoint runs behind a shell that adds the key
    # (the tests below run that exact command).
    assert keyed["command"][:2] == ["/bin/sh", "-c"]
    assert keyed["command"][2].startswith("exec " + " ".join(IMAGE_ENTRYPOINT) + ' "$@" --api-key')
    # Extra flags reach the real parser too.
    extra = _router_container("--values", str(ROUTER_VALUES), "--set-string",
                              "router.extraArgs={--max-concurrent-requests,256}")  # fmt: skip
    assert launched_args(extra["args"])["max_concurrent_requests"] == 256


def test_the_policy_choices_are_the_binarys_own(router_bin: Path) -> None:
    result = _python(router_bin, POLICY)
    assert result.returncode == 0, result.stderr
    binary = json.loads(result.stdout)
    # The schema allows exactly what the binary's --policy takes, no more, no fewer.
    assert sorted(SCHEMA["properties"]["policy"]["enum"]) == sorted(binary["choices"])
    assert VALUES["router"]["policy"] == binary["default"] == "cache_aware"
    # values.yaml's comment and the README's row name every choice.
    text = (CHART / "values.yaml").read_text()
    comment = text[text.index("\nrouter:\n") : text.index("\n  policy:")]
    row = next(line for line in (CHART / "README.md").read_text().splitlines()
               if line.startswith("| `router.policy` |"))  # fmt: skip
    for choice in binary["choices"]:
        assert re.search(rf"\b{choice}\b", comment), f"values.yaml's comment omits {choice}"
        assert f"`{choice}`" in row, f"README's router.policy row omits {choice}"


@pytest.mark.parametrize("policy", SCHEMA["properties"]["policy"]["enum"])
def test_every_policy_the_schema_allows_reaches_the_router(policy: str) -> None:
    container = _router_container("--values", str(ROUTER_VALUES), "--set",
                                  f"router.policy={policy}")  # fmt: skip
    assert launched_args(container["args"])["policy"] == policy


OVERLOAD_FIELDS = {
    "overloadProtection.enabled": "worker_overload_protection",
    "overloadProtection.waitingRequests": "worker_overload_waiting_requests",
    "overloadProtection.tokenUsage": "worker_overload_token_usage",
    "overloadProtection.shed": "worker_overload_shed",
    "warmup.seconds": "worker_warmup_secs",
    "warmup.share": "worker_warmup_share",
}
CHANGED = {
    "overloadProtection.enabled": True, "overloadProtection.waitingRequests": 3,
    "overloadProtection.tokenUsage": 0.65, "overloadProtection.shed": True,
    "warmup.seconds": 0, "warmup.share": 0.5,
}  # fmt: skip


def _value(path: str) -> Any:
    node: Any = VALUES["router"]
    for key in path.split("."):
        node = node[key]
    return node


@pytest.mark.parametrize("settings", [{}, CHANGED], ids=["defaults", "every-setting-changed"])
def test_overload_protection_and_warmup_reach_the_router(
    settings: dict[str, Any]
) -> None:
    # --set-json: `--set` reads 0.65 as a string, which the schema refuses (a number).
    sets = [a for k, v in settings.items() for a in ("--set-json", f"router.{k}={json.dumps(v)}")]
    parsed = launched_args(_router_container("--values", str(ROUTER_VALUES), *sets)["args"])
    wanted = {k: settings.get(k, _value(k)) for k in OVERLOAD_FIELDS}
    assert {k: parsed[f] for k, f in OVERLOAD_FIELDS.items()} == wanted


def test_overload_protection_off_reaches_the_router() -> None:
    container = _router_container("--values", str(ROUTER_VALUES), "--set",
                                  "router.overloadProtection.enabled=false")  # fmt: skip
    assert "--disable-worker-overload-protection" in container["args"]
    assert not any(a.startswith("--worker-overload-") for a in container["args"])
    parsed = launched_args(container["args"])
    assert parsed["worker_overload_protection"] is False
    assert parsed["worker_overload_shed"] is False


def test_the_overload_and_warmup_defaults_are_the_binarys_own() -> None:
    """values.yaml says its overload and warm-up defaults are smg's: the binary given no such
    flag must agree, or the comments (and the 0.3.2 comparison in docs/helm.md) are stale."""
    bare = launched_args(["--worker-urls", "http://127.0.0.1:1"])
    assert {k: bare[f] for k, f in OVERLOAD_FIELDS.items()} == {
        k: _value(k) for k in OVERLOAD_FIELDS}  # fmt: skip


class Run:
    """Processes this test started, stopped (and their logs kept) at teardown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.model = str(root / "model")  # the stand-ins' model path, their served model name
        self.procs: list[subprocess.Popen[bytes]] = []
        self.routers: list[subprocess.Popen[bytes]] = []

    def standin(self, name: str, **env: str) -> Standin:
        port = free_port()
        log = self.root / f"{name}.log"
        argv = [sys.executable, "-m", "specserve.standin.server", "--model-path", self.model,
                "--host", "127.0.0.1", "--port", str(port), "--api-key", KEY]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ, **FAST_ENV, **env})  # fmt: skip
        self.procs.append(proc)
        server = Standin(proc, port, log)
        server.wait_ready()
        return server

    def router(self, command: list[str], argv: list[str], env: dict[str, str],
               name: str = "router") -> Path:  # fmt: skip
        log = self.root / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([*command, *argv], stdout=out, stderr=subprocess.STDOUT,
                                    env=env, cwd=self.root)  # fmt: skip
        self.procs.append(proc)
        self.routers.append(proc)
        self.router_proc = proc
        return log

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                # A router's SIGTERM costs its 5 s settle window; the drain test sends its own.
                proc.send_signal(signal.SIGKILL if proc in self.routers else signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    started = Run(tmp_path)
    yield started
    started.stop()


def _keyed_container(tmp_path: Path, *sets: str) -> dict[str, Any]:
    """The router container of the CI router values, its API-key file moved under tmp_path."""
    key_file = tmp_path / "secret" / "api-key"
    key_file.parent.mkdir(exist_ok=True)
    key_file.write_text(KEY)
    container = _router_container(
        "--values", str(ROUTER_VALUES),
        "--set", f"profileOverrides.server.api_key.file={key_file}", *sets,
    )  # fmt: skip
    assert f'--api-key "$(cat {key_file})"' in container["command"][2]
    return container


def _loopback(argv: list[str], port: int, metrics_port: int) -> list[str]:
    argv = _set(argv, "--host", "127.0.0.1")
    argv = _set(argv, "--port", str(port))
    argv = _set(argv, "--prometheus-host", "127.0.0.1")
    return _set(argv, "--prometheus-port", str(metrics_port))


def _router_env(router_bin: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    # `python3` in the chart's command is the router venv's, as it is the image's.
    return {**env, "PATH": f"{router_bin}:{env.get('PATH', '')}", "NO_PROXY": "*", **extra}


def _metrics(url: str) -> str:
    return requests.get(url, timeout=5).text


def _chat(url: str, content: str, model: str, key: str | None = KEY) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 8}
    return requests.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=30)


def _probe(url: str, container: dict[str, Any], kind: str) -> requests.Response:
    """GET the path of the rendered probe (readinessProbe, livenessProbe), without the API key,
    as the kubelet does."""
    get = container[kind]["httpGet"]
    assert get["port"] == "http"  # the router's API port, the one `url` points at
    return requests.get(url + get["path"], timeout=container[kind]["timeoutSeconds"])


def _wait(what: str, ok: Any, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ok():
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    tail = ANSI.sub("", log.read_text(errors="replace"))[-3000:]
    raise AssertionError(f"{what} within {timeout} s; router log:\n{tail}")


def test_kubernetes_discovery_finds_the_ready_server_pod_with_only_the_roles_verbs(
    router_bin: Path, run: Run, tmp_path: Path
) -> None:
    server = run.standin("server-0")
    # The chart's own command and argv, with its key file path pointed here, its listen
    # addresses on loopback, and the discovery port at the stand-in's.
    container = _keyed_container(tmp_path)
    port, metrics_port = free_port(), free_port()
    argv = _loopback(container["args"], port, metrics_port)
    argv = _set(argv, "--service-discovery-port", str(server.port))
    api = FakeKubeApi(NAMESPACE, [
        pod("specserve-5d8f-ready", NAMESPACE, RELEASE),
        pod("specserve-5d8f-loading", NAMESPACE, RELEASE, ready=False),
        pod("other-specserve-7c1a", NAMESPACE, {**RELEASE, "app.kubernetes.io/instance": "other"}),
        pod("specserve-router-9b2e", NAMESPACE,
            {**RELEASE, "app.kubernetes.io/component": "router"}),
    ]).start()  # fmt: skip
    try:
        env = _router_env(router_bin, KUBECONFIG=str(api.kubeconfig(tmp_path / "kubeconfig")))
        log = run.router(container["command"], argv, env)
        metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        worker = f'smg_worker_health{{worker="http://127.0.0.1:{server.port}"}} 1'
        _wait("the discovered pod healthy in the router", lambda: worker in _metrics(metrics),
              60, log)  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        # IGW mode: the request names the model the worker serves (what /v1/models lists).
        listed = requests.get(url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"},
                              timeout=5).json()  # fmt: skip
        assert [m["id"] for m in listed["data"]] == [run.model], listed
        answer = _chat(url, "hello through the router", run.model)
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"]
        # The router asks clients for the key it was given (from the Secret file).
        assert _chat(url, "no key", run.model, key=None).status_code == 401
        text = _metrics(metrics)
        # The series are on the metrics port only: the monitors must scrape port `metrics`.
        assert requests.get(url + "/metrics", timeout=5).status_code == 404
        assert re.search(r'^smg_router_requests_total\{[^}]*endpoint="chat"[^}]*\} 1$', text, re.M)
        assert re.search(r"^smg_worker_pool_size\{[^}]*\} 1$", text, re.M), text
        lines = ANSI.sub("", log.read_text(errors="replace"))
        # The launcher switched IGW mode on for discovery (the chart does not pass --enable-igw).
        assert "Initializing the gateway in multi-router mode (IGW)" in lines
        # Only the release's Ready server pod, registered under its uid (the fake API's
        # "uid-<name>") and the discovery port.
        registered = re.findall(r"Registering worker (\S+) \(\w+\) as uid-(\S+):\d+$", lines, re.M)
        assert registered == [(f"127.0.0.1:{server.port}", "specserve-5d8f-ready")], registered
        assert KEY not in lines  # the key reaches the router by flag, never its log
        assert api.wait_for("watch", 10)
    finally:
        api.stop()
    granted = {verb for rule in _role_rules() for verb in rule["verbs"]}
    used = {c.verb for c in api.calls}
    assert {c.path for c in api.calls} == {f"/api/v1/namespaces/{NAMESPACE}/pods"}
    # Least privilege both ways: everything it asked was granted, and every grant was used.
    assert used == granted == {"list", "watch"}, (used, granted)
    # The API server filters by the chart's selector: the router is sent no other pod.
    assert {json.dumps(c.label_selector, sort_keys=True) for c in api.calls} == {
        json.dumps(RELEASE, sort_keys=True)}, [c.query for c in api.calls]  # fmt: skip


def test_static_workers_equivalent_balances_and_survives_a_dead_replica(
    router_bin: Path, run: Run, tmp_path: Path
) -> None:
    servers = [run.standin(f"server-{i}") for i in range(3)]
    # round_robin makes the spread exact; the default cache_aware policy sends a prompt where its
    # prefix is cached (seen here: one worker took all 12 sequential requests).
    container = _keyed_container(tmp_path, "--set", "router.policy=round_robin")
    port, metrics_port = free_port(), free_port()
    # What discovery would find, as a static list.
    argv = _without_discovery(_loopback(container["args"], port, metrics_port))
    argv += ["--worker-urls", *(s.url for s in servers)]
    log = run.router(container["command"], argv, _router_env(router_bin))
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    _wait("three healthy workers", lambda: _metrics(metrics).count("smg_worker_health{") == 3
          and all(f'worker="{s.url}"}} 1' in _metrics(metrics) for s in servers), 60, log)
    url = f"http://127.0.0.1:{port}"
    # The rendered readiness probe passes once workers are healthy, with no key.
    _wait("readiness 200", lambda: _probe(url, container, "readinessProbe").status_code == 200,
          10, log)  # fmt: skip
    assert _probe(url, container, "readinessProbe").json()["healthy_workers"] == 3
    for i in range(12):
        answer = _chat(url, f"request {i}", run.model)
        assert answer.status_code == 200, answer.text
    text = _metrics(metrics)
    served = {s.url: sum(int(float(v)) for v in re.findall(
        rf'^smg_worker_cb_outcomes_total\{{worker="{re.escape(s.url)}",outcome="success"\}} (\S+)$',
        text, re.M)) for s in servers}  # fmt: skip
    assert sorted(served.values()) == [4, 4, 4], served
    servers[0].stop()
    failed = [i for i in range(6)
              if _chat(url, f"after the loss {i}", run.model).status_code != 200]  # fmt: skip
    assert failed == [], f"requests {failed} failed with one replica of three down"
    # They did reach the dead replica and were retried on the others (smg_* names: the router's).
    text = _metrics(metrics)
    dead = re.escape(servers[0].url)
    assert re.search(rf'^smg_worker_cb_outcomes_total\{{worker="{dead}",outcome="failure"\}} [1-9]',
                     text, re.M), text  # fmt: skip
    assert re.search(r"^smg_worker_retries_total\{[^}]*\} [1-9]", text, re.M), text


# The values schema's edges, as the chart renders them: the binary starts with each.
EDGES = ("router.overloadProtection.waitingRequests=1", "router.overloadProtection.tokenUsage=1",
         "router.warmup.seconds=0", "router.warmup.share=1")  # fmt: skip
# Just past them: the schema refuses each, and so does the binary (given the flag directly).
PAST = {
    "router.overloadProtection.waitingRequests=0": ("--worker-overload-waiting-requests", "0"),
    "router.overloadProtection.tokenUsage=0": ("--worker-overload-token-usage", "0"),
    "router.overloadProtection.tokenUsage=1.01": ("--worker-overload-token-usage", "1.01"),
    "router.warmup.share=1.5": ("--worker-warmup-share", "1.5"),
}


def test_the_schema_bounds_are_the_binarys_and_the_probes_need_no_worker_to_answer(
    router_bin: Path, run: Run, tmp_path: Path
) -> None:
    sets = [a for edge in EDGES for a in ("--set", edge)]
    container = _keyed_container(tmp_path, *sets)
    port, metrics_port = free_port(), free_port()
    # A worker that never answers: the router starts, and has no healthy worker.
    base = _without_discovery(_loopback(container["args"], port, metrics_port))
    base += ["--worker-urls", f"http://127.0.0.1:{free_port()}"]
    log = run.router(container["command"], base, _router_env(router_bin))
    url = f"http://127.0.0.1:{port}"
    _wait("liveness 200", lambda: _probe(url, container, "livenessProbe").status_code == 200,
          30, log)  # fmt: skip
    # Readiness: not Ready without a healthy worker (the Service sends the router nothing).
    ready = _probe(url, container, "readinessProbe")
    assert (ready.status_code, ready.json()["reason"]) == (503, "insufficient healthy workers")
    assert run.router_proc.poll() is None
    for item, (flag, value) in PAST.items():
        refused = template(_tools(), "--values", str(ROUTER_VALUES), "--set", item)
        assert refused.returncode != 0, f"the schema accepts {item}"
        assert "values don't meet the specifications of the schema" in refused.stderr
        argv = _set(_set(base, "--port", str(free_port())), "--prometheus-port", str(free_port()))
        result = subprocess.run([*container["command"], *_set(argv, flag, value)],
                                capture_output=True, text=True, timeout=30, check=False,
                                env=_router_env(router_bin), cwd=tmp_path)  # fmt: skip
        assert result.returncode != 0, f"the binary starts with {flag} {value}"
        assert "Invalid value for field" in ANSI.sub("", result.stdout + result.stderr)


def test_sigterm_drains_readiness_first_then_lets_a_running_generation_finish(
    router_bin: Path, run: Run, tmp_path: Path
) -> None:
    # A slow stand-in (4x model time): 160 tokens take about 8 s, past smg's 5 s settle window.
    server = run.standin("server-0", SPECSERVE_STANDIN_TIME_SCALE="4.0")
    container = _keyed_container(tmp_path)
    assert container["args"][container["args"].index("--shutdown-grace-period-secs") + 1] == "300"
    port, metrics_port = free_port(), free_port()
    argv = _without_discovery(_loopback(container["args"], port, metrics_port))
    argv += ["--worker-urls", server.url]
    log = run.router(container["command"], argv, _router_env(router_bin))
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    _wait("the worker healthy", lambda: f'worker="{server.url}"}} 1' in _metrics(metrics), 60, log)
    url = f"http://127.0.0.1:{port}"
    _wait("readiness 200", lambda: _probe(url, container, "readinessProbe").status_code == 200,
          10, log)  # fmt: skip
    result: dict[str, Any] = {}

    def long_request() -> None:
        body = {"model": run.model, "messages": [{"role": "user", "content": "a long one"}],
                "max_tokens": 160, "ignore_eos": True}  # fmt: skip
        started = time.monotonic()
        answer = requests.post(url + "/v1/chat/completions", json=body, timeout=60,
                               headers={"Authorization": f"Bearer {KEY}"})  # fmt: skip
        result.update(
            status=answer.status_code,
            ended=time.monotonic(),
            seconds=time.monotonic() - started,
            tokens=answer.json().get("usage", {}).get("completion_tokens"),
        )

    thread = threading.Thread(target=long_request)
    thread.start()
    # Stop the router only once it has the request in flight on the worker (its own gauge).
    active = f'smg_worker_requests_active{{worker="{server.url}"}} 1'
    _wait("the request in flight", lambda: active in _metrics(metrics), 20, log)
    assert thread.is_alive(), f"the generation ended before the router was stopped: {result}"
    run.router_proc.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    time.sleep(0.3)
    # At once: not Ready (the endpoint leaves the Service), still alive (no restart).
    ready = _probe(url, container, "readinessProbe")
    assert (ready.status_code, ready.json()["reason"]) == (503, "draining")
    assert _probe(url, container, "livenessProbe").status_code == 200
    # Still serving during the settle window: a client that had not yet seen the endpoint go
    # gets an answer, not a refused connection.
    late = _chat(url, "sent during the settle window", run.model)
    assert late.status_code == 200, late.text
    # Then the listener closes: new connections are refused.
    _wait("new connections refused", lambda: _refused(url), 15, log)
    closed = time.monotonic() - stopped
    assert 3.0 <= closed <= 9.0, f"the listener closed {closed:.1f} s after SIGTERM, not ~5 s"
    thread.join(timeout=60)
    assert result.get("status") == 200 and result.get("tokens") == 160, result
    # The generation outlived the listener: running requests are drained, not cut.
    assert result["ended"] - stopped > closed, (result, closed)
    assert run.router_proc.wait(timeout=30) == 0
    lines = ANSI.sub("", log.read_text(errors="replace"))
    assert "Beginning graceful shutdown: readiness draining" in lines
    assert "settle_secs=5" in lines  # min(grace / 2, 5 s) of the chart's 300 s


def _refused(url: str) -> bool:
    try:
        requests.get(url + "/liveness", timeout=2)
    except requests.ConnectionError:
        return True
    return False
