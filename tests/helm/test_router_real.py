"""The chart's router, run for real: the pinned sglang-router binary (versions.yaml
tools.sglang_router, the package the chart's lmsysorg/sgl-model-gateway image is built from) with
the argv the chart renders, in front of stand-in SGLang servers on 127.0.0.1.

- Its own parser (sglang_router.launch_router.parse_router_args, what the image's entrypoint
  `python3 -m sglang_router.launch_router` calls) reads every rendered flag as the chart means it.
- With the rendered Kubernetes discovery flags unchanged, pointed at a fake API server on loopback
  (KUBECONFIG), it adds only the release's Ready server pod, routes an authenticated completion to
  it, serves smg_* metrics on the metrics port, and asks the API for exactly what the chart's Role
  grants: list and watch of pods in the release namespace.
- With the discovery flags swapped for the equivalent static worker list, it balances over three
  stand-ins and keeps answering when one of them dies.
- On SIGTERM (a router rollout, after the chart's preStop sleep) it refuses new connections and
  lets a running generation finish, which is why the chart gives it a grace period
  (--shutdown-grace-period-secs, terminationGracePeriodSeconds) longer than its default.
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

from tests.helm.conftest import CHART, REPO, template
from tests.helm.fake_kube_api import FakeKubeApi, pod
from tests.standin.helpers import FAST_ENV, Standin, free_port

ROUTER_VALUES = CHART / "ci" / "replicas-router-values.yaml"
NAMESPACE = "inference"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
KEY = "router-test-key-3f9a"  # a throwaway key: the test checks it never reaches the router's log
# The upstream image's ENTRYPOINT (sgl-project/sglang docker/gateway.Dockerfile, router-image).
IMAGE_ENTRYPOINT = ["python3", "-m", "sglang_router.launch_router"]


@pytest.fixture(scope="module")
def router_bin() -> Path:
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "setup" / "router.sh")],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    venv_bin = REPO / ".cache" / "router-venv" / "bin"
    if result.returncode != 0:
        tail = result.stderr[-2000:]
        if not (venv_bin / "python").exists() and any(
            s in tail for s in ("No matching distribution", "Could not fetch", "NewConnectionError")
        ):
            pytest.skip(f"PyPI unreachable, cannot install sglang-router:\n{tail}")
        pytest.fail(f"scripts/setup/router.sh failed:\n{tail}")
    return Path(result.stdout.strip())


def _tools() -> Path:
    from tests.helm.conftest import _install_tools

    return _install_tools()


def _router_container(*args: str) -> dict[str, Any]:
    result = template(_tools(), "--show-only", "templates/router.yaml", *args)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    return container


def _role_rules() -> list[dict[str, Any]]:
    result = template(_tools(), "--values", str(ROUTER_VALUES),
                      "--show-only", "templates/router.yaml")  # fmt: skip
    assert result.returncode == 0, result.stderr
    (role,) = [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "Role"]
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


def _parse(router_bin: Path, argv: list[str]) -> dict[str, Any]:
    code = (
        "import dataclasses, json, sys\n"
        "from sglang_router.launch_router import parse_router_args\n"
        "args = parse_router_args(sys.argv[1:])\n"
        "args._validate_router_args()\n"
        "print(json.dumps(dataclasses.asdict(args), default=str))\n"
    )
    result = subprocess.run([str(router_bin / "python"), "-c", code, *argv],
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, f"the real router refused the argv {argv}:\n{result.stderr}"
    parsed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


def test_the_image_entrypoint_and_the_real_parser_read_the_rendered_flags(router_bin: Path) -> None:
    values = yaml.safe_load(ROUTER_VALUES.read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())["router"]
    # Without an API key in the profile the container runs the image's entrypoint itself.
    plain = _router_container("--values", str(CHART / "ci" / "small-model-values.yaml"),
                              "--set", "router.enabled=true")  # fmt: skip
    assert plain["command"] == IMAGE_ENTRYPOINT
    assert _parse(router_bin, plain["args"])["service_discovery_port"] == 30000  # its profile's
    keyed = _router_container("--values", str(ROUTER_VALUES))
    parsed = _parse(router_bin, keyed["args"])
    check = defaults["healthCheck"]
    assert {k: parsed[k] for k in (
        "service_discovery", "selector", "service_discovery_namespace", "service_discovery_port",
        "host", "port", "policy", "prometheus_host", "prometheus_port", "health_check_endpoint",
        "health_check_timeout_secs", "health_check_interval_secs", "health_failure_threshold",
    )} == {
        "service_discovery": True,
        # The Deployment's own pod selector: the server pods of this release, nothing else.
        "selector": {"app.kubernetes.io/name": "specserve",
                     "app.kubernetes.io/instance": "specserve",
                     "app.kubernetes.io/component": "server"},
        "service_discovery_namespace": NAMESPACE,
        "service_discovery_port": 8000,  # the default profile's server.port
        "host": "0.0.0.0", "port": defaults["port"], "policy": defaults["policy"],
        "prometheus_host": "0.0.0.0", "prometheus_port": defaults["metricsPort"],
        "health_check_endpoint": check["endpoint"],
        "health_check_timeout_secs": check["timeoutSeconds"],
        "health_check_interval_secs": check["intervalSeconds"],
        "health_failure_threshold": check["failureThreshold"],
    }  # fmt: skip
    assert values["router"]["enabled"] is True
    # With the profile's API key the image's entrypoint runs behind a shell that adds the key
    # (the tests below run that exact command).
    assert keyed["command"][:2] == ["/bin/sh", "-c"]
    assert keyed["command"][2].startswith("exec " + " ".join(IMAGE_ENTRYPOINT) + ' "$@" --api-key')
    # Extra flags reach the real parser too.
    extra = _router_container("--values", str(ROUTER_VALUES), "--set-string",
                              "router.extraArgs={--max-concurrent-requests,256}")  # fmt: skip
    assert _parse(router_bin, extra["args"])["max_concurrent_requests"] == 256


class Run:
    """Processes this test started, stopped (and their logs kept) at teardown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[bytes]] = []

    def standin(self, name: str, **env: str) -> Standin:
        port = free_port()
        log = self.root / f"{name}.log"
        argv = [sys.executable, "-m", "specserve.standin.server", "--model-path",
                str(self.root / "model"), "--host", "127.0.0.1", "--port", str(port),
                "--api-key", KEY]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ, **FAST_ENV, **env})  # fmt: skip
        self.procs.append(proc)
        server = Standin(proc, port, log)
        server.wait_ready()
        return server

    def router(self, command: list[str], argv: list[str], env: dict[str, str]) -> Path:
        log = self.root / "router.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([*command, *argv], stdout=out, stderr=subprocess.STDOUT,
                                    env=env, cwd=self.root)  # fmt: skip
        self.procs.append(proc)
        self.router_proc = proc
        return log

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
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


def _chat(url: str, content: str, key: str | None = KEY) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 8}
    return requests.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=30)


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
    release = {"app.kubernetes.io/name": "specserve", "app.kubernetes.io/instance": "specserve",
               "app.kubernetes.io/component": "server"}  # fmt: skip
    api = FakeKubeApi(NAMESPACE, [
        pod("specserve-5d8f-ready", NAMESPACE, release),
        pod("specserve-5d8f-loading", NAMESPACE, release, ready=False),
        pod("other-specserve-7c1a", NAMESPACE, {**release, "app.kubernetes.io/instance": "other"}),
        pod("specserve-router-9b2e", NAMESPACE,
            {**release, "app.kubernetes.io/component": "router"}),
    ]).start()  # fmt: skip
    try:
        env = _router_env(router_bin, KUBECONFIG=str(api.kubeconfig(tmp_path / "kubeconfig")))
        log = run.router(container["command"], argv, env)
        metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        worker = f'smg_worker_health{{worker="http://127.0.0.1:{server.port}"}} 1'
        _wait("the discovered pod healthy in the router", lambda: worker in _metrics(metrics),
              60, log)  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        answer = _chat(url, "hello through the router")
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"]
        # The router asks clients for the key it was given (from the Secret file).
        assert _chat(url, "no key", key=None).status_code == 401
        text = _metrics(metrics)
        # The series are on the metrics port only: the monitors must scrape port `metrics`.
        assert requests.get(url + "/metrics", timeout=5).status_code == 404
        assert re.search(r'^smg_router_requests_total\{[^}]*endpoint="chat"[^}]*\} 1$', text, re.M)
        assert re.search(r"^smg_worker_pool_size\{[^}]*\} 1$", text, re.M), text
        lines = ANSI.sub("", log.read_text(errors="replace"))
        added = re.findall(r"Adding pod: (\S+) ", lines)
        assert added == ["specserve-5d8f-ready"], added
        assert KEY not in lines  # the key reaches the router by flag, never its log
        api.wait_for("watch", 10)
    finally:
        api.stop()
    granted = {verb for rule in _role_rules() for verb in rule["verbs"]}
    used = {c.verb for c in api.calls}
    assert {c.path for c in api.calls} == {f"/api/v1/namespaces/{NAMESPACE}/pods"}
    # Least privilege both ways: everything it asked was granted, and every grant was used.
    assert used == granted == {"list", "watch"}, (used, granted)


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
    for i in range(12):
        answer = _chat(url, f"request {i}")
        assert answer.status_code == 200, answer.text
    text = _metrics(metrics)
    served = {s.url: sum(int(float(v)) for v in re.findall(
        rf'^smg_worker_cb_outcomes_total\{{worker="{re.escape(s.url)}",outcome="success"\}} (\S+)$',
        text, re.M)) for s in servers}  # fmt: skip
    assert sorted(served.values()) == [4, 4, 4], served
    servers[0].stop()
    failed = [i for i in range(6) if _chat(url, f"after the loss {i}").status_code != 200]
    assert failed == [], f"requests {failed} failed with one replica of three down"
    # They did reach the dead replica and were retried on the others (smg_* names: the router's).
    text = _metrics(metrics)
    dead = re.escape(servers[0].url)
    assert re.search(rf'^smg_worker_cb_outcomes_total\{{worker="{dead}",outcome="failure"\}} [1-9]',
                     text, re.M), text  # fmt: skip
    assert re.search(r"^smg_worker_retries_total\{[^}]*\} [1-9]", text, re.M), text


def test_sigterm_lets_a_running_generation_finish_and_refuses_new_ones(
    router_bin: Path, run: Run, tmp_path: Path
) -> None:
    # Real-time stand-in: 160 tokens take about 2 s, long enough to stop the router mid-way.
    server = run.standin("server-0", SPECSERVE_STANDIN_TIME_SCALE="1.0")
    container = _keyed_container(tmp_path)
    assert container["args"][container["args"].index("--shutdown-grace-period-secs") + 1] == "300"
    port, metrics_port = free_port(), free_port()
    argv = _without_discovery(_loopback(container["args"], port, metrics_port))
    argv += ["--worker-urls", server.url]
    log = run.router(container["command"], argv, _router_env(router_bin))
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    _wait("the worker healthy", lambda: f'worker="{server.url}"}} 1' in _metrics(metrics), 60, log)
    url = f"http://127.0.0.1:{port}"
    result: dict[str, Any] = {}

    def long_request() -> None:
        body = {"messages": [{"role": "user", "content": "a long one"}], "max_tokens": 160,
                "ignore_eos": True}  # fmt: skip
        started = time.monotonic()
        answer = requests.post(url + "/v1/chat/completions", json=body, timeout=60,
                               headers={"Authorization": f"Bearer {KEY}"})  # fmt: skip
        result.update(status=answer.status_code, seconds=time.monotonic() - started,
                      tokens=answer.json().get("usage", {}).get("completion_tokens"))

    thread = threading.Thread(target=long_request)
    thread.start()
    # Stop the router only once it has the request in flight on the worker (its own gauge).
    active = f'smg_worker_requests_active{{worker="{server.url}"}} 1'
    _wait("the request in flight", lambda: active in _metrics(metrics), 20, log)
    assert thread.is_alive(), f"the generation ended before the router was stopped: {result}"
    run.router_proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    with pytest.raises(requests.ConnectionError):
        _chat(url, "after SIGTERM")
    thread.join(timeout=60)
    assert result.get("status") == 200 and result.get("tokens") == 160, result
    assert run.router_proc.wait(timeout=30) == 0
    assert "starting graceful shutdown" in ANSI.sub("", log.read_text(errors="replace"))

