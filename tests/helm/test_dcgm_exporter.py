"""The chart's opt-in DCGM exporter (templates/dcgm-exporter.yaml, docs/gpu-health.md).

Off by default (the GPU Operator's exporter is reused); on, a DaemonSet on the GPU nodes runs the
pinned image with the generated counters file, takes no GPU, drops every capability, listens on
the pod's own address, and is scraped as the job the GPU alerts select. Every object is validated
against the Kubernetes 1.30-1.35 schemas and the pinned Prometheus Operator CRD.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from specserve.monitoring import dcgm
from specserve.monitoring.rules import DCGM_JOB
from tests.helm import k8s_schemas
from tests.helm.conftest import CHART, NAMESPACE, RELEASE, REPO, Rendered, helm, template

VERSIONS = yaml.safe_load((REPO / "versions.yaml").read_text(encoding="utf-8"))
NAME = f"{RELEASE}-dcgm-exporter"


def _render(tools: Path, tmp_path: Path, values: dict[str, Any]) -> Rendered:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    result = template(tools, "--values", str(path))
    assert result.returncode == 0, result.stderr
    return Rendered(path.name, result.stdout,
                    [d for d in yaml.safe_load_all(result.stdout) if d])  # fmt: skip


def _mine(rendered: Rendered) -> list[dict[str, Any]]:
    return [d for d in rendered.docs if d["metadata"]["name"] == NAME]


def _schema_errors(doc: dict[str, Any]) -> list[str]:
    versions = ("crd",) if k8s_schemas.is_crd(doc) else k8s_schemas.KUBERNETES_VERSIONS
    return [e for v in versions for e in k8s_schemas.errors(doc, v)]


def test_off_by_default(tools: Path, tmp_path: Path) -> None:
    assert _mine(_render(tools, tmp_path, {})) == []


def test_on_it_runs_the_pinned_exporter_on_every_gpu_node(tools: Path, tmp_path: Path) -> None:
    rendered = _render(tools, tmp_path, {"dcgmExporter": {"enabled": True}})
    mine = _mine(rendered)
    assert sorted(d["kind"] for d in mine) == ["ConfigMap", "DaemonSet", "Service",
                                               "ServiceMonitor"]
    for doc in mine:
        assert doc["metadata"]["namespace"] == NAMESPACE
        assert _schema_errors(doc) == [], doc["kind"]

    counters = rendered.one("ConfigMap", NAME)["data"]["specserve-counters.csv"]
    assert counters + "\n" == dcgm.deployed_counters()

    pod = rendered.one("DaemonSet", NAME)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    pin = VERSIONS["upstream_images"]["dcgm_exporter"]
    assert container["image"] == f"{pin['repository']}:{pin['tag']}"
    assert container["args"] == ["--collectors=/etc/specserve-dcgm/specserve-counters.csv",
                                 "--address=:9400"]
    # No GPU requested (it would take one from the server); the runtime shows it all of them.
    assert "nvidia.com/gpu" not in str(container["resources"])
    assert pod["runtimeClassName"] == "nvidia"
    env = {e["name"]: e for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["NO_SETCAP"]["value"] == "1"
    # Least privilege: no host network or port, no capability, no token.
    assert "hostNetwork" not in pod and "hostPort" not in str(container["ports"])
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["automountServiceAccountToken"] is False
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
        pod["tolerations"]
    mount = container["volumeMounts"][0]
    assert mount["mountPath"] == "/etc/specserve-dcgm" and mount["readOnly"] is True

    monitor = rendered.one("ServiceMonitor", NAME)
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["relabelings"][0]["replacement"] == DCGM_JOB
    service = rendered.one("Service", NAME)
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        service["metadata"]["labels"].items()
    assert service["spec"]["selector"] == \
        rendered.one("DaemonSet", NAME)["spec"]["selector"]["matchLabels"]


def test_profiling_adds_only_sys_admin(tools: Path, tmp_path: Path) -> None:
    rendered = _render(tools, tmp_path, {"dcgmExporter": {"enabled": True, "profiling": True}})
    (container,) = rendered.one("DaemonSet", NAME)["spec"]["template"]["spec"]["containers"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"],
                                                             "add": ["SYS_ADMIN"]}
    assert "NO_SETCAP" not in {e["name"] for e in container["env"]}


def test_without_the_operator_the_service_carries_scrape_annotations(
    tools: Path, tmp_path: Path
) -> None:
    rendered = _render(tools, tmp_path, {"dcgmExporter": {"enabled": True},
                                         "serviceMonitor": {"enabled": False}})
    assert "ServiceMonitor" not in {d["kind"] for d in _mine(rendered)}
    annotations = rendered.one("Service", NAME)["metadata"]["annotations"]
    assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/port": "9400",
                           "prometheus.io/path": "/metrics"}


def test_the_schema_refuses_latest_and_unknown_keys(tools: Path, tmp_path: Path) -> None:
    for bad in ({"image": {"repository": "x", "tag": "latest"}}, {"hostNetwork": True}):
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump({"dcgmExporter": {"enabled": True, **bad}}))
        result = template(tools, "--values", str(path))
        assert result.returncode != 0 and "dcgmExporter" in result.stderr, bad
    lint = helm(tools, "lint", str(CHART), "--set", "dcgmExporter.enabled=true")
    assert lint.returncode == 0, lint.stdout + lint.stderr
