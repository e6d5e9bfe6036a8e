"""A profile with nodes.count > 1 renders a LeaderWorkerSet instead of the Deployment.

Every render is validated against the pinned LWS CRD schema (crd-schemas/, versions.yaml
crd_schemas.leaderworkerset) and, for Kubernetes 1.30-1.35, its leader and worker pod templates
(and every other object) against that version's API schemas. The launcher args the chart gives
each pod, expanded the way the kubelet expands them with the variables the LWS webhook sets, go
through specserve-launch's own parser and the profile library to the argv SGLang's real parser
reads, for both verified versions.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.launch.launcher import _parser as launcher_parser
from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.issues import errors
from specserve.profile.model import profile_from_document
from specserve.profile.nodes import Placement
from specserve.profile.render import render_argv
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.sglang_venv import parse_argvs
from tests.helm import k8s_schemas
from tests.helm.conftest import CHART, REPO, Rendered, template

MULTI = REPO / "tests" / "fixtures" / "profiles" / "multinode-kimi-2x8gpu.yaml"
K3 = REPO / "profiles" / "kimi-k3-dspark-2x8gpu.yaml"
VERSIONS = yaml.safe_load((REPO / "versions.yaml").read_text(encoding="utf-8"))
GPU = "nvidia.com/gpu"
LWS_API = "leaderworkerset.x-k8s.io/v1"


def multi_profile() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(MULTI.read_text(encoding="utf-8")))


def _render(tools: Path, tmp_path: Path, values: dict[str, Any]) -> tuple[int, str, Rendered]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    result = template(tools, "--values", str(path))
    docs = [d for d in yaml.safe_load_all(result.stdout) if d] if result.returncode == 0 else []
    return result.returncode, result.stderr, Rendered(path.name, result.stdout, docs)


def _values(profile: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"profile": profile, "apiKey": {"existingSecret": "specserve-api-key"}, **extra}


def _standin_profile() -> dict[str, Any]:
    doc = yaml.safe_load(
        (REPO / "tests/fixtures/profiles/multinode-standin-2rank.yaml").read_text("utf-8")
    )
    for section in ("target", "drafter"):
        doc[section]["path"] = "/models/" + Path(doc[section]["path"]).name
    doc["nodes"]["rendezvous_host"] = None  # in a cluster the leader's address is LWS's
    return doc


# name -> chart values: the cases every render-wide assertion runs over.
CASES: dict[str, dict[str, Any]] = {
    "kimi-2x8": _values(multi_profile()),
    "kimi-2x8-two-groups-hostpath": _values(
        multi_profile(),
        replicaCount=2,
        model={"storage": "hostPath", "hostPath": {"path": "/data/models"}},
    ),
    "kimi-2x8-download-rwx": _values(
        multi_profile(),
        model={
            "storage": "download",
            "download": {
                "repos": [
                    {"repo": "moonshotai/Kimi-K2.5", "dir": "Kimi-K2.5"},
                    {"repo": "lightseekorg/kimi-k2.5-eagle3", "dir": "kimi-k2.5-eagle3"},
                ],
                "pvc": {"accessModes": ["ReadWriteMany"], "size": "2Ti"},
            },
        },
    ),
    "kimi-2x8-monitoring-off": _values(
        multi_profile(),
        exporter={"enabled": False},
        serviceMonitor={"enabled": False},
        prometheusRule={"enabled": False},
        grafana={"dashboards": {"enabled": False}, "alerts": {"enabled": False}},
    ),
    "standin-2rank": {"profile": _standin_profile()},
    # The shipped Kimi-K3 + DSpark profile (issue 29 item 4), as shipped.
    "kimi-k3-dspark-2x8": _values(yaml.safe_load(K3.read_text(encoding="utf-8"))),
}


@pytest.fixture(scope="module")
def renders(tools: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rendered]:
    out = {}
    for name, values in CASES.items():
        code, stderr, rendered = _render(tools, tmp_path_factory.mktemp(name), values)
        assert code == 0, f"{name}: {stderr}"
        out[name] = rendered
    return out


def _lws(rendered: Rendered) -> dict[str, Any]:
    return rendered.one("LeaderWorkerSet")


def _templates(rendered: Rendered) -> dict[str, dict[str, Any]]:
    lwt = _lws(rendered)["spec"]["leaderWorkerTemplate"]
    return {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}


def _container(template_: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((c for c in template_["spec"]["containers"] if c["name"] == name), None)


def test_the_lws_pin_is_the_one_in_versions_yaml() -> None:
    pin = VERSIONS["crd_schemas"]["leaderworkerset"]
    source = (REPO / "tests/helm/crd-schemas/SOURCE.md").read_text(encoding="utf-8")
    assert f"**{pin['tag']}** (commit\n{pin['commit']})" in source
    assert pin["api_version"] == LWS_API
    template_text = (CHART / "templates" / "leaderworkerset.yaml").read_text(encoding="utf-8")
    assert f"apiVersion: {LWS_API}" in template_text


def test_a_multinode_profile_renders_a_leaderworkerset_not_the_deployment(
    renders: dict[str, Rendered],
) -> None:
    for name, rendered in renders.items():
        deployments = [d["metadata"]["name"] for d in rendered.objects("Deployment")]
        assert "specserve" not in deployments, name
        lws = _lws(rendered)
        assert lws["apiVersion"] == LWS_API
        nodes = CASES[name]["profile"]["nodes"]["count"]
        assert lws["spec"]["leaderWorkerTemplate"]["size"] == nodes, name
        assert lws["spec"]["replicas"] == CASES[name].get("replicaCount", 1), name


def test_a_single_node_profile_still_renders_the_deployment(tools: Path, tmp_path: Path) -> None:
    code, stderr, rendered = _render(tools, tmp_path, {})
    assert code == 0, stderr
    assert not rendered.objects("LeaderWorkerSet")
    assert rendered.one("Deployment", "specserve")


@pytest.mark.parametrize("version", k8s_schemas.KUBERNETES_VERSIONS)
def test_every_render_validates_against_the_crd_and_the_api_schemas(
    renders: dict[str, Rendered], version: str
) -> None:
    problems = []
    for name, rendered in renders.items():
        for doc in rendered.docs:
            problems += [f"{name}: {e}" for e in k8s_schemas.errors(doc, version)]
        # The CRD declares the pod templates; the API server of `version` validates the pods.
        for role, tmpl in _templates(rendered).items():
            pod_template = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": f"{name}-{role}"},
                "template": tmpl,
            }
            problems += [f"{name} {role}: {e}" for e in k8s_schemas.errors(pod_template, version)]
    assert not problems, "\n".join(problems)


def test_the_crd_schema_is_strict_enough_to_catch_mistakes(renders: dict[str, Rendered]) -> None:
    lws = copy.deepcopy(_lws(renders["kimi-2x8"]))
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "RecreateEverything"
    lws["spec"]["leaderWorkerTemplate"]["sise"] = 2
    found = k8s_schemas.errors(lws, "1.30")
    assert any("RecreateEverything" in e for e in found), found
    assert any("sise" in e for e in found), found


def test_the_leader_serves_and_is_probed_the_workers_are_not(
    renders: dict[str, Rendered],
) -> None:
    for name, rendered in renders.items():
        leader, worker = _templates(rendered)["leader"], _templates(rendered)["worker"]
        sglang_leader, sglang_worker = _container(leader, "sglang"), _container(worker, "sglang")
        assert sglang_leader is not None and sglang_worker is not None
        probes = {k: sglang_leader[f"{k}Probe"]["httpGet"] for k in ("startup", "readiness")}
        assert probes["startup"]["path"] == "/health_generate", name
        assert probes["readiness"]["path"] == "/health_generate", name
        assert sglang_leader["livenessProbe"]["httpGet"]["port"] == "http"
        # A rank > 0 answers 200 from a dummy health server: probing it would prove nothing.
        assert not {"startupProbe", "readinessProbe", "livenessProbe"} & set(sglang_worker), name
        exporter_on = CASES[name].get("exporter", {}).get("enabled", True)
        has_log = bool(CASES[name]["profile"].get("logging", {}).get("file"))
        assert (_container(leader, "exporter") is not None) == (exporter_on and has_log), name
        assert _container(worker, "exporter") is None, name
        lwt = _lws(rendered)["spec"]["leaderWorkerTemplate"]
        assert lwt["restartPolicy"] == "RecreateGroupOnPodRestart"


def test_only_the_leader_carries_the_labels_services_and_monitors_select(
    renders: dict[str, Rendered],
) -> None:
    for name, rendered in renders.items():
        tmpls = _templates(rendered)
        leader_labels = tmpls["leader"]["metadata"]["labels"]
        worker_labels = tmpls["worker"]["metadata"]["labels"]
        services = rendered.objects("Service")
        assert services, name
        for service in services:
            selector = service["spec"]["selector"]
            if selector.get("app.kubernetes.io/component") != "server":
                continue
            assert selector.items() <= leader_labels.items(), (name, service["metadata"]["name"])
            assert not selector.items() <= worker_labels.items(), (name, selector)


def test_each_pod_asks_for_one_nodes_gpus(renders: dict[str, Rendered]) -> None:
    for name, rendered in renders.items():
        gpus = CASES[name]["profile"]["gpu"]["count"]
        for role, tmpl in _templates(rendered).items():
            sglang = _container(tmpl, "sglang")
            assert sglang is not None
            resources = sglang["resources"]
            if gpus:
                assert resources["limits"][GPU] == gpus == resources["requests"][GPU], (name, role)
            else:
                assert GPU not in resources.get("limits", {}), (name, role)


def _expand(args: list[str], env: dict[str, str]) -> list[str]:
    """The kubelet's $(VAR) expansion of container args."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in args]


@cache
def _parsed(version: str, argvs: tuple[tuple[str, ...], ...]) -> tuple[dict[str, Any], ...]:
    fields = ["nnodes", "node_rank", "dist_init_addr", "tp_size", "port", "speculative_algorithm"]
    return tuple(parse_argvs(version, [list(a) for a in argvs], fields=fields))


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("case", ["kimi-2x8", "kimi-k3-dspark-2x8"])
def test_every_pods_args_reach_sglangs_parser_as_its_rank(
    renders: dict[str, Rendered], version: str, case: str
) -> None:
    rendered = renders[case]
    profile_doc = yaml.safe_load(
        rendered.one("ConfigMap", "specserve-profile")["data"]["profile.yaml"]
    )
    profile = profile_from_document(profile_doc)
    size = _lws(rendered)["spec"]["leaderWorkerTemplate"]["size"]
    # What the LWS webhook sets (pkg/utils/pod/pod_utils.go AddLWSVariables, v0.10.0).
    leader = "specserve-0.specserve.inference"
    argvs, ranks = [], []
    for index in range(size):
        role = "leader" if index == 0 else "worker"
        sglang = _container(_templates(rendered)[role], "sglang")
        assert sglang is not None
        env = {"LWS_WORKER_INDEX": str(index), "LWS_LEADER_ADDRESS": leader}
        args = launcher_parser().parse_args(_expand(sglang["args"], env))
        argv = render_argv(profile, version, Placement(args.node_rank, args.rendezvous_host))
        flags = argv[len(profile.server.launch_command) :]
        flags[flags.index("--api-key") + 1] = "dummy-key-for-the-parser"
        argvs.append(tuple(flags))
        ranks.append(index)
    results = _parsed(version, tuple(argvs))
    for rank, result in zip(ranks, results, strict=True):
        assert result["ok"], result
        assert result["fields"] == {
            "nnodes": size,
            "node_rank": rank,
            "dist_init_addr": f"{leader}:{profile.nodes.rendezvous_port}",
            "tp_size": 16,
            "port": profile.server.port,
            "speculative_algorithm": profile.speculative.algorithm,
        }


def _refusal(tools: Path, tmp_path: Path, values: dict[str, Any]) -> str:
    code, stderr, _ = _render(tools, tmp_path, values)
    assert code != 0, "the chart rendered a profile it must refuse"
    return stderr


def _library_errors(doc: dict[str, Any]) -> list[str]:
    profile = profile_from_document(doc)
    return [
        f"profile.{i.field}: {i.problem}. Fix: {i.fix}"
        for i in errors(run_checks(profile, CheckOptions(configs_only=True)))
    ]


@pytest.mark.parametrize(
    "edit",
    [
        {"gpu": {"count": 4}},
        {"nodes": {"count": 3}, "parallelism": {"tp": 16}, "gpu": {"count": 8}},
        {"parallelism": {"tp": 8, "dp": 2}, "gpu": {"count": 8}},
    ],
    ids=["gpu-sum", "tp-over-nodes", "dp-without-attention"],
)
def test_the_chart_refuses_what_check_refuses_with_the_same_words(
    tools: Path, tmp_path: Path, edit: dict[str, Any]
) -> None:
    doc = multi_profile()
    for section, values in edit.items():
        doc[section] = {**doc.get(section, {}), **values}
        if section == "parallelism":
            doc[section] = values
    library = _library_errors(doc)
    assert library, edit
    stderr = _refusal(tools, tmp_path, _values(doc))
    # Helm stops at the first failed rule: it is one of the library's, word for word.
    assert any(message in stderr for message in library), (stderr, library)


def test_downloaded_weights_must_be_readable_from_every_node(tools: Path, tmp_path: Path) -> None:
    values = copy.deepcopy(CASES["kimi-2x8-download-rwx"])
    values["model"]["download"]["pvc"]["accessModes"] = ["ReadWriteOnce"]
    stderr = _refusal(tools, tmp_path, values)
    assert "reads the downloaded weights on every node" in stderr
    assert "ReadWriteMany" in stderr
