"""What each template must contain, helm-unittest style (as kube-prometheus-stack tests its chart):
one case per behaviour, naming the template, the values, and the fields that matter.

These replace the whole-manifest golden files of every CI values file (one golden of the
default render stays, tests/helm/golden/kimi-default.yaml): a change to a field listed here is a
decision to review; a change anywhere else needs no golden rewrite.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.conftest import CHART, template

VALUES = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
IMAGE = f"{VALUES['image']['repository']}:{VALUES['image']['tag']}"
EXPORTER_IMAGE = f"{VALUES['exporterImage']['repository']}:{VALUES['exporterImage']['tag']}"
ALERT = "SpecDecodeAcceptLengthLow"
class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_MISSING = _Absent()
# ["quoted.key"] | [0] | [field=value] | plain key
_TOKEN = re.compile(r'\["([^"]+)"\]|\[(\d+)\]|\[([^\]=]+=[^\]]*)\]|([^.\[\]]+)')


def resolve(node: Any, path: str) -> Any:
    """`a.b[0].c[name=sglang].d` in a rendered document; _MISSING where it is absent.
    A key may contain dots or slashes when quoted: metadata.annotations["checksum/profile"]."""
    for quoted, index, select, key in _TOKEN.findall(path):
        if select:
            field, _, want = select.partition("=")
            found = [i for i in node if isinstance(i, dict) and str(i.get(field)) == want]
            if len(found) != 1:
                return _MISSING
            node = found[0]
        elif index:
            if not isinstance(node, list) or int(index) >= len(node):
                return _MISSING
            node = node[int(index)]
        else:
            name = quoted or key
            if not isinstance(node, dict) or name not in node:
                return _MISSING
            node = node[name]
    return node


@dataclass(frozen=True)
class Equal:
    path: str
    value: Any

    def check(self, doc: dict[str, Any]) -> str | None:
        got = resolve(doc, self.path)
        return None if got == self.value else f"{self.path}: expected {self.value!r}, got {got!r}"


@dataclass(frozen=True)
class Contains:
    path: str
    item: Any

    def check(self, doc: dict[str, Any]) -> str | None:
        got = resolve(doc, self.path)
        ok = got is not _MISSING and self.item in got
        return None if ok else f"{self.path}: {got!r} does not contain {self.item!r}"


@dataclass(frozen=True)
class Absent:
    path: str

    def check(self, doc: dict[str, Any]) -> str | None:
        got = resolve(doc, self.path)
        return None if got is _MISSING else f"{self.path}: expected absent, got {got!r}"


@dataclass(frozen=True)
class Case:
    it: str
    template: str
    doc: str  # "Kind/name" of the document the assertions read
    asserts: tuple[Equal | Contains | Absent, ...]
    values: str | None = None  # a charts/specserve/ci file, by its short name
    sets: tuple[str, ...] = ()


@functools.cache
def _tools() -> Path:
    from tests.helm.conftest import _install_tools

    return _install_tools()


@functools.cache
def render(template_name: str, values: str | None, sets: tuple[str, ...]) -> list[dict[str, Any]]:
    args = ["--show-only", f"templates/{template_name}"]
    if values:
        args += ["--values", str(CHART / "ci" / f"{values}-values.yaml")]
    for item in sets:
        args += ["--set", item]
    result = template(_tools(), *args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def document(case: Case) -> dict[str, Any] | None:
    kind, _, name = case.doc.partition("/")
    found = [d for d in render(case.template, case.values, case.sets)
             if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) <= 1, f"{case.doc}: {len(found)} documents"
    return found[0] if found else None


SGLANG = "spec.template.spec.containers[name=sglang]"
EXPORTER = "spec.template.spec.containers[name=exporter]"
POD = "spec.template.spec"
ROUTER = "spec.template.spec.containers[name=router]"
DEPLOY = ("deployment.yaml", "Deployment/specserve")

# fmt: off
CASES: list[Case] = [
    Case("runs the pinned SGLang image with the profile it mounts", *DEPLOY, (
        Equal(f"{SGLANG}.image", IMAGE),
        Equal(f"{SGLANG}.env[name=SPECSERVE_PROFILE].value", "/etc/specserve/profile.yaml"),
        Equal(f"{SGLANG}.ports[name=http].containerPort", 8000),
        Absent(f"{SGLANG}.command"),  # the image's entrypoint is the launcher
        Equal(f"{SGLANG}.volumeMounts[name=profile].readOnly", True),
        Equal(f"{SGLANG}.volumeMounts[name=model].mountPath", "/models"),
        Equal(f"{SGLANG}.volumeMounts[name=model].readOnly", True),
        Equal(f"{SGLANG}.volumeMounts[name=dshm].mountPath", "/dev/shm"),
        Equal(f"{POD}.volumes[name=profile].configMap.name", "specserve-profile"),
        Equal(f"{POD}.volumes[name=api-key].secret.secretName", "specserve-api-key"),
        Equal(f"{POD}.volumes[name=api-key].secret.defaultMode", 0o440),
        Equal(f"{POD}.volumes[name=model].persistentVolumeClaim.claimName", "specserve-models"),
        Equal(f"{POD}.volumes[name=model].persistentVolumeClaim.readOnly", True),
    )),
    Case("asks for the node's 8 GPUs and its memory", *DEPLOY, (
        Equal(f"{SGLANG}.resources.limits", {"memory": "512Gi", "nvidia.com/gpu": 8}),
        Equal(f"{SGLANG}.resources.requests",
              {"cpu": "16", "memory": "256Gi", "nvidia.com/gpu": 8}),
        Equal(f"{POD}.runtimeClassName", "nvidia"),
        Contains(f"{POD}.tolerations",
                 {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}),
    )),
    Case("asks for one GPU for the small model", *DEPLOY, (
        Equal(f'{SGLANG}.resources.limits["nvidia.com/gpu"]', 1),
        Equal(f'{SGLANG}.resources.requests["nvidia.com/gpu"]', 1),
    ), values="small-model"),
    Case("runs SGLang as the image's own user, nothing more", *DEPLOY, (
        Equal(f"{POD}.securityContext", {
            "fsGroup": 10001, "runAsGroup": 10001, "runAsNonRoot": True, "runAsUser": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        }),
        Equal(f"{SGLANG}.securityContext", {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "privileged": False, "readOnlyRootFilesystem": False, "runAsNonRoot": True,
        }),
        Equal(f"{POD}.automountServiceAccountToken", False),
        Equal(f"{POD}.enableServiceLinks", False),
        # The one checkov exception: SGLang JIT-compiles into its home and /tmp.
        Contains('metadata.annotations["checkov.io/skip1"]', "CKV_K8S_22="),
        Absent('metadata.annotations["checkov.io/skip2"]'),
    )),
    Case("labels the server pods so Services, monitors and anti-affinity select them", *DEPLOY, (
        Equal("spec.selector.matchLabels", {
            "app.kubernetes.io/name": "specserve", "app.kubernetes.io/instance": "specserve",
            "app.kubernetes.io/component": "server",
        }),
        Equal('spec.template.metadata.labels["app.kubernetes.io/component"]', "server"),
        Equal('spec.template.metadata.labels["helm.sh/chart"]', "specserve-0.1.0"),
        Equal('spec.template.metadata.annotations["kubectl.kubernetes.io/default-container"]',
              "sglang"),
    )),
    Case("runs the exporter sidecar read-only on the shared log volume", *DEPLOY, (
        Equal(f"{EXPORTER}.image", EXPORTER_IMAGE),
        Equal(f"{EXPORTER}.args[4]", "--profile"),
        Equal(f"{EXPORTER}.args[5]", "/etc/specserve/profile.yaml"),
        # The baseline's like-for-like check knows the server's image.
        Equal(f"{EXPORTER}.args[6]", "--server-image"),
        Equal(f"{EXPORTER}.args[7]", IMAGE),
        Contains(f"{EXPORTER}.args", "--listen-address"),
        Contains(f"{EXPORTER}.args", "0.0.0.0:9433"),
        Equal(f"{EXPORTER}.ports[name=metrics].containerPort", 9433),
        Equal(f"{EXPORTER}.readinessProbe.httpGet", {"path": "/healthz", "port": "metrics"}),
        Equal(f"{EXPORTER}.livenessProbe.httpGet", {"path": "/healthz", "port": "metrics"}),
        Equal(f"{EXPORTER}.volumeMounts[name=logs].readOnly", True),
        Equal(f"{EXPORTER}.securityContext.runAsUser", 10001),
        Equal(f"{EXPORTER}.securityContext.readOnlyRootFilesystem", True),
        Equal(f"{EXPORTER}.resources", {"limits": {"memory": "256Mi"},
                                        "requests": {"cpu": "100m", "memory": "128Mi"}}),
    )),
    Case("drops the exporter sidecar with monitoring off", *DEPLOY, (
        Absent(EXPORTER),
        Absent(f"{POD}.volumes[name=logs].emptyDir.medium"),
    ), values="monitoring-off"),
    Case("takes the port, log budget and probes from the small profile and its values", *DEPLOY, (
        Equal(f"{SGLANG}.ports[name=http].containerPort", 30000),  # the profile's server.port
        # (backup_count 3 + the live file) x 50 MiB + 64 MiB slack
        Equal(f"{POD}.volumes[name=logs].emptyDir.sizeLimit", 4 * 52428800 + 64 * 1048576),
        Equal(f"{POD}.volumes[name=dshm].emptyDir.sizeLimit", "8Gi"),
        Equal(f"{POD}.volumes[name=model].persistentVolumeClaim.claimName", "llama-models"),
        Equal(f"{SGLANG}.startupProbe.initialDelaySeconds", 30),
        Equal(f"{SGLANG}.startupProbe.failureThreshold", 60),
        Equal(f"{SGLANG}.readinessProbe.periodSeconds", 15),
        Equal(f"{SGLANG}.readinessProbe.timeoutSeconds", 30),
        # No api_key in this profile: no Secret mounted.
        Absent(f"{SGLANG}.volumeMounts[name=api-key]"),
        Absent(f"{POD}.volumes[name=api-key]"),
    ), values="small-model"),
    Case("mounts the operator's API-key Secret under the key it names", *DEPLOY, (
        Equal(f"{POD}.volumes[name=api-key].secret.secretName", "kimi-api-key"),
        Equal(f"{POD}.volumes[name=api-key].secret.items", [{"key": "key", "path": "api-key"}]),
        Equal(f"{POD}.volumes[name=model].persistentVolumeClaim.claimName", "kimi-k2-5-weights"),
    ), values="existing-pvc"),
    Case("schedules on the labelled nodes of a host-path cache", *DEPLOY, (
        Equal(f"{POD}.nodeSelector", {"specserve.io/model-cache": "kimi-k2.5"}),
        Equal(f"{POD}.volumes[name=model].hostPath",
              {"path": "/mnt/nvme/models", "type": "Directory"}),
        Absent(f"{POD}.volumes[name=model].persistentVolumeClaim"),
    ), values="hostpath-cache"),
    Case("waits for the download Job's marker as the unprivileged exporter image", *DEPLOY, (
        Equal(f"{POD}.initContainers[name=wait-for-weights].image", EXPORTER_IMAGE),
        Equal(f"{POD}.initContainers[name=wait-for-weights].securityContext.runAsUser", 10001),
        Equal(f"{POD}.initContainers[name=wait-for-weights]"
              ".securityContext.readOnlyRootFilesystem", True),
        Equal(f"{POD}.volumes[name=model].persistentVolumeClaim.claimName", "specserve-models"),
    ), values="download-job"),
    Case("keeps the downloaded weights' PVC past the release", "pvc-models.yaml",
         "PersistentVolumeClaim/specserve-models", (
        Equal("spec.accessModes", ["ReadWriteOnce"]),
        Equal("spec.storageClassName", "fast-nvme"),
        Equal("spec.resources.requests.storage", "1500Gi"),
        Equal('metadata.annotations["helm.sh/resource-policy"]', "keep"),
    ), values="download-job"),
    Case("spreads the replicas over nodes and scrapes them with a PodMonitor", *DEPLOY, (
        Equal("spec.replicas", 3),
        Equal(f"{POD}.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
              ".topologyKey", "kubernetes.io/hostname"),
    ), values="replicas-router"),
    Case("scrapes every replica's exporter and SGLang", "podmonitor.yaml", "PodMonitor/specserve", (
        Equal("metadata.labels.release", "kube-prometheus-stack"),
        Equal("spec.podMetricsEndpoints[port=metrics].relabelings[0].replacement",
              "specserve-exporter"),
        Equal("spec.podMetricsEndpoints[port=http].relabelings[0].replacement",
              "specserve-sglang"),
        Equal("spec.podMetricsEndpoints[port=http].path", "/metrics"),
        Equal('spec.selector.matchLabels["app.kubernetes.io/component"]', "server"),
    ), values="replicas-router"),
    Case("runs the router unprivileged with health probes", "router.yaml",
         "Deployment/specserve-router", (
        Equal("spec.replicas", 2),
        Equal(f"{POD}.serviceAccountName", "specserve-router"),
        Equal(f"{POD}.containers[name=router].readinessProbe.httpGet.path", "/readiness"),
        Equal(f"{POD}.containers[name=router].livenessProbe.httpGet.path", "/liveness"),
        # The smg image's own user (its Dockerfile: useradd --uid 65532 smg).
        Equal(f"{POD}.containers[name=router].securityContext.runAsUser", 65532),
        Equal(f"{POD}.securityContext.fsGroup", 65532),
        Equal(f"{POD}.containers[name=router].securityContext.readOnlyRootFilesystem", True),
        Contains(f"{POD}.containers[name=router].args", "--prometheus-port"),
    ), values="replicas-router"),
    Case("discovers the release's ready server pods through the Kubernetes API", "router.yaml",
         "Deployment/specserve-router", (
        Equal(f"{ROUTER}.args", [
            "--host", "0.0.0.0", "--port", "30000", "--policy", "cache_aware",
            "--service-discovery", "--service-discovery-namespace", "inference",
            # The server container's port (the profile's server.port) on each discovered pod.
            "--service-discovery-port", "8000",
            # Exactly the server Deployment's pod selector: no router pod, no other release.
            "--selector", "app.kubernetes.io/component=server",
            "app.kubernetes.io/instance=specserve", "app.kubernetes.io/name=specserve",
            # A generating health check must outlast SGLang's own 20 s (the router's default 5 s
            # would drop a busy, healthy worker).
            "--health-check-endpoint", "/health_generate", "--health-check-timeout-secs", "30",
            "--health-check-interval-secs", "60", "--health-failure-threshold", "3",
            # smg's overload protection and warm-up defaults, rendered whole so the values'
            # comments stay what runs (tests/helm/test_router_real.py checks they are smg's).
            "--worker-overload-waiting-requests", "8", "--worker-overload-token-usage", "0.8",
            "--worker-warmup-secs", "60", "--worker-warmup-share", "0.25",
            # Running requests may finish after SIGTERM for as long as the server's own drain.
            "--shutdown-grace-period-secs", "300",
            "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000",
        ]),
        Equal(f"{ROUTER}.ports[name=metrics].containerPort", 29000),
        Equal(f"{ROUTER}.lifecycle.preStop", {"sleep": {"seconds": 10}}),
        Equal(f"{POD}.terminationGracePeriodSeconds", 10 + 300 + 10),
        Equal(f"{POD}.automountServiceAccountToken", True),
    ), values="replicas-router"),
    Case("rolls the routers surge-first: a new one Ready before an old one stops", "router.yaml",
         "Deployment/specserve-router", (
        Equal("spec.strategy", {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
        Equal(f"{ROUTER}.readinessProbe.httpGet", {"path": "/readiness", "port": "http"}),
    ), values="replicas-router"),
    Case("rolls a single router surge-first too (never none Ready)", "router.yaml",
         "Deployment/specserve-router", (
        Equal("spec.replicas", 1),
        Equal("spec.strategy", {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
    ), sets=("router.enabled=true",)),
    Case("switches overload protection off when asked", "router.yaml",
         "Deployment/specserve-router", (
        Contains(f"{ROUTER}.args", "--disable-worker-overload-protection"),
    ), sets=("router.enabled=true", "router.overloadProtection.enabled=false")),
    Case("sheds with 503 only when asked", "router.yaml", "Deployment/specserve-router", (
        Contains(f"{ROUTER}.args", "--worker-overload-shed"),
        Contains(f"{ROUTER}.args", "--worker-overload-waiting-requests"),
    ), sets=("router.enabled=true", "router.overloadProtection.shed=true")),
    Case("grants the router only what its discovery calls: list and watch pods, one namespace",
         "router.yaml", "Role/specserve-router", (
        Equal("rules", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]),
        Equal("metadata.namespace", "inference"),
    ), values="replicas-router"),
    Case("binds that Role to the router's ServiceAccount only", "router.yaml",
         "RoleBinding/specserve-router", (
        Equal("roleRef", {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                          "name": "specserve-router"}),
        Equal("subjects", [{"kind": "ServiceAccount", "name": "specserve-router",
                            "namespace": "inference"}]),
    ), values="replicas-router"),
    Case("takes the router's health check from its values", "router.yaml",
         "Deployment/specserve-router", (
        Contains(f"{ROUTER}.args", "/health"),
        Contains(f"{ROUTER}.args", "45"),
        Contains(f"{ROUTER}.args", "--max-concurrent-requests"),
    ), sets=("router.enabled=true", "router.healthCheck.endpoint=/health",
             "router.healthCheck.timeoutSeconds=45",
             "router.extraArgs={--max-concurrent-requests}")),
    Case("replaces several replicas one node at a time (no surge: GPU nodes are full)", *DEPLOY, (
        Equal("spec.strategy", {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}),
    ), values="replicas-router"),
    Case("rolls two replicas one at a time too", *DEPLOY, (
        Equal("spec.strategy", {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}),
    ), sets=("replicaCount=2", "model.storage=existingClaim")),
    Case("recreates a single replica (its GPUs freed before the new pod starts)", *DEPLOY, (
        Equal("spec.strategy", {"type": "Recreate"}),
        Equal("spec.replicas", 1),
    )),
    Case("keeps an explicit strategy as written", *DEPLOY, (
        Equal("spec.strategy", {"type": "Recreate"}),
    ), sets=("replicaCount=3", "server.strategy.type=Recreate")),
    Case("lets a drain take one server pod at a time", "poddisruptionbudget.yaml",
         "PodDisruptionBudget/specserve", (
        Equal("spec.maxUnavailable", 1),
        Equal("spec.selector.matchLabels", {
            "app.kubernetes.io/name": "specserve", "app.kubernetes.io/instance": "specserve",
            "app.kubernetes.io/component": "server",
        }),
        Equal("spec.unhealthyPodEvictionPolicy", "AlwaysAllow"),
        Absent("spec.minAvailable"),
    ), values="replicas-router"),
    Case("keeps the other router pods routing through a drain", "poddisruptionbudget.yaml",
         "PodDisruptionBudget/specserve-router", (
        Equal("spec.maxUnavailable", 1),
        Equal("spec.selector.matchLabels", {
            "app.kubernetes.io/name": "specserve", "app.kubernetes.io/instance": "specserve",
            "app.kubernetes.io/component": "router",
        }),
        # A router with no healthy worker is not Ready and routes nothing: always evictable.
        Equal("spec.unhealthyPodEvictionPolicy", "AlwaysAllow"),
        Absent("spec.minAvailable"),
    ), values="replicas-router"),
    Case("takes the router budget from its own values", "poddisruptionbudget.yaml",
         "PodDisruptionBudget/specserve-router", (
        Equal("spec.maxUnavailable", "50%"),
    ), sets=("router.enabled=true", "router.replicaCount=4",
             "router.podDisruptionBudget.maxUnavailable=50%")),
    Case("scrapes the router's metrics port as the router job", "servicemonitor.yaml",
         "ServiceMonitor/specserve-router", (
        Equal("spec.endpoints", [{
            "port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s",
            "relabelings": [{"action": "replace", "targetLabel": "job",
                             "replacement": "specserve-router"}],
        }]),
        Equal('spec.selector.matchLabels["app.kubernetes.io/component"]', "router"),
    ), sets=("router.enabled=true",)),
    Case("scrapes the router pods with a PodMonitor too", "podmonitor.yaml",
         "PodMonitor/specserve-router", (
        Equal("spec.podMetricsEndpoints[port=metrics].path", "/metrics"),
        Equal("spec.podMetricsEndpoints[port=metrics].relabelings[0].replacement",
              "specserve-router"),
        Equal('spec.selector.matchLabels["app.kubernetes.io/component"]', "router"),
        Equal("metadata.labels.release", "kube-prometheus-stack"),
    ), values="replicas-router"),
    Case("exposes the router's API and metrics", "router.yaml", "Service/specserve-router", (
        Equal("spec.ports[name=http].port", 30000),
        Equal("spec.ports[name=metrics].port", 29000),
    ), values="replicas-router"),
    Case("drops the metrics port with monitoring off", "service.yaml", "Service/specserve", (
        Absent("spec.ports[name=metrics]"),
        Equal("spec.ports[name=http].port", 8000),
    ), values="monitoring-off"),
    Case("serves the API and the exporter's metrics on the ClusterIP Service",
         "service.yaml", "Service/specserve", (
        Equal("spec.type", "ClusterIP"),
        Equal("spec.ports[name=http].port", 8000),
        Equal("spec.ports[name=http].targetPort", "http"),
        Equal("spec.ports[name=metrics].port", 9433),
        Equal('spec.selector["app.kubernetes.io/component"]', "server"),
        Equal('metadata.labels["specserve.io/service"]', "api"),
    )),
    Case("gives every server pod a DNS record for the Helm test", "service.yaml",
         "Service/specserve-pods", (
        Equal("spec.clusterIP", "None"),
        Equal('spec.selector["app.kubernetes.io/component"]', "server"),
        Equal('metadata.labels["specserve.io/service"]', "pods"),
    )),
    Case("gives the pods no API token", "serviceaccount.yaml", "ServiceAccount/specserve", (
        Equal("automountServiceAccountToken", False),
    )),
    Case("scrapes the exporter and SGLang as the jobs the alerts expect", "servicemonitor.yaml",
         "ServiceMonitor/specserve", (
        Equal("spec.endpoints[port=metrics].relabelings[0].replacement", "specserve-exporter"),
        Equal("spec.endpoints[port=http].relabelings[0].replacement", "specserve-sglang"),
        Equal("spec.endpoints[port=http].path", "/metrics"),
        Equal('spec.selector.matchLabels["specserve.io/service"]', "api"),
        Equal("spec.namespaceSelector.matchNames", ["inference"]),
    )),
    Case("renders every alert with its values switches", "prometheusrule.yaml",
         "PrometheusRule/specserve-specserve", (
        Equal(f"spec.groups[name=specserve.alerts].rules[alert={ALERT}].for",
              VALUES["prometheusRule"]["alerts"][ALERT]["for"]),
        Equal(f"spec.groups[name=specserve.alerts].rules[alert={ALERT}].labels.severity",
              "warning"),
        Contains(f"spec.groups[name=specserve.alerts].rules[alert={ALERT}].annotations"
                 ".runbook_url", "/spec-decode-accept-length-low.md"),
        Equal("metadata.labels.release", _MISSING),
    )),
    Case("drops one alert its switch disables, and takes for/threshold/labels from values",
         "prometheusrule.yaml", "PrometheusRule/specserve-specserve", (
        Absent("spec.groups[name=specserve.alerts].rules[alert=SpecDecodeAcceptLengthLow]"),
        Equal("spec.groups[name=specserve.alerts].rules[alert=SpecDecodeDraftsRejected].for",
              "9m"),
        Equal("metadata.labels.release", "prom"),
    ), sets=(f"prometheusRule.alerts.{ALERT}.disabled=true",
             "prometheusRule.alerts.SpecDecodeDraftsRejected.for=9m",
             "prometheusRule.additionalLabels.release=prom")),
    Case("ships the dashboard for Grafana's sidecar", "configmap-grafana.yaml",
         "ConfigMap/specserve-dashboard", (
        Equal("metadata.labels.grafana_dashboard", "1"),
        Contains('data["specserve.json"]', '"uid": "specserve-overview"'),
    )),
]
# fmt: on


def _ids(case: Case) -> str:
    return f"{case.template}: {case.it}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_template(case: Case) -> None:
    doc = document(case)
    assert doc is not None, f"{case.template} rendered no {case.doc}"
    problems = [p for p in (a.check(doc) for a in case.asserts) if p]
    assert not problems, "\n".join(problems)


def test_download_job_runs_as_the_images_user_with_the_token_as_a_file() -> None:
    docs = render("job-download.yaml", "download-job", ())
    (job,) = [d for d in docs if d["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["fsGroup"] == 10001
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["image"] == IMAGE
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert {"name": "HF_TOKEN_PATH", "value": "/run/secrets/hf/token"} in container["env"]
    # A new Job per weight set (its name hashes the repos); the repos it fetches are the values'.
    assert re.fullmatch(r"specserve-download-[0-9a-f]{8}", job["metadata"]["name"])
    assert '"repo":"moonshotai/Kimi-K2.5"' in container["command"][-1]
    assert pod["restartPolicy"] == "OnFailure" and job["spec"]["activeDeadlineSeconds"] == 21600
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert not mounts["model"].get("readOnly") and mounts["hf-token"]["readOnly"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["hf-token"]["secret"]["defaultMode"] == 0o400


def test_a_profile_change_rolls_the_pods() -> None:
    """The launcher reads the profile only at start: the pod template carries its checksum."""
    key = "checksum/profile"

    def checksum(*sets: str) -> str:
        (deploy,) = [d for d in render("deployment.yaml", None, sets) if d["kind"] == "Deployment"]
        value: str = deploy["spec"]["template"]["metadata"]["annotations"][key]
        return value

    default = checksum()
    assert re.fullmatch(r"[0-9a-f]{64}", default)
    assert checksum() == default
    assert checksum("profileOverrides.drafter.num_steps=2") != default


def _kinds(*args: str) -> set[tuple[str, str]]:
    result = template(_tools(), *args)
    assert result.returncode == 0, result.stderr
    return {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(result.stdout) if d}


def _budgets(*sets: str) -> set[str]:
    args = [a for item in sets for a in ("--set", item)]
    found = _kinds("--values", str(CHART / "ci" / "replicas-router-values.yaml"), *args)
    return {n for k, n in found if k == "PodDisruptionBudget"}


def test_no_disruption_budget_for_one_replica_or_when_disabled() -> None:
    """One replica: maxUnavailable 1 protects nothing and minAvailable 1 blocks every drain.
    The server pods' and the router pods' budgets are switched separately."""
    assert {n for k, n in _kinds() if k == "PodDisruptionBudget"} == set()
    assert _budgets() == {"specserve", "specserve-router"}
    assert _budgets("podDisruptionBudget.enabled=false") == {"specserve-router"}
    assert _budgets("router.podDisruptionBudget.enabled=false") == {"specserve"}
    assert _budgets("router.replicaCount=1") == {"specserve"}
    assert _budgets("router.enabled=false") == {"specserve"}


def test_disabling_the_rule_object_renders_nothing() -> None:
    result = template(_tools(), "--set", "prometheusRule.enabled=false")
    assert result.returncode == 0, result.stderr
    kinds = {d["kind"] for d in yaml.safe_load_all(result.stdout) if d}
    assert "PrometheusRule" not in kinds and "ServiceMonitor" in kinds


def test_every_template_has_a_case() -> None:
    """A new template comes with its cases (hook-validate, ingress, the download Job, the profile
    ConfigMap and the test pod are asserted below, in test_render.py and test_sources.py)."""
    covered = {c.template for c in CASES} | {
        "hook-validate.yaml", "ingress.yaml", "job-download.yaml", "configmap-profile.yaml",
        "tests", "_helpers.tpl", "NOTES.txt",
        "leaderworkerset.yaml",  # multi-node profiles: tests/helm/test_leaderworkerset.py
        "autoscaling.yaml",  # tests/helm/test_autoscaling.py
        "dcgm-exporter.yaml",  # tests/helm/test_dcgm_exporter.py
        "_grafana-alerts.tpl",  # configmap-grafana.yaml's rules: tests/helm/test_grafana_alerts.py
        "_dashboard.tpl",  # configmap-grafana.yaml's dashboard: tests/helm/test_dashboard_values.py
    }
    present = {p.name for p in (CHART / "templates").iterdir()}
    assert present <= covered, sorted(present - covered)


def test_monitoring_off_ships_no_dashboard_or_alerts() -> None:
    result = template(_tools(), "--values", str(CHART / "ci" / "monitoring-off-values.yaml"))
    assert result.returncode == 0, result.stderr
    names = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(result.stdout) if d}
    assert ("ConfigMap", "specserve-profile") in names
    assert not names & {("ConfigMap", "specserve-dashboard"),
                        ("ConfigMap", "specserve-grafana-alerts")}  # fmt: skip
