"""The opt-in autoscaler of the server replicas (templates/autoscaling.yaml, README "Autoscaling").

Every render is validated against the pinned schemas: the KEDA ScaledObject against the CRD of
versions.yaml crd_schemas.keda (crd-schemas/), its trigger's keys against the names KEDA's
prometheus scaler reads at that tag, the HorizontalPodAutoscaler against autoscaling/v2 of
Kubernetes 1.30-1.35. The signal is the recording rules the chart's own PrometheusRule records
(the load in replicas, plus the workers the router took out of rotation at the target: the
query KEDA runs and the rule the README gives prometheus-adapter are the same formula,
specserve.monitoring.rules.autoscaler_metric / autoscaler_adapter_query, which
tests/monitoring/test_autoscaling_sim.py evaluates with promtool), and scale-down is held to the
drain.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.monitoring.rules import (
    FLEET_REPLICA_LOAD,
    FLEET_WORKERS_OUT,
    RECORDING_WINDOW,
    autoscaler_adapter_query,
    autoscaler_metric,
)
from tests.helm import k8s_schemas
from tests.helm.conftest import CHART, NAMESPACE, REPO, Rendered, template
from tests.helm.test_leaderworkerset import multi_profile

VERSIONS = yaml.safe_load((REPO / "versions.yaml").read_text(encoding="utf-8"))
KEDA_API = "keda.sh/v1alpha1"
RECORD = f"{FLEET_REPLICA_LOAD}{RECORDING_WINDOW}"
OUT_RECORD = f"{FLEET_WORKERS_OUT}{RECORDING_WINDOW}"
SCALER_KEYS = set(json.loads(
    (REPO / "tests/helm/crd-schemas/keda-prometheus-scaler-metadata.json").read_text("utf-8")))
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))["autoscaling"]


def _render(tools: Path, tmp_path: Path, values: dict[str, Any]) -> tuple[int, str, Rendered]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    result = template(tools, "--values", str(path))
    docs = [d for d in yaml.safe_load_all(result.stdout) if d] if result.returncode == 0 else []
    return result.returncode, result.stderr, Rendered(path.name, result.stdout, docs)


def _on(engine: str, **extra: Any) -> dict[str, Any]:
    return {"autoscaling": {"enabled": True, "engine": engine, **extra}}


def _schema_errors(doc: dict[str, Any]) -> list[str]:
    versions = ("crd",) if k8s_schemas.is_crd(doc) else k8s_schemas.KUBERNETES_VERSIONS
    return [e for v in versions for e in k8s_schemas.errors(doc, v)]


def _recorded(rendered: Rendered) -> set[str]:
    rule = rendered.one("PrometheusRule")
    return {r["record"] for g in rule["spec"]["groups"] for r in g["rules"] if "record" in r}


def test_the_keda_pin_is_the_one_in_versions_yaml() -> None:
    pin = VERSIONS["crd_schemas"]["keda"]
    source = (REPO / "tests/helm/crd-schemas/SOURCE.md").read_text(encoding="utf-8")
    assert f"**{pin['tag']}** (commit\n{pin['commit']})" in source
    assert pin["api_version"] == KEDA_API
    text = (CHART / "templates" / "autoscaling.yaml").read_text(encoding="utf-8")
    assert f"apiVersion: {KEDA_API}" in text
    assert "apiVersion: autoscaling/v2" in text


def test_only_the_autoscaling_ci_values_hand_the_count_over(
    rendered: dict[str, Rendered],
) -> None:
    for name, r in rendered.items():
        scaled = bool(r.objects("ScaledObject") or r.objects("HorizontalPodAutoscaler"))
        assert scaled == (name == "autoscaling"), name
        server = r.one("Deployment", "specserve")
        assert ("replicas" in server["spec"]) != scaled, name
    # ci/autoscaling-values.yaml: 2-6 replicas behind the router, a budget although it starts
    # below 2 replicas' worth of values (replicaCount 1), and the record its trigger reads.
    r = rendered["autoscaling"]
    so = r.one("ScaledObject")
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (2, 6)
    assert r.one("PodDisruptionBudget", "specserve")["spec"]["maxUnavailable"] == 1
    assert {RECORD, OUT_RECORD} <= _recorded(r)
    assert r.one("Deployment", "specserve-router")


def test_keda_scales_the_deployment_on_the_recorded_load(tools: Path, tmp_path: Path) -> None:
    code, stderr, r = _render(tools, tmp_path, _on("keda"))
    assert code == 0, stderr
    so = r.one("ScaledObject")
    assert not _schema_errors(so), _schema_errors(so)
    deployment = r.one("Deployment", "specserve")
    assert "replicas" not in deployment["spec"]  # the autoscaler owns the count
    assert so["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                           "name": "specserve"}
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (
        DEFAULTS["minReplicas"], DEFAULTS["maxReplicas"])
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    meta = trigger["metadata"]
    assert set(meta) <= SCALER_KEYS, set(meta) - SCALER_KEYS
    assert all(isinstance(v, str) for v in meta.values())
    # The load in replicas plus the workers out of rotation at the threshold: desired =
    # ceil(load / threshold) + out.
    selector = f'namespace="{NAMESPACE}"'
    assert meta["query"] == autoscaler_metric(selector, DEFAULTS["targetUtilisation"])
    assert meta["query"] == (f"max({RECORD}{{{selector}}}) + (max({OUT_RECORD}{{{selector}}}) "
                             "or vector(0)) * 0.8")
    assert float(meta["threshold"]) == DEFAULTS["targetUtilisation"]
    # An empty answer is an error that holds the count, never "no load".
    assert meta["ignoreNullValues"] == "false"
    # The records it reads are ones the chart's own PrometheusRule records.
    assert {RECORD, OUT_RECORD} <= _recorded(r)
    assert so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] == (
        DEFAULTS["behavior"])


def test_hpa_reads_the_adapters_external_metric(tools: Path, tmp_path: Path) -> None:
    code, stderr, r = _render(tools, tmp_path, _on("hpa", targetUtilisation=0.75,
                                                   minReplicas=2, maxReplicas=6))
    assert code == 0, stderr
    hpa = r.one("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert not _schema_errors(hpa), _schema_errors(hpa)
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"]["name"] == DEFAULTS["hpa"]["metricName"]
    # AverageValue: desired = ceil(load / 0.75) whatever the current count.
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "750m"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6)
    assert hpa["spec"]["behavior"] == DEFAULTS["behavior"]
    assert not r.objects("ScaledObject")
    # The adapter's query it needs, at this target, is in the rendered HPA's comment; the
    # README's rule is the same at the default target.
    assert f"# {autoscaler_adapter_query('0.75')}\n" in r.text
    assert OUT_RECORD in _recorded(r)


def test_the_readme_gives_prometheus_adapter_the_same_metric() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Autoscaling", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    (rule,) = yaml.safe_load(block)["externalRules"]
    assert rule["seriesQuery"] == RECORD
    assert rule["name"]["as"] == DEFAULTS["hpa"]["metricName"]
    assert rule["metricsQuery"] == autoscaler_adapter_query(DEFAULTS["targetUtilisation"])
    assert f"`{OUT_RECORD}`" in section


def test_a_different_target_changes_the_query_with_the_threshold(
    tools: Path, tmp_path: Path
) -> None:
    code, stderr, r = _render(tools, tmp_path, _on("keda", targetUtilisation=0.65))
    assert code == 0, stderr
    so = r.one("ScaledObject")
    assert not _schema_errors(so), _schema_errors(so)
    meta = so["spec"]["triggers"][0]["metadata"]
    assert meta["threshold"] == "0.65"
    assert meta["query"] == autoscaler_metric(f'namespace="{NAMESPACE}"', "0.65")


def test_the_budget_and_rolling_update_follow_max_replicas(tools: Path, tmp_path: Path) -> None:
    code, stderr, r = _render(tools, tmp_path, _on("keda"))
    assert code == 0, stderr
    pdb = r.one("PodDisruptionBudget", "specserve")
    assert pdb["spec"]["maxUnavailable"] == 1
    strategy = r.one("Deployment", "specserve")["spec"]["strategy"]
    assert strategy == {"type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    affinity = r.one("Deployment", "specserve")["spec"]["template"]["spec"]["affinity"]
    assert "podAntiAffinity" in affinity


def test_a_multinode_profile_scales_leaderworkerset_groups(tools: Path, tmp_path: Path) -> None:
    values = {"profile": multi_profile(), "apiKey": {"existingSecret": "specserve-api-key"},
              **_on("hpa")}
    code, stderr, r = _render(tools, tmp_path, values)
    assert code == 0, stderr
    hpa = r.one("HorizontalPodAutoscaler")
    lws = r.one("LeaderWorkerSet")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": lws["apiVersion"],
                                            "kind": "LeaderWorkerSet",
                                            "name": lws["metadata"]["name"]}
    assert "replicas" not in lws["spec"]
    assert not k8s_schemas.errors(lws, "crd")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"behavior": {**DEFAULTS["behavior"], "scaleDown": {
            "stabilizationWindowSeconds": 900,
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}},
         "shorter than a replica's drain"),
        ({"minReplicas": 5, "maxReplicas": 2}, "is above autoscaling.maxReplicas"),
    ],
)
def test_unsafe_settings_are_refused(
    tools: Path, tmp_path: Path, extra: dict[str, Any], message: str
) -> None:
    code, stderr, _ = _render(tools, tmp_path, _on("keda", **extra))
    assert code != 0
    assert message in stderr


def test_the_drain_bound_is_the_servers_own(tools: Path, tmp_path: Path) -> None:
    # 15 s preStop + 300 s grace = 315 s: 315 passes, 314 does not.
    ok = _on("keda", behavior={**DEFAULTS["behavior"], "scaleDown": {
        "stabilizationWindowSeconds": 900,
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 315}]}})
    assert _render(tools, tmp_path, ok)[0] == 0
    ok["autoscaling"]["behavior"]["scaleDown"]["policies"][0]["periodSeconds"] = 314
    code, stderr, _ = _render(tools, tmp_path, ok)
    assert code != 0 and "315s" in stderr
