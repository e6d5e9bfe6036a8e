"""Every value in values.yaml has a described schema row (the README's values table is generated
from them), and NOTES.txt tells how to watch."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from specserve.generate import chart_values
from tests.helm.conftest import CHART, helm


def _paths(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        out: list[str] = []
        for key, value in node.items():
            out += _paths(value, f"{prefix}.{key}" if prefix else key)
        return out
    return [prefix]


def test_every_value_is_a_described_row_of_the_schema() -> None:
    # The README's table is generated from the schema's rows (tests/test_generated.py holds it to
    # them); here: the schema has a row, with a description, for every value values.yaml sets.
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = list(chart_values.rows(schema, values))
    assert all(row.schema.get("description") for row in rows)
    patterns = [re.compile(re.escape(row.path).replace(re.escape(chart_values.ANY_KEY), "[^.]+")
                           + r"(\..+)?") for row in rows]  # fmt: skip
    uncovered = [path for path in _paths(values) if not any(p.fullmatch(path) for p in patterns)]
    assert not uncovered, f"values.yaml sets values the schema has no row for: {uncovered}"
    assert "## Kubernetes quick start" in (CHART / "README.md").read_text()


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
