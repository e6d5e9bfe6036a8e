"""helm lint, the golden of the default render, schema validation (Kubernetes 1.30-1.35 +
Prometheus Operator CRDs) and the rendered objects' essential properties,
over the CI values matrix (charts/specserve/ci)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specserve.logpath import LOG_DIR, LOG_FILE
from tests.helm import k8s_schemas
from tests.helm.conftest import CHART, CI_VALUES, Rendered, helm

GOLDEN = Path(__file__).resolve().parent / "golden"
MATRIX = [p.name.removesuffix("-values.yaml") for p in CI_VALUES]


def test_matrix_covers_the_issue() -> None:
    assert set(MATRIX) == {
        "kimi-default", "small-model", "existing-pvc", "hostpath-cache", "download-job",
        "monitoring-off", "replicas-router", "autoscaling", "dcgm-exporter",
    }  # fmt: skip


def test_helm_lint_default_and_every_ci_values_file(tools: Path) -> None:
    for extra in [[]] + [["--values", str(p)] for p in CI_VALUES]:
        result = helm(tools, "lint", "--strict", str(CHART), *extra)
        assert result.returncode == 0, f"{extra}: {result.stdout}{result.stderr}"
        assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_golden_default_render(rendered: dict[str, Rendered]) -> None:
    """One golden, of the default render (`helm template` with no values): a reviewable whole.
    Every other values file is checked by the fields that matter (test_templates.py)."""
    path = GOLDEN / "kimi-default.yaml"
    text = rendered["kimi-default"].text
    if os.environ.get("UPDATE") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no golden file {path}: run UPDATE=1 pytest tests/helm/test_render.py"
    assert text == path.read_text(encoding="utf-8"), (
        f"the default render differs from {path}; if intended: "
        "UPDATE=1 .venv/bin/pytest tests/helm/test_render.py -k golden"
    )
    assert sorted(p.name for p in GOLDEN.iterdir()) == ["kimi-default.yaml"]


@pytest.mark.parametrize("version", k8s_schemas.KUBERNETES_VERSIONS)
def test_every_object_matches_the_api_schemas(rendered: dict[str, Rendered], version: str) -> None:
    problems: list[str] = []
    checked = 0
    for render in rendered.values():
        for doc in render.docs:
            problems += [f"{render.name}: {e}" for e in k8s_schemas.errors(doc, version)]
            checked += 1
    assert checked > 70
    assert not problems, "\n".join(problems)


def test_crd_objects_are_checked_against_the_operator_schemas(
    rendered: dict[str, Rendered],
) -> None:
    kinds = {d["kind"] for r in rendered.values() for d in r.docs if k8s_schemas.is_crd(d)}
    assert kinds == {"ServiceMonitor", "PodMonitor", "PrometheusRule", "ScaledObject"}
    bad = rendered["kimi-default"].one("ServiceMonitor")
    bad = {**bad, "spec": {**bad["spec"], "endpoints": [{"port": "metrics", "intervall": "15s"}]}}
    assert any("intervall" in e for e in k8s_schemas.errors(bad, "1.30"))


def _pod(render: Rendered, name: str = "specserve") -> dict:
    return render.one("Deployment", name)["spec"]["template"]["spec"]


def _container(render: Rendered, name: str) -> dict:
    (found,) = [c for c in _pod(render)["containers"] if c["name"] == name]
    return found


def test_gpu_count_comes_from_the_profile(rendered: dict[str, Rendered]) -> None:
    kimi = _container(rendered["kimi-default"], "sglang")["resources"]
    assert kimi["limits"]["nvidia.com/gpu"] == 8 and kimi["requests"]["nvidia.com/gpu"] == 8
    small = _container(rendered["small-model"], "sglang")["resources"]
    assert small["limits"]["nvidia.com/gpu"] == 1
    assert _pod(rendered["kimi-default"])["runtimeClassName"] == "nvidia"


def test_default_strategy_is_recreate_and_probes_budget_an_hour(
    rendered: dict[str, Rendered],
) -> None:
    render = rendered["kimi-default"]
    assert render.one("Deployment", "specserve")["spec"]["strategy"] == {"type": "Recreate"}
    sglang = _container(render, "sglang")
    startup, ready = sglang["startupProbe"], sglang["readinessProbe"]
    assert startup["httpGet"]["path"] == ready["httpGet"]["path"] == "/health_generate"
    budget = startup["initialDelaySeconds"] + startup["periodSeconds"] * startup["failureThreshold"]
    assert budget == 3600
    assert ready["timeoutSeconds"] == 60
    assert sglang["lifecycle"]["preStop"] == {"sleep": {"seconds": 15}}
    assert _pod(render)["terminationGracePeriodSeconds"] == 300


# SGLang's /health_generate answers 503 only after SGLANG_HEALTH_CHECK_TIMEOUT (20 s by default,
# entrypoints/http_server.py in 0.5.21 and 0.5.23); by default /health is the same handler.
SGLANG_HEALTH_CHECK_TIMEOUT_S = 20
GENERATING_PATHS = ("/health", "/health_generate")


@pytest.mark.parametrize("name", MATRIX)
def test_probes_ask_sglang_the_right_question(rendered: dict[str, Rendered], name: str) -> None:
    """Liveness asks "is it up" (/ready, generates nothing): a liveness probe on /health with a
    10 s timeout restarts a busy, healthy server. Every probe that makes SGLang generate waits
    longer than SGLang itself does before it calls the server dead."""
    sglang = _container(rendered[name], "sglang")
    assert sglang["livenessProbe"]["httpGet"]["path"] == "/ready"
    assert sglang["readinessProbe"]["httpGet"]["path"] == "/health_generate"
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = sglang[kind]
        if probe["httpGet"]["path"] in GENERATING_PATHS:
            assert probe["timeoutSeconds"] > SGLANG_HEALTH_CHECK_TIMEOUT_S, (kind, probe)


def test_shm_logs_secret_and_profile_volumes(rendered: dict[str, Rendered]) -> None:
    render = rendered["kimi-default"]
    volumes = {v["name"]: v for v in _pod(render)["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    # 6 files of 100 MiB (backup_count 5 + the live one) plus 64 MiB slack.
    assert volumes["logs"]["emptyDir"]["sizeLimit"] == 6 * 104857600 + 64 * 1048576
    assert volumes["api-key"]["secret"]["items"] == [{"key": "api-key", "path": "api-key"}]
    mounts = {m["name"]: m["mountPath"] for m in _container(render, "sglang")["volumeMounts"]}
    # The profile says api_key: {file: /run/secrets/specserve/api-key}.
    assert mounts["api-key"] == "/run/secrets/specserve"
    assert mounts["logs"] == LOG_DIR and mounts["profile"] == "/etc/specserve"
    exporter = _container(render, "exporter")
    assert exporter["args"][:4] == ["--source", "file", "--file", LOG_FILE]
    sc = exporter["securityContext"]
    assert (
        sc["runAsNonRoot"]
        and sc["readOnlyRootFilesystem"]
        and sc["capabilities"] == {"drop": ["ALL"]}
    )
    assert not _pod(render)["automountServiceAccountToken"]


def test_storage_modes(rendered: dict[str, Rendered]) -> None:
    def model_volume(name: str) -> dict:
        (vol,) = [v for v in _pod(rendered[name])["volumes"] if v["name"] == "model"]
        return vol

    assert model_volume("existing-pvc")["persistentVolumeClaim"]["claimName"] == "kimi-k2-5-weights"
    assert model_volume("hostpath-cache")["hostPath"] == {
        "path": "/mnt/nvme/models",
        "type": "Directory",
    }
    download = rendered["download-job"]
    assert model_volume("download-job")["persistentVolumeClaim"]["claimName"] == "specserve-models"
    pvc = download.one("PersistentVolumeClaim")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1500Gi"
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    (job,) = [j for j in download.objects("Job") if "download" in j["metadata"]["name"]]
    container = job["spec"]["template"]["spec"]["containers"][0]
    # The token reaches huggingface_hub as a file (HF_TOKEN_PATH), never as an env value.
    env = {e["name"]: e for e in container["env"]}
    assert "HF_TOKEN" not in env and env["HF_TOKEN_PATH"]["value"] == "/run/secrets/hf/token"
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["hf-token"]["secret"]["secretName"] == "hf-token"
    assert volumes["hf-token"]["secret"]["items"] == [{"key": "token", "path": "token"}]
    (init,) = _pod(download)["initContainers"]
    # The server waits for exactly the marker the Job writes.
    assert init["command"][3] == container["command"][4]
    assert init["command"][3].startswith("/models/.specserve-download-")


def test_validation_hook_runs_specserve_check_before_the_release(
    rendered: dict[str, Rendered],
) -> None:
    render = rendered["existing-pvc"]
    job = render.one("Job", "specserve-validate")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    cm = render.one("ConfigMap", "specserve-profile-check")
    assert int(cm["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        job["metadata"]["annotations"]["helm.sh/hook-weight"]
    )
    assert cm["data"] == render.one("ConfigMap", "specserve-profile")["data"]
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == [
        "specserve", "check", "/etc/specserve/profile.yaml", "--weights-root", "/models",
        "--require-models",
    ]  # fmt: skip
    assert {
        "name": "model",
        "persistentVolumeClaim": {"claimName": "kimi-k2-5-weights", "readOnly": True},
    } in pod["volumes"]
    hostpath = rendered["hostpath-cache"].one("Job", "specserve-validate")["spec"]["template"][
        "spec"
    ]
    assert hostpath["nodeSelector"] == {"specserve.io/model-cache": "kimi-k2.5"}
    # First install in download mode: no PVC yet, so profile checks only.
    first = rendered["download-job"].one("Job", "specserve-validate")["spec"]["template"]["spec"]
    assert first["containers"][0]["command"][-1] == "--configs-only"
    assert all(v["name"] != "model" for v in first["volumes"])


def test_several_replicas_router_and_anti_affinity(rendered: dict[str, Rendered]) -> None:
    render = rendered["replicas-router"]
    deploy = render.one("Deployment", "specserve")
    assert deploy["spec"]["replicas"] == 3
    anti = _pod(render)["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "server"
    router = render.one("Deployment", "specserve-router")["spec"]["template"]["spec"]
    (container,) = router["containers"]
    assert container["image"] == "lightseekorg/smg:1.13.0"
    args = container["args"]
    assert args[args.index("--service-discovery-port") + 1] == "8000"
    assert "app.kubernetes.io/component=server" in args
    assert "cat /run/secrets/specserve/api-key" in container["command"][2]
    role = render.one("Role", "specserve-router")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}
    ]
    ingress = render.one("Ingress")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "specserve-router", "port": {"number": 30000}}
    assert "ServiceMonitor" not in {d["kind"] for d in render.docs}
    for name in ("specserve", "specserve-router"):
        monitor = render.one("PodMonitor", name)
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_monitoring_objects(rendered: dict[str, Rendered]) -> None:
    render = rendered["kimi-default"]
    monitor = render.one("ServiceMonitor")
    jobs = [e["relabelings"][0]["replacement"] for e in monitor["spec"]["endpoints"]]
    assert jobs == ["specserve-exporter", "specserve-sglang"]
    dashboard = render.one("ConfigMap", "specserve-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    source = (
        CHART.parents[1] / "monitoring" / "grafana" / "dashboards" / "specserve.json"
    ).read_text()
    # The same dashboard; Helm prints the values' whole numbers without ".0".
    assert json.loads(dashboard["data"]["specserve.json"]) == json.loads(source)
    off = rendered["monitoring-off"]
    kinds = {d["kind"] for d in off.docs}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    assert [c["name"] for c in _pod(off)["containers"]] == ["sglang"]
    alerts = rendered["replicas-router"].one("ConfigMap", "specserve-grafana-alerts")
    assert alerts["metadata"]["labels"]["grafana_alert"] == "1"
    assert "SPECSERVE_PROMETHEUS_DATASOURCE_UID" in alerts["data"]["specserve-alerts.yml"]


def test_helm_test_pod(rendered: dict[str, Rendered]) -> None:
    """The pod runs `specserve verify` (the Ansible gate) from the exporter image, against the
    router, every pod's exporter and the release's own profile (speculation, graphs)."""
    pod = rendered["replicas-router"].one("Pod", "specserve-test")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    container = pod["spec"]["containers"][0]
    assert container["image"].startswith("specserve/exporter:")
    argv = container["command"]
    assert argv[:2] == ["specserve", "verify"]
    assert "--server=http://specserve-router.inference.svc:30000" in argv
    assert "--exporter=http://specserve-pods.inference.svc:9433/metrics" in argv
    assert "--each-address" in argv
    assert "--floor=1.5" in argv  # the SpecDecodeAcceptLengthLow floor
    assert "--knob=floor=tests.acceptLengthFloor" in argv  # messages name the values key
    assert "--profile=/etc/specserve/profile.yaml" in argv
    profile = next(v for v in pod["spec"]["volumes"] if v["name"] == "profile")
    assert profile["configMap"]["name"] == "specserve-profile"
    # Without the exporter sidecar there is nothing to read: health and completions only.
    off = rendered["monitoring-off"].one("Pod", "specserve-test")["spec"]["containers"][0]
    assert "--no-exporter" in off["command"]
    assert not any(a.startswith("--exporter=") for a in off["command"])
