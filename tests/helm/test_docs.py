"""The chart README documents every value in values.yaml, and NOTES.txt tells how to watch."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.helm.conftest import CHART, helm

# Subtrees documented as one row: their content is free-form or documented elsewhere.
WHOLE = {"server.strategy", "server.resources", "server.tolerations", "server.podSecurityContext",
         "server.securityContext", "model.download.repos", "model.download.resources",
         "validation.resources", "exporter.resources", "exporter.securityContext",
         "ingress.hosts", "router.resources", "router.securityContext", "profile",
         "profileOverrides"}  # fmt: skip


def _paths(node: Any, prefix: str = "") -> list[str]:
    if prefix in WHOLE or prefix.startswith("prometheusRule.alerts"):
        return [prefix]
    if isinstance(node, dict) and node:
        out: list[str] = []
        for key, value in node.items():
            out += _paths(value, f"{prefix}.{key}" if prefix else key)
        return out
    return [prefix]


def test_readme_documents_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    table = readme.split("## Values", 1)[1]
    missing = [p for p in _paths(values) if not p.startswith("prometheusRule.alerts")
               and f"| `{p}` |" not in table]  # fmt: skip
    assert not missing, f"values not documented in charts/specserve/README.md: {missing}"
    for alert_row in ("disabled", "for", "thresholds.<name>"):
        assert f"| `prometheusRule.alerts.<Alert>.{alert_row}` |" in table
    assert "## Kubernetes quick start" in readme


def _shown(value: Any) -> str:
    """A scalar default as the README's table writes it: `value`, a string that YAML would read as
    something else quoted (`"1"`), an empty one as `""`."""
    if isinstance(value, str):
        return json.dumps(value) if value == "" or yaml.safe_load(value) != value else value
    return json.dumps(value)


def test_readme_defaults_are_the_values_defaults() -> None:
    """Where the table's default is one literal (`...`), it is values.yaml's; prose defaults
    (requests 1 / 1Gi, the repository's docs/runbooks) are left to the reader."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    table = (CHART / "README.md").read_text().split("## Values", 1)[1]
    rows = dict(re.findall(r"^\| `([^`]+)` \| `([^`]*)` \|", table, re.M))
    checked, wrong = 0, []
    for path in _paths(values):
        node: Any = values
        for key in path.split("."):
            node = node[key] if isinstance(node, dict) and key in node else None
        if path in rows and not isinstance(node, (dict, list)):
            checked += 1
            if rows[path] != _shown(node):
                wrong.append(f"{path}: README `{rows[path]}`, values.yaml `{_shown(node)}`")
    assert not wrong, wrong
    assert checked > 100  # the table's literal defaults are read, not skipped


def test_notes_tell_how_to_watch_the_load_and_reach_the_dashboard(tools: Path) -> None:
    result = helm(tools, "install", "kimi", str(CHART), "--dry-run=client", "-n", "inference",
                  "--set", "model.storage=download")  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "kubectl -n inference logs -f deploy/kimi-specserve -c sglang" in notes
    assert "kubectl -n inference logs -f job/kimi-specserve-download-" in notes
    assert "3600 s" in notes  # the startup probe budget
    assert "helm test kimi -n inference --logs" in notes
    assert "/d/specserve-overview" in notes


def test_notes_tell_how_the_router_finds_the_replicas_and_how_upgrades_roll(tools: Path) -> None:
    result = helm(tools, "install", "kimi", str(CHART), "--dry-run=client", "-n", "inference",
                  "--values", str(CHART / "ci" / "replicas-router-values.yaml"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "Upgrades: RollingUpdate (maxSurge 0, maxUnavailable 1" in notes
    assert "PodDisruptionBudget kimi-specserve: a node drain evicts at most 1" in notes
    assert "Role kimi-specserve-router: list/watch pods in inference" in notes
    assert "kubectl -n inference port-forward svc/kimi-specserve-router 29000:29000" in notes
    assert "the router's smg_* series as job specserve-router" in notes
    assert "Router upgrades: RollingUpdate (maxSurge 1, maxUnavailable 0" in notes
    assert "PodDisruptionBudget kimi-specserve-router: a node drain evicts at most 1 router" in (
        notes
    )
    assert "grep -E 'Registering worker|Removing worker'" in notes  # smg's log lines
    # smg routes by the request's model: the example names the one the profile serves.
    assert '"model": "/models/Kimi-K2.5", "messages"' in notes
    single = helm(tools, "install", "kimi", str(CHART), "--dry-run=client", "-n", "inference")
    assert single.returncode == 0, single.stderr
    assert "Upgrades: Recreate (the old pod frees its GPUs" in single.stdout
    assert "PodDisruptionBudget" not in single.stdout.split("NOTES:", 1)[1]
