"""Shared fixtures: the repository root and the real Prometheus/Alertmanager/Helm tools."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "monitoring"
# scripts/setup/helm.sh installs the pinned helm here (the chart's tests use the same binary).
HELM_BIN = REPO / ".cache" / "bin" / "helm"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is required (apt-get install prometheus prometheus-alertmanager)")
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    return _tool("promtool")


@pytest.fixture(scope="session")
def amtool() -> str:
    return _tool("amtool")


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="session")
def helm() -> str:
    if not HELM_BIN.exists():
        setup = subprocess.run(
            ["bash", str(REPO / "scripts" / "setup" / "helm.sh"), "--no-checkov"],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if setup.returncode != 0:
            pytest.fail(f"scripts/setup/helm.sh --no-checkov failed:\n{setup.stderr[-2000:]}")
    return str(HELM_BIN)


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    # Private homes: helm must not read or write the user's repositories and plugins.
    env = {**os.environ, **{f"HELM_{kind}_HOME": f"/tmp/specserve-helm-{kind.lower()}"
                            for kind in ("CACHE", "CONFIG", "DATA")}}  # fmt: skip
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=120,
                          check=False, env=env)  # fmt: skip
