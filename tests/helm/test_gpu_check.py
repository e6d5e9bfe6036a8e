"""The server pods' GPU check (dcgmExporter.gpuCheck; docs/gpu-health.md, "The verify gate").

With the chart's DCGM exporter, or a URL to another (the GPU Operator's), every server pod (the
Deployment's, the LeaderWorkerSet leader's and worker's: every rank's node) gets an init container
running `specserve verify --gpus-only` in the exporter image against its own node's exporter: the
exporter's Service is node-local (internalTrafficPolicy Local). Without either, no init container.
Every render validates against the pinned Kubernetes schemas.

The end-to-end test takes the init container's command from `helm template`, does what the
kubelet does with it ($(VAR) from the container's env, the profile ConfigMap at its mount path),
and runs it against a local exporter serving healthy and XID-79 exposition.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm import k8s_schemas
from tests.helm.conftest import NAMESPACE, RELEASE, REPO, Rendered, template
from tests.helm.test_leaderworkerset import multi_profile
from tests.verify.test_gate_gpus import _serving, exposition

CHART_URL = f"http://{RELEASE}-dcgm-exporter.{NAMESPACE}.svc:9400/metrics"
VENV_BIN = REPO / ".venv" / "bin"
MULTI = {"profile": multi_profile(), "apiKey": {"existingSecret": "specserve-api-key"}}
STANDIN = {"profile": yaml.safe_load((REPO / "profiles" / "standin-cpu.yaml").read_text("utf-8"))}


def _render(tools: Path, tmp_path: Path, values: dict[str, Any]) -> Rendered:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    result = template(tools, "--values", str(path))
    assert result.returncode == 0, result.stderr
    return Rendered(path.name, result.stdout, [d for d in yaml.safe_load_all(result.stdout) if d])


def _pods(rendered: Rendered) -> dict[str, dict[str, Any]]:
    """Every server pod template by role: the Deployment's, or the LWS leader's and worker's."""
    if rendered.objects("LeaderWorkerSet"):
        lwt = rendered.one("LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
        return {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}
    return {"deployment": rendered.one("Deployment")["spec"]["template"]}


def _check(pod: dict[str, Any]) -> dict[str, Any] | None:
    found = [c for c in pod["spec"].get("initContainers", []) if c["name"] == "gpu-check"]
    assert len(found) <= 1
    return found[0] if found else None


def _schema_problems(rendered: Rendered) -> list[str]:
    problems = []
    for version in k8s_schemas.KUBERNETES_VERSIONS:
        for doc in rendered.docs:
            problems += k8s_schemas.errors(doc, version)
        for role, tmpl in _pods(rendered).items():
            pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": role},
                   "template": tmpl}
            problems += k8s_schemas.errors(pod, version)
    return problems


@pytest.mark.parametrize(
    ("values", "roles"),
    [({}, ["deployment"]), (MULTI, ["leader", "worker"])],
    ids=["deployment", "leaderworkerset"],
)
def test_with_the_charts_exporter_every_server_pod_checks_its_nodes_gpus(
    tools: Path, tmp_path: Path, values: dict[str, Any], roles: list[str]
) -> None:
    rendered = _render(tools, tmp_path, {**values, "dcgmExporter": {"enabled": True}})
    pods = _pods(rendered)
    assert sorted(pods) == sorted(roles)
    for role, pod in pods.items():
        check = _check(pod)
        assert check is not None, role
        assert check["command"] == [
            "specserve", "verify", "--gpus-only", f"--dcgm={CHART_URL}",
            "--profile=/etc/specserve/profile.yaml", "--dcgm-wait=300", "--on=$(NODE_NAME)",
            "--knob=dcgm_wait=dcgmExporter.gpuCheck.waitSeconds",
        ], role  # fmt: skip
        # The exporter image: it installs specserve, as the helm test pod's `specserve verify`.
        (test_pod,) = rendered.objects("Pod")
        assert check["image"] == test_pod["spec"]["containers"][0]["image"], role
        # The last init container: the GPUs are read just before the server starts.
        assert pod["spec"]["initContainers"][-1]["name"] == "gpu-check"
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in check["env"]}
        assert env == {"NODE_NAME": "spec.nodeName", "HOST_IP": "status.hostIP"}
        assert check["terminationMessagePolicy"] == "FallbackToLogsOnError"
        # It reads the profile the server runs (its gpu.count), mounted read-only.
        assert check["volumeMounts"] == [
            {"name": "profile", "mountPath": "/etc/specserve", "readOnly": True}]
        assert {"name": "profile", "configMap": {"name": f"{RELEASE}-profile"}} in \
            pod["spec"]["volumes"]
        # Least privilege: non-root, read-only root, no capability, no escalation, no token.
        sc = check["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 10001
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        # Small, and no GPU taken from the server.
        assert check["resources"] == {"requests": {"cpu": "10m", "memory": "64Mi"},
                                      "limits": {"memory": "128Mi"}}
    assert _schema_problems(rendered) == []


def test_the_exporter_service_is_node_local_and_still_scraped(
    tools: Path, tmp_path: Path
) -> None:
    for monitor in (True, False):
        rendered = _render(tools, tmp_path, {"dcgmExporter": {"enabled": True},
                                             "serviceMonitor": {"enabled": monitor}})
        service = rendered.one("Service", f"{RELEASE}-dcgm-exporter")
        assert service["spec"]["internalTrafficPolicy"] == "Local"
        assert service["spec"]["type"] == "ClusterIP"
        if monitor:  # the ServiceMonitor scrapes the Service's endpoints: one per exporter pod
            sm = rendered.one("ServiceMonitor", f"{RELEASE}-dcgm-exporter")
            assert sm["spec"]["endpoints"][0]["port"] == "metrics"
        assert _schema_problems(rendered) == []


@pytest.mark.parametrize(
    "values",
    [
        {},  # off by default: no exporter, no URL
        {"dcgmExporter": {"enabled": False, "gpuCheck": {"url": ""}}},
        {"dcgmExporter": {"enabled": True, "gpuCheck": {"enabled": False}}},
        {**STANDIN, "dcgmExporter": {"enabled": True}},  # gpu.count 0: no GPU to check
        {**MULTI},
    ],
    ids=["default", "disabled-no-url", "check-off", "cpu-standin", "lws-no-exporter"],
)
def test_no_exporter_and_no_url_no_init_container(
    tools: Path, tmp_path: Path, values: dict[str, Any]
) -> None:
    for role, pod in _pods(_render(tools, tmp_path, values)).items():
        assert _check(pod) is None, role


@pytest.mark.parametrize("values", [{}, MULTI], ids=["deployment", "leaderworkerset"])
def test_a_user_url_reads_that_exporter(
    tools: Path, tmp_path: Path, values: dict[str, Any]
) -> None:
    url = "http://$(HOST_IP):9400/metrics"
    rendered = _render(tools, tmp_path, {**values, "dcgmExporter": {
        "gpuCheck": {"url": url, "waitSeconds": 60}}})
    assert not [d for d in rendered.docs if d["metadata"]["name"].endswith("dcgm-exporter")]
    for role, pod in _pods(rendered).items():
        check = _check(pod)
        assert check is not None, role
        assert f"--dcgm={url}" in check["command"] and "--dcgm-wait=60" in check["command"]
    # Set with the chart's exporter too, the user's URL wins.
    rendered = _render(tools, tmp_path, {"dcgmExporter": {"enabled": True, "gpuCheck": {
        "url": "http://nvidia-dcgm-exporter.gpu-operator.svc:9400/metrics"}}})
    check = _check(_pods(rendered)["deployment"])
    assert check is not None
    assert "--dcgm=http://nvidia-dcgm-exporter.gpu-operator.svc:9400/metrics" in check["command"]
    assert _schema_problems(rendered) == []


def test_the_schema_refuses_a_bad_url_or_wait(tools: Path, tmp_path: Path) -> None:
    for bad in ({"url": "nvidia-dcgm-exporter:9400"}, {"waitSeconds": -1},
                {"waitSeconds": "5m"}, {"retries": 3}):
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump({"dcgmExporter": {"gpuCheck": bad}}), encoding="utf-8")
        result = template(tools, "--values", str(path))
        assert result.returncode != 0 and "gpuCheck" in result.stderr, (bad, result.stderr)


# --- end to end: the rendered command against a local exporter ----------------------------------
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _kubelet_argv(rendered: Rendered, tmp_path: Path, env: dict[str, str]) -> list[str]:
    """The Deployment's gpu-check command as the kubelet runs it: $(VAR) from the container's
    env (the fieldRefs given `env`'s values), its volume mounts under tmp_path."""
    pod = _pods(rendered)["deployment"]["spec"]
    check = _check({"spec": pod})
    assert check is not None
    assert {e["name"] for e in check["env"]} == set(env)
    mounts: dict[str, Path] = {}
    for mount in check["volumeMounts"]:
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        data = rendered.one("ConfigMap", volume["configMap"]["name"])["data"]
        root = tmp_path / mount["name"]
        root.mkdir(exist_ok=True)
        for key, text in data.items():
            (root / key).write_text(text, encoding="utf-8")
        mounts[mount["mountPath"]] = root
    argv = []
    for arg in check["command"]:
        arg = _VAR.sub(lambda m: env[m.group(1)], arg)
        for path, root in mounts.items():
            arg = arg.replace(path + "/", f"{root}/")
        argv.append(arg)
    return argv


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          env=env)


@pytest.mark.parametrize(
    ("text", "code"),
    [(exposition(), 0), (exposition(DCGM_FI_DEV_XID_ERRORS={5: 79}), 1)],
    ids=["healthy", "xid-79"],
)
def test_the_rendered_init_container_command_passes_a_healthy_node_and_refuses_xid_79(
    tools: Path, tmp_path: Path, text: str, code: int
) -> None:
    with _serving(text) as (base, asked):
        port = base.rsplit(":", 1)[1]
        # The exporter on the node's address, as a url naming $(HOST_IP) reads it.
        rendered = _render(tools, tmp_path, {"dcgmExporter": {"gpuCheck": {
            "url": f"http://$(HOST_IP):{port}/metrics", "waitSeconds": 5}}})
        argv = _kubelet_argv(rendered, tmp_path,
                             {"NODE_NAME": "gpu-node-1", "HOST_IP": "127.0.0.1"})
        assert argv[:3] == ["specserve", "verify", "--gpus-only"]
        result = _run(argv)
    assert result.returncode == code, result.stdout + result.stderr
    assert asked == ["/metrics"]  # read once: an answered exporter is judged, not retried
    if code == 0:
        assert result.stdout.splitlines()[-1] == (
            "GPU check passed on gpu-node-1: the GPUs report no error state")
    else:
        assert result.stdout.startswith("GPU check FAILED on gpu-node-1 (profile ")
        assert ("FAIL GPU 5 (GPU-5f2c-5) on gpu-node-1: last XID 79 (DCGM_FI_DEV_XID_ERRORS), "
                "a drain code") in result.stdout
        assert "reset the GPU or reboot (runbook spec-serve-gpu-xid-drain)" in result.stdout


def test_the_rendered_command_fails_on_an_unreachable_exporter(
    tools: Path, tmp_path: Path
) -> None:
    # The chart's own exporter Service, on a new node where it has not started: nothing answers
    # for waitSeconds, then the pod fails naming the URL and the value.
    rendered = _render(tools, tmp_path, {"dcgmExporter": {"enabled": True,
                                                          "gpuCheck": {"waitSeconds": 1}}})
    argv = _kubelet_argv(rendered, tmp_path, {"NODE_NAME": "gpu-node-1", "HOST_IP": "127.0.0.1"})
    assert f"--dcgm={CHART_URL}" in argv
    # Pointed at a closed local port (no network beyond 127.0.0.1 in tests).
    argv = [a.replace(CHART_URL, "http://127.0.0.1:9/metrics") for a in argv]
    result = _run(argv)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the DCGM exporter http://127.0.0.1:9/metrics cannot be read" in result.stdout
    assert "still unreadable after 1 s" in result.stdout
    assert "(dcgmExporter.gpuCheck.waitSeconds)" in result.stdout
    assert "passed" not in result.stdout
