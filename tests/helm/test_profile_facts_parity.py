"""The chart derives at render time only what Kubernetes needs (GPU resources, ports, probes, the
log volume, the scrape path); each derivation must equal specserve.profile.facts for the same
profile. Every shipped profile (profiles/*.yaml), every CI values file and a profile that leaves
every defaulted field out is rendered by the real `helm template` and read by the library; a
profile the GPU rule refuses is refused by both with the same message.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.checks.parallelism import check_parallelism
from specserve.profile.endpoints import HEALTH_PATH, LIVENESS_PATH, METRICS_PATH
from specserve.profile.facts import ProfileFacts, facts, load_facts
from specserve.profile.issues import errors
from specserve.profile.model import profile_from_document
from specserve.profile.schema import schema_issues
from tests.helm.conftest import CHART, CI_VALUES, REPO, Rendered, merged, template

PROFILES = sorted((REPO / "profiles").glob("*.yaml"))
STANDIN = REPO / "profiles" / "standin-cpu.yaml"
CHART_VALUES = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
# The chart binds what the library would bind on loopback to every address in the pod
# (_helpers.tpl specserve.profileYaml); nothing else may differ.
POD_HOST = "0.0.0.0"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def _bytes(quantity: str | int) -> int:
    units = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
    text = str(quantity)
    for suffix, mult in units.items():
        if text.endswith(suffix):
            return int(text.removesuffix(suffix)) * mult
    return int(text)


def _defaults_left_out() -> dict[str, Any]:
    """The stand-in profile with every field the chart has its own default for left out."""
    doc = yaml.safe_load(STANDIN.read_text(encoding="utf-8"))
    for key in ("port", "enable_metrics", "host"):
        doc["server"].pop(key)
    for key in ("max_bytes", "backup_count"):
        doc["logging"].pop(key, None)
    doc["parallelism"] = {"tp": 1}
    return doc


def _profile_values(doc: dict[str, Any]) -> dict[str, Any]:
    # The exporter sidecar follows the log file: a profile without one deploys without it (the
    # chart's own rule, not a profile fact).
    has_log = bool((doc.get("logging") or {}).get("file"))
    return {"profile": doc, "exporter": {"enabled": has_log}}


# name -> (chart values, the profile the library reads: a file, a document or None = take the
# chart's effective profile, for CI files that merge profileOverrides over the default).
CASES: dict[str, tuple[dict[str, Any], Path | dict[str, Any] | None]] = {
    **{
        f"profile-{p.stem}": (_profile_values(yaml.safe_load(p.read_text("utf-8"))), p)
        for p in PROFILES
    },
    **{
        f"ci-{v.name.removesuffix('-values.yaml')}": (
            yaml.safe_load(v.read_text(encoding="utf-8")) or {},
            None,
        )
        for v in CI_VALUES
    },
    "defaults-left-out": (_profile_values(_defaults_left_out()), _defaults_left_out()),
}


def _render(tools: Path, tmp_path: Path, values: dict[str, Any]) -> tuple[int, str, Rendered]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    result = template(tools, "--values", str(path))
    docs = [d for d in yaml.safe_load_all(result.stdout) if d] if result.returncode == 0 else []
    return result.returncode, result.stderr, Rendered(path.name, result.stdout, docs)


def _library_facts(source: Path | dict[str, Any]) -> ProfileFacts:
    if isinstance(source, Path):
        return load_facts(source)
    assert not schema_issues(source), schema_issues(source)
    return facts(profile_from_document(source), source)


def _pod_facts(rendered: Rendered) -> ProfileFacts:
    """The library's facts of the profile the pod gets (the chart's ConfigMap)."""
    cm = rendered.one("ConfigMap", "specserve-profile")
    return _library_facts(yaml.safe_load(cm["data"]["profile.yaml"]))


def _server_pod(rendered: Rendered) -> dict[str, Any]:
    """The serving pod's spec: the Deployment's, or for a profile spanning nodes the
    LeaderWorkerSet's leader (rank 0 serves the API; tests/helm/test_leaderworkerset.py)."""
    found = [d for d in rendered.objects("Deployment") if d["metadata"]["name"] == "specserve"]
    if found:
        return found[0]["spec"]["template"]["spec"]
    lws = rendered.one("LeaderWorkerSet")
    return lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]


def _container(rendered: Rendered, name: str) -> dict[str, Any] | None:
    spec = _server_pod(rendered)
    return next((c for c in spec["containers"] if c["name"] == name), None)


def _chart_derivations(rendered: Rendered, values: dict[str, Any]) -> dict[str, Any]:
    """What the chart worked out from the profile, read back from the manifests."""
    pod = _server_pod(rendered)
    sglang = _container(rendered, "sglang")
    assert sglang is not None
    gpu_name = values["server"]["gpuResourceName"]
    ports = {p["name"]: p["containerPort"] for p in sglang["ports"]}
    mounts = {m["name"]: m["mountPath"] for m in sglang["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    limits = sglang["resources"].get("limits", {})
    requests = sglang["resources"].get("requests", {})
    probes = {k: sglang[f"{k}Probe"]["httpGet"] for k in ("startup", "readiness", "liveness")}
    env = {e["name"]: e for e in sglang.get("env", [])}
    exporter = _container(rendered, "exporter")
    # Each Service in front of the server pods forwards its "http" port to the named container
    # port; the headless one (the router's discovery, the Helm test) exposes the server's own.
    server_services = [
        s for s in rendered.objects("Service")
        if s["spec"]["selector"].get("app.kubernetes.io/component") == "server"
    ]
    http = [next(p for p in s["spec"]["ports"] if p["name"] == "http") for s in server_services]
    pods_service = rendered.one("Service", "specserve-pods")
    pods_port = next(p["port"] for p in pods_service["spec"]["ports"] if p["name"] == "http")
    router_args = [
        c["args"]
        for d in rendered.objects("Deployment")
        for c in d["spec"]["template"]["spec"]["containers"]
        if "--service-discovery-port" in c.get("args", [])
    ]
    monitors = rendered.objects("ServiceMonitor") + rendered.objects("PodMonitor")
    sglang_scrapes = [
        e.get("path")
        for m in monitors
        for e in m["spec"].get("endpoints", m["spec"].get("podMetricsEndpoints", []))
        if e.get("port") == "http"
    ]
    test_containers = [c for p in rendered.objects("Pod") for c in p["spec"]["containers"]]
    test_env = {e["name"]: e.get("value") for c in test_containers for e in c.get("env", [])}
    test_args = [a for c in test_containers for a in [*c.get("command", []), *c.get("args", [])]]
    log_volume = volumes.get("logs", {}).get("emptyDir", {}).get("sizeLimit")
    return {
        "gpu_limit": limits.get(gpu_name),
        "gpu_request": requests.get(gpu_name),
        "runtime_class": pod.get("runtimeClassName"),
        "container_port": ports["http"],
        "probe_ports": {p["port"] for p in probes.values()},
        "probe_paths": {k: p["path"] for k, p in probes.items()},
        "service_targets": {p["targetPort"] for p in http},
        "pods_service_port": pods_port,
        "router_ports": {int(a[a.index("--service-discovery-port") + 1]) for a in router_args},
        "log_mount": mounts.get("logs"),
        "exporter_file": None if exporter is None else exporter["args"][
            exporter["args"].index("--file") + 1
        ],
        "log_budget": None if log_volume is None else (
            _bytes(log_volume) - _bytes(values["exporter"]["logVolumeSlack"])
        ),
        "api_key_mount": mounts.get("api-key"),
        "api_key_env": next((n for n, e in env.items() if "valueFrom" in e), None),
        "sglang_scrapes": sglang_scrapes,
        "speculative_env": test_env.get("SPECSERVE_TEST_SPECULATIVE"),
        "test_reads_profile": "--profile=/etc/specserve/profile.yaml" in test_args,
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_chart_derives_what_the_library_does(tools: Path, tmp_path: Path, case: str) -> None:
    chart_values, source = CASES[case]
    values = merged(CHART_VALUES, chart_values)
    code, stderr, rendered = _render(tools, tmp_path, chart_values)
    assert code == 0, f"{case}: the chart refuses a profile the library accepts:\n{stderr}"
    pod = _pod_facts(rendered)
    # The ConfigMap is the library's profile: every fact but the bind address is unchanged.
    if source is not None:
        lib = _library_facts(source)
        expected_host = POD_HOST if lib.server_host in LOOPBACK_HOSTS else lib.server_host
        assert pod.server_host == expected_host
        assert asdict(replace(pod, server_host=lib.server_host, probe_host=lib.probe_host)) == (
            asdict(lib)
        ), case
    assert not errors(check_parallelism(profile_from_document(
        yaml.safe_load(rendered.one("ConfigMap", "specserve-profile")["data"]["profile.yaml"])
    )))  # fmt: skip
    chart = _chart_derivations(rendered, values)
    gpus = pod.gpu_count or None  # a CPU profile asks Kubernetes for no GPU at all
    assert (chart["gpu_limit"], chart["gpu_request"]) == (gpus, gpus), case
    expected_runtime = values["server"]["runtimeClassName"] if pod.gpu_count else None
    assert chart["runtime_class"] == (expected_runtime or None), case
    assert chart["container_port"] == pod.server_port
    assert chart["service_targets"] == {"http"}
    assert chart["pods_service_port"] == pod.server_port
    assert chart["router_ports"] <= {pod.server_port}
    assert chart["probe_ports"] == {"http"}
    assert chart["probe_paths"] == {
        "startup": HEALTH_PATH, "readiness": HEALTH_PATH, "liveness": LIVENESS_PATH,
    }  # fmt: skip
    assert chart["log_mount"] == pod.log_dir
    assert chart["exporter_file"] == (pod.log_file if values["exporter"]["enabled"] else None)
    assert chart["log_budget"] == (pod.log_budget_bytes if pod.log_file else None)
    assert chart["api_key_mount"] == (
        os.path.dirname(pod.api_key_file) if pod.api_key_file else None
    )
    assert chart["api_key_env"] == pod.api_key_env
    scraped = values["serviceMonitor"]["sglangMetrics"] and pod.enable_metrics and (
        values["serviceMonitor"]["enabled"] or values["podMonitor"]["enabled"]
    )
    assert chart["sglang_scrapes"] == ([METRICS_PATH] if scraped else []), case
    # Speculation on or off is not the chart's to derive: the Helm test (`specserve verify`)
    # reads the mounted profile through the library.
    assert chart["test_reads_profile"] and chart["speculative_env"] is None


def _gpu_cases() -> dict[str, dict[str, Any]]:
    llama = yaml.safe_load((REPO / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml").read_text())
    kimi = yaml.safe_load((REPO / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml").read_text())
    cpu = yaml.safe_load(STANDIN.read_text(encoding="utf-8"))
    return {
        "cpu-tp2": merged(cpu, {"parallelism": {"tp": 2}}),
        "one-gpu-asks-two": merged(llama, {"gpu": {"count": 2}}),
        "kimi-dp2": merged(kimi, {"parallelism": {"dp": 2}}),
        "kimi-dp-attention-tp4": merged(
            kimi, {"parallelism": {"tp": 4, "dp": 2, "enable_dp_attention": True}}
        ),
        # Accepted by both: DP attention keeps the DP ranks inside the TP group.
        "kimi-dp-attention": merged(
            kimi, {"parallelism": {"dp": 2, "enable_dp_attention": True}}
        ),
    }


@pytest.mark.parametrize("case", sorted(_gpu_cases()))
def test_gpu_rule_refuses_with_one_message(tools: Path, tmp_path: Path, case: str) -> None:
    doc = _gpu_cases()[case]
    assert not schema_issues(doc)
    refusals = errors(check_parallelism(profile_from_document(doc)))
    code, stderr, _ = _render(tools, tmp_path, _profile_values(doc))
    if not refusals:
        assert code == 0, f"{case}: the chart refuses what `specserve check` accepts:\n{stderr}"
        return
    assert code != 0, f"{case}: the chart renders what `specserve check` refuses"
    chart_message = re.search(r"execution error at \([^)]*\): (.*)", stderr)
    assert chart_message is not None, stderr
    assert chart_message.group(1).strip() == (
        f"profile.{refusals[0].field}: {refusals[0].problem}. Fix: {refusals[0].fix}"
    ), stderr
