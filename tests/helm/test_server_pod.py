"""One server pod for every shape: the Deployment's pod and the LeaderWorkerSet's leader and worker
pods are rendered by one helper (_helpers.tpl specserve.serverPodTemplate), so a pod setting in the
values reaches all three alike, and the shapes differ only where their roles do.

Both shapes render the same profile (tests/fixtures/profiles/multinode-kimi-2x8gpu.yaml): as is,
over two nodes (the LeaderWorkerSet), and at one node with tp 8 (the Deployment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.conftest import REPO, merged, template

MULTI = REPO / "tests" / "fixtures" / "profiles" / "multinode-kimi-2x8gpu.yaml"
COMPONENT = "app.kubernetes.io/component"
ABSENT = "<absent>"

# Two groups read the weights from the download PVC: every part of the pod is rendered (init
# container, anti-affinity, API-key Secret, exporter).
BASE: dict[str, Any] = {
    "replicaCount": 2,
    "apiKey": {"existingSecret": "specserve-api-key"},
    "model": {
        "storage": "download",
        "download": {
            "repos": [
                {"repo": "moonshotai/Kimi-K2.5", "dir": "Kimi-K2.5"},
                {"repo": "lightseekorg/kimi-k2.5-eagle3", "dir": "kimi-k2.5-eagle3"},
            ],
            "pvc": {"accessModes": ["ReadWriteMany"]},
        },
    },
}

# A change to every pod-level setting of the server values at once (server.tolerations is replaced
# whole by a values file, so the default GPU toleration is kept beside the new one).
CHANGED: dict[str, Any] = {
    "imagePullSecrets": [{"name": "regcred"}],
    "server": {
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"},
        ],
        "podSecurityContext": {"supplementalGroups": [2000]},
        "securityContext": {"runAsGroup": 10001},
        "extraEnv": [{"name": "SPECSERVE_TEST_ENV", "value": "on"}],
        "extraVolumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
        "extraVolumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        "priorityClassName": "gpu-high",
        "nodeSelector": {"pool": "h200"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}],
        }}},
        "podLabels": {"team": "inference"},
        "podAnnotations": {"example.com/owner": "inference"},
        "resources": {"limits": {"cpu": "32"}},
        "shm": {"sizeLimit": "16Gi"},
        "terminationGracePeriodSeconds": 600,
        "antiAffinityTopologyKey": "topology.kubernetes.io/zone",
    },
}  # fmt: skip


def _profile(nodes: int) -> dict[str, Any]:
    doc = yaml.safe_load(MULTI.read_text(encoding="utf-8"))
    doc["nodes"]["count"] = nodes
    doc["parallelism"]["tp"] = 8 * nodes  # 8 GPUs per node
    return doc


def _render(tools: Path, tmp_path: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    path = tmp_path / f"values-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    result = template(tools, "--values", str(path))
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _one(docs: list[dict[str, Any]], kind: str, name: str = "specserve") -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def _pods(tools: Path, tmp_path: Path, extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod template of each shape: deployment, leader, worker."""
    single = _render(tools, tmp_path, merged(BASE, {"profile": _profile(1), **extra}))
    multi = _render(tools, tmp_path, merged(BASE, {"profile": _profile(2), **extra}))
    lwt = _one(multi, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    return {
        "deployment": _one(single, "Deployment")["spec"]["template"],
        "leader": lwt["leaderTemplate"],
        "worker": lwt["workerTemplate"],
    }


def _flat(node: Any, path: str = "") -> dict[str, Any]:
    """Every leaf by its path; list items with a name are addressed by it ([name=sglang])."""
    if isinstance(node, dict) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out |= _flat(value, f"{path}.{key}" if path else str(key))
        return out
    if isinstance(node, list) and node:
        out = {}
        for i, item in enumerate(node):
            named = isinstance(item, dict) and isinstance(item.get("name"), str)
            out |= _flat(item, f"{path}[name={item['name']}]" if named else f"{path}[{i}]")
        return out
    return {path: node}


def _differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    fa, fb = _flat(a), _flat(b)
    return {
        p: (fa.get(p, ABSENT), fb.get(p, ABSENT))
        for p in sorted(fa.keys() | fb.keys())
        if fa.get(p, ABSENT) != fb.get(p, ABSENT)
    }


def _under(path: str, prefixes: tuple[str, ...]) -> str | None:
    return next((p for p in prefixes if path == p or path.startswith((p + ".", p + "["))), None)


@pytest.fixture(scope="module")
def pods(tools: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return _pods(tools, tmp_path_factory.mktemp("base"), {})


def test_a_pod_setting_reaches_every_shape_alike(
    tools: Path, tmp_path: Path, pods: dict[str, dict[str, Any]]
) -> None:
    changed = _pods(tools, tmp_path, CHANGED)
    effects = {shape: _differences(pods[shape], changed[shape]) for shape in pods}
    # Each setting took effect (a spot check per setting, in the Deployment's pod)...
    spec = changed["deployment"]["spec"]
    sglang = next(c for c in spec["containers"] if c["name"] == "sglang")
    assert spec["tolerations"] == CHANGED["server"]["tolerations"]
    assert spec["securityContext"]["supplementalGroups"] == [2000]
    assert sglang["securityContext"]["runAsGroup"] == 10001
    assert {"name": "SPECSERVE_TEST_ENV", "value": "on"} in sglang["env"]
    assert {"name": "scratch", "mountPath": "/scratch"} in sglang["volumeMounts"]
    assert {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}} in spec["volumes"]
    assert spec["priorityClassName"] == "gpu-high"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["nodeSelector"] == {"pool": "h200"}
    assert "nodeAffinity" in spec["affinity"] and "podAntiAffinity" in spec["affinity"]
    assert sglang["resources"]["limits"]["cpu"] == "32"
    assert spec["terminationGracePeriodSeconds"] == 600
    assert changed["deployment"]["metadata"]["labels"]["team"] == "inference"
    # ...and changed exactly the same fields, to the same values, in the leader and the worker.
    assert effects["deployment"], "the changed values changed nothing"
    assert effects["leader"] == effects["deployment"]
    assert effects["worker"] == effects["deployment"]


# What each shape's role changes, and nothing else may differ. Deployment vs leader: the leader's
# launcher is told its rank, its anti-affinity keeps the workers away too, and the profile (one
# node vs two) is a different one, so its checksum is.
DEPLOYMENT_VS_LEADER = (
    "metadata.annotations.checksum/profile",
    "spec.containers[name=sglang].args",
    "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector",
)
# Leader vs worker: a worker is not selected by the Services (its own component label), serves no
# API (no probes, no preStop drain) and logs no decode lines (no exporter).
LEADER_VS_WORKER = (
    f"metadata.labels.{COMPONENT}",
    "spec.containers[name=sglang].startupProbe",
    "spec.containers[name=sglang].readinessProbe",
    "spec.containers[name=sglang].livenessProbe",
    "spec.containers[name=sglang].lifecycle",
    "spec.containers[name=exporter]",
)


@pytest.mark.parametrize(
    ("a", "b", "allowed"),
    [("deployment", "leader", DEPLOYMENT_VS_LEADER), ("leader", "worker", LEADER_VS_WORKER)],
)
def test_the_shapes_differ_only_where_their_roles_do(
    pods: dict[str, dict[str, Any]], a: str, b: str, allowed: tuple[str, ...]
) -> None:
    differences = _differences(pods[a], pods[b])
    unexplained = {p: v for p, v in differences.items() if not _under(p, allowed)}
    assert not unexplained, f"{a} vs {b}: {unexplained}"
    # Every listed difference is there: the list is the roles' whole difference, not a guess.
    assert {_under(p, allowed) for p in differences} == set(allowed), differences


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions with In) against pod labels."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def test_every_rank_keeps_every_other_server_pod_off_its_node(
    pods: dict[str, dict[str, Any]],
) -> None:
    """nodes.count means nodes: two ranks on one node would share its GPUs (or never fit), so the
    anti-affinity that keeps replicas apart keeps the ranks apart too, the leaders' and the
    workers' alike, and no other pod of the release (the router's)."""
    labels = {shape: pod["metadata"]["labels"] for shape, pod in pods.items()}
    router = {**labels["leader"], COMPONENT: "router"}
    for shape in ("leader", "worker"):
        anti = pods[shape]["spec"]["affinity"]["podAntiAffinity"]
        (term,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        selector = term["labelSelector"]
        assert _matches(selector, labels["leader"]) and _matches(selector, labels["worker"]), shape
        assert not _matches(selector, router), shape
    assert labels["leader"][COMPONENT] != labels["worker"][COMPONENT]


def test_one_group_is_spread_too_and_none_means_none(tools: Path, tmp_path: Path) -> None:
    """One group is already two pods; a single-node Deployment of one replica is one pod."""
    one_group = _pods(tools, tmp_path, {"replicaCount": 1})
    assert "affinity" not in one_group["deployment"]["spec"]
    for shape in ("leader", "worker"):
        assert one_group[shape]["spec"]["affinity"]["podAntiAffinity"], shape
    soft = _pods(tools, tmp_path, {"server": {"podAntiAffinity": "soft"}})
    none = _pods(tools, tmp_path, {"server": {"podAntiAffinity": "none"}})
    for shape in ("deployment", "leader", "worker"):
        assert set(soft[shape]["spec"]["affinity"]["podAntiAffinity"]) == {
            "preferredDuringSchedulingIgnoredDuringExecution"
        }, shape
        assert "affinity" not in none[shape]["spec"], shape


def test_every_pod_waits_for_the_download_job_it_names(tools: Path, tmp_path: Path) -> None:
    """The init container's wait message names the Job to look at, on every rank too."""
    for nodes in (1, 2):
        docs = _render(tools, tmp_path, merged(BASE, {"profile": _profile(nodes)}))
        (job,) = [d for d in docs if d["kind"] == "Job" and "-download-" in d["metadata"]["name"]]
        marker = job["spec"]["template"]["spec"]["containers"][0]["command"][4]
        if nodes == 1:
            templates = [_one(docs, "Deployment")["spec"]["template"]]
        else:
            lwt = _one(docs, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
            templates = [lwt["leaderTemplate"], lwt["workerTemplate"]]
        for tmpl in templates:
            (init,) = tmpl["spec"]["initContainers"]
            assert init["command"][3] == marker
            assert init["command"][5] == job["metadata"]["name"]
            assert "(job {sys.argv[3]})" in init["command"][2]
