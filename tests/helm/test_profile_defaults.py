"""The chart reads a fact the profile leaves out from the profile library's own defaults
(files/profile-defaults.yaml, generated from specserve/profile/fields.py), never from a number
restated in a template: change the default once and the rendered objects follow."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from specserve.generate.chart import profile_defaults
from specserve.profile.fields import BY_PATH

from .conftest import CHART, NAMESPACE, RELEASE, helm

STANDIN = CHART.parents[1] / "profiles" / "standin-cpu.yaml"


def _render(tools: Path, chart: Path, profile: dict[str, Any], tmp_path: Path) -> list[dict]:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"profile": profile}))
    result = helm(tools, "template", RELEASE, str(chart), "--namespace", NAMESPACE,
                  "--values", str(values))
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _profile_without(*paths: str) -> dict[str, Any]:
    profile = yaml.safe_load(STANDIN.read_text())
    for path in paths:
        section, name = path.split(".")
        profile[section].pop(name, None)
    return profile


def _server_port(docs: list[dict]) -> int:
    deployment = next(d for d in docs if d["kind"] == "Deployment"
                      and d["metadata"]["name"].endswith("specserve"))
    sglang = next(c for c in deployment["spec"]["template"]["spec"]["containers"]
                  if c["name"] == "sglang")
    return next(p["containerPort"] for p in sglang["ports"] if p["name"] == "http")


def _scrapes_sglang(docs: list[dict]) -> bool:
    monitors = [d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")]
    return any(e.get("port") == "http" for m in monitors
               for e in m["spec"].get("endpoints", m["spec"].get("podMetricsEndpoints", [])))


def test_the_defaults_file_is_the_field_tables() -> None:
    shipped = yaml.safe_load((CHART / "files/profile-defaults.yaml").read_text())
    assert shipped == yaml.safe_load(profile_defaults())
    assert shipped["server"]["port"] == BY_PATH["server.port"].default
    assert shipped["nodes"]["count"] == BY_PATH["nodes.count"].default
    # Fields without a default (the profile must say) are not in it.
    assert "tp" not in shipped["parallelism"] and "path" not in shipped["target"]


def test_a_left_out_fact_follows_the_library_default_when_it_changes(
        tools: Path, tmp_path: Path) -> None:
    profile = _profile_without("server.port", "server.enable_metrics")
    shipped = _render(tools, CHART, profile, tmp_path)
    assert _server_port(shipped) == BY_PATH["server.port"].default
    assert _scrapes_sglang(shipped)  # enable_metrics defaults to true

    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    defaults = yaml.safe_load((chart / "files/profile-defaults.yaml").read_text())
    defaults["server"]["port"] = 31234
    defaults["server"]["enable_metrics"] = False
    (chart / "files/profile-defaults.yaml").write_text(yaml.safe_dump(defaults))
    moved = _render(tools, chart, profile, tmp_path)
    assert _server_port(moved) == 31234
    assert not _scrapes_sglang(moved)


def test_a_value_the_profile_sets_wins_even_when_it_is_false_or_zero(
        tools: Path, tmp_path: Path) -> None:
    # Sprig's merge would let a default `true` win over a profile's `false`: the lookup must not.
    profile = _profile_without()
    profile["server"]["enable_metrics"] = False
    profile["server"]["port"] = 30123
    docs = _render(tools, CHART, profile, tmp_path)
    assert not _scrapes_sglang(docs)
    assert _server_port(docs) == 30123
