"""The chart's opt-in DCGM exporter (templates/dcgm-exporter.yaml, docs/gpu-health.md).

Off by default (the GPU Operator's exporter is reused); on, a DaemonSet on the GPU nodes runs the
pinned image with the generated counters file, takes no GPU, drops every capability, listens on
the pod's own address, and is scraped as the job the GPU alerts select. Every object is validated
against the Kubernetes 1.30-1.35 schemas and the pinned Prometheus Operator CRD.

SpecServeGpuMissing compares each node's GPUs with the effective profile's gpu.count (its GPUs
per node), as the Ansible path does, unless the value sets its threshold; a CPU stand-in
(gpu.count 0) has no GPU to miss and leaves the alert out. promtool runs the rendered rule.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.monitoring import dcgm
from specserve.monitoring.rules import DCGM_JOB
from tests.helm import k8s_schemas
from tests.helm.conftest import (
    CHART,
    NAMESPACE,
    RELEASE,
    REPO,
    Rendered,
    helm,
    merged,
    template,
)
from tests.helm.test_leaderworkerset import multi_profile

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


# --- SpecServeGpuMissing's GPU count is the profile's ------------------------------------------
def _gpu_missing(rendered: Rendered) -> dict[str, Any] | None:
    rules = [r for g in rendered.one("PrometheusRule")["spec"]["groups"] for r in g["rules"]]
    found = [r for r in rules if r.get("alert") == "SpecServeGpuMissing"]
    assert len(found) <= 1
    return found[0] if found else None


def _four_gpus() -> dict[str, Any]:
    return {"profileOverrides": {"gpu": {"count": 4}, "parallelism": {"tp": 4}}}


def _standin() -> dict[str, Any]:
    profile = yaml.safe_load((REPO / "profiles" / "standin-cpu.yaml").read_text("utf-8"))
    return {"profile": profile}


@pytest.mark.parametrize(
    ("values", "gpus"),
    [
        ({}, 8),  # the default Kimi-K2.5 profile: 8 GPUs
        (_four_gpus(), 4),
        # Two nodes of 8: each node's exporter must see 8, not the 16 of the whole replica.
        ({"profile": multi_profile(), "apiKey": {"existingSecret": "specserve-api-key"}}, 8),
        # A number the user sets wins over the profile's count, either way.
        ({**_four_gpus(), "prometheusRule": {"alerts": {"SpecServeGpuMissing": {
            "thresholds": {"gpus": 2}}}}}, 2),
        ({"prometheusRule": {"alerts": {"SpecServeGpuMissing": {
            "thresholds": {"gpus": 6}}}}}, 6),
    ],
    ids=["kimi-default", "four-gpus", "two-nodes-of-8", "explicit-2-over-4", "explicit-6-over-8"],
)
def test_gpu_missing_compares_with_the_profiles_gpus_per_node(
    tools: Path, tmp_path: Path, values: dict[str, Any], gpus: int
) -> None:
    rule = _gpu_missing(_render(tools, tmp_path, values))
    assert rule is not None
    assert rule["expr"].endswith(f"\n< {gpus}"), rule["expr"]
    assert f"(the profile needs {gpus}; " in rule["annotations"]["description"]


def test_the_cpu_standin_has_no_gpu_to_miss(tools: Path, tmp_path: Path) -> None:
    # gpu.count 0: "fewer than 0 GPUs" can never hold, and the DCGM exporter watches GPU nodes
    # that are not the stand-in's, so the alert is left out, the other GPU alerts kept.
    rendered = _render(tools, tmp_path, _standin())
    assert _gpu_missing(rendered) is None
    alerts = {r.get("alert") for g in rendered.one("PrometheusRule")["spec"]["groups"]
              for r in g["rules"]}
    assert "SpecServeGpuThrottled" in alerts
    # A threshold the user sets still renders it (e.g. to watch the cluster's GPU nodes).
    values = merged(_standin(), {"prometheusRule": {"alerts": {"SpecServeGpuMissing": {
        "thresholds": {"gpus": 8}}}}})
    rule = _gpu_missing(_render(tools, tmp_path, values))
    assert rule is not None and rule["expr"].endswith("\n< 8")


def test_the_schema_takes_null_or_a_count_of_at_least_one(tools: Path, tmp_path: Path) -> None:
    for bad in (0, -1, "eight"):
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump({"prometheusRule": {"alerts": {"SpecServeGpuMissing": {
            "thresholds": {"gpus": bad}}}}}))
        result = template(tools, "--values", str(path))
        assert result.returncode != 0 and "gpus" in result.stderr, (bad, result.stderr)
    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert defaults["prometheusRule"]["alerts"]["SpecServeGpuMissing"]["thresholds"] == {
        "gpus": None, "job": DCGM_JOB}


def test_promtool_a_four_gpu_node_is_whole_at_four_and_short_at_three(
    tools: Path, tmp_path: Path
) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is required (apt-get install prometheus)"
    spec = _render(tools, tmp_path, _four_gpus()).one("PrometheusRule")["spec"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")

    def node(name: str, gpus: int) -> list[dict[str, str]]:
        return [{"series": f'DCGM_FI_DEV_GPU_TEMP{{job="{DCGM_JOB}",instance="{name}:9400",'
                           f'Hostname="{name}",gpu="{i}"}}', "values": "60x20"}
                for i in range(gpus)]

    # Only the node with 3 of the profile's 4 fires (with the stock 8, both would).
    firing = 'ALERTS{alertname="SpecServeGpuMissing",alertstate="firing"}'
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": node("whole", 4) + node("short", 3),
        "promql_expr_test": [{"expr": f"count by (instance) ({firing})", "eval_time": "10m",
                              "exp_samples": [{"labels": '{instance="short:9400"}',
                                               "value": 1}]}],
    }]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    result = subprocess.run([promtool, "test", "rules", "test.yml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
