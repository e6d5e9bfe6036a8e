"""One source of truth: the profile the chart renders is the profile the Python library (and the
Ansible path) renders. (That the chart's copies do not drift is tests/test_generated.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.loader import load_profile
from tests.helm.conftest import CHART, REPO, Rendered

KIMI = REPO / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"


def render_json(path: Path) -> dict[str, Any]:
    # The CLI the docs show (`specserve render --format json`), run as the user would.
    result = subprocess.run(
        [sys.executable, "-m", "specserve.cli", "render", str(path), "--format", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rendered: dict[str, Any] = json.loads(result.stdout)
    return rendered


def configmap_profile(render: Rendered, tmp_path: Path) -> Path:
    text = render.one("ConfigMap", "specserve-profile")["data"]["profile.yaml"]
    path = tmp_path / f"{render.name}.profile.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_values_schema_embeds_the_profile_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    library = json.loads((REPO / "specserve" / "profile" / "schema.json").read_text())
    embedded = schema["$defs"]["profile"]
    assert embedded["properties"] == library["properties"]
    assert embedded["required"] == library["required"]


def in_pod(source: Path, tmp_path: Path) -> Path:
    """`source` as the chart deploys it: a loopback server.host becomes 0.0.0.0, nothing else."""
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    server = doc.setdefault("server", {})
    if server.get("host", "127.0.0.1") in ("127.0.0.1", "localhost", "::1"):
        server["host"] = "0.0.0.0"
    path = tmp_path / f"in-pod-{source.name}"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _without_host(argv: list[str]) -> list[str]:
    i = argv.index("--host")
    return argv[:i] + argv[i + 2 :]


def test_default_configmap_profile_is_the_kimi_profile(
    rendered: dict[str, Rendered], tmp_path: Path
) -> None:
    path = configmap_profile(rendered["kimi-default"], tmp_path)
    expected = in_pod(KIMI, tmp_path)
    assert yaml.safe_load(path.read_text()) == yaml.safe_load(expected.read_text())
    assert load_profile(path).baseline == load_profile(KIMI).baseline
    pod, kimi = render_json(path), render_json(KIMI)
    assert pod == render_json(expected)
    # Against the profile file itself, the listen address is the only difference.
    assert pod["env"] == kimi["env"]
    assert _without_host(pod["argv"]) == _without_host(kimi["argv"])
    assert pod["argv"][pod["argv"].index("--host") + 1] == "0.0.0.0"


@pytest.mark.parametrize("name", ["small-model", "replicas-router", "download-job"])
def test_configmap_profile_renders_like_the_values_profile(
    rendered: dict[str, Rendered], tmp_path: Path, name: str
) -> None:
    values = yaml.safe_load((CHART / "ci" / f"{name}-values.yaml").read_text())
    source = tmp_path / "source.yaml"
    if values.get("profile"):
        source.write_text(yaml.safe_dump(values["profile"]), encoding="utf-8")
    else:
        source = KIMI
    expected = in_pod(source, tmp_path)
    path = configmap_profile(rendered[name], tmp_path)
    assert yaml.safe_load(path.read_text()) == yaml.safe_load(expected.read_text())
    assert render_json(path) == render_json(expected)
    # The hook's copy is the same document.
    hook = rendered[name].one("ConfigMap", "specserve-profile-check")["data"]["profile.yaml"]
    assert hook == path.read_text()


def test_a_non_loopback_host_is_kept(tools: Path) -> None:
    from tests.helm.conftest import template

    result = template(tools, "--set", "profileOverrides.server.host=::",
                      "--show-only", "templates/configmap-profile.yaml")  # fmt: skip
    assert result.returncode == 0, result.stderr
    profile = yaml.safe_load(yaml.safe_load(result.stdout)["data"]["profile.yaml"])
    assert profile["server"]["host"] == "::"


def test_profile_overrides_reach_the_rendered_command(tools: Path, tmp_path: Path) -> None:
    from tests.helm.conftest import template

    result = template(tools, "--set", "profileOverrides.drafter.num_steps=2",
                      "--set", "profileOverrides.drafter.num_draft_tokens=3",
                      "--show-only", "templates/configmap-profile.yaml")  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = yaml.safe_load(result.stdout)
    path = tmp_path / "p.yaml"
    path.write_text(doc["data"]["profile.yaml"])
    argv = render_json(path)["argv"]
    assert argv[argv.index("--speculative-num-steps") + 1] == "2"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "3"
    assert argv[argv.index("--tp-size") + 1] == "8"


def test_image_pins_agree_with_versions_yaml() -> None:
    pins = yaml.safe_load((REPO / "versions.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    ours = pins["specserve_images"]
    router = pins["upstream_images"]["smg"]
    assert (values["image"]["repository"], values["image"]["tag"]) == (
        ours["sglang"]["repository"], ours["sglang"]["tag"],
    )  # fmt: skip
    assert (values["exporterImage"]["repository"], values["exporterImage"]["tag"]) == (
        ours["exporter"]["repository"], ours["exporter"]["tag"],
    )  # fmt: skip
    assert (values["router"]["image"]["repository"], values["router"]["image"]["tag"]) == (
        router["repository"], router["tag"],
    )  # fmt: skip


def test_the_router_is_scraped_as_the_job_the_rules_and_the_dashboard_select() -> None:
    """serviceMonitor.routerJob, the router alerts' job (specserve/monitoring/rules.py) and the
    dashboard's router_job variable are three copies of one name: a drift would leave the router
    alerts and panels watching nothing."""
    from specserve.monitoring import rules

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    job = values["serviceMonitor"]["routerJob"]
    assert job == rules.ROUTER_JOB
    for alert in ("SpecServeWorkerOutOfRotation", "SpecServeRouterDown"):
        assert values["prometheusRule"]["alerts"][alert]["thresholds"]["job"] == job
    # The chart's dashboard is this one at the values (tests/helm/test_dashboard_values.py).
    dashboard = json.loads(
        (CHART.parents[1] / "monitoring" / "grafana" / "dashboards" / "specserve.json").read_text())
    (variable,) = [v for v in dashboard["templating"]["list"] if v["name"] == "router_job"]
    assert variable["query"] == job
