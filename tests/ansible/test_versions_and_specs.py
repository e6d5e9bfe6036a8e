"""Static checks: pins match versions.yaml; syntax and lint are clean (the role argument specs
and the variable contract: test_role_specs.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
VERSIONS: dict[str, Any] = yaml.safe_load((ROOT / "versions.yaml").read_text(encoding="utf-8"))


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def _ref(section: str, name: str) -> str:
    image = VERSIONS[section][name]
    return f"{image['repository']}:{image['tag']}"


@pytest.mark.parametrize(
    ("role", "key", "expected"),
    [
        ("specserve", "specserve_image", _ref("specserve_images", "sglang")),
        ("specserve", "specserve_exporter_image", _ref("specserve_images", "exporter")),
        ("monitoring", "monitoring_prometheus_image", _ref("upstream_images", "prometheus")),
        ("monitoring", "monitoring_alertmanager_image", _ref("upstream_images", "alertmanager")),
        ("monitoring", "monitoring_grafana_image", _ref("upstream_images", "grafana")),
    ],
)
def test_role_images_agree_with_versions_yaml(role: str, key: str, expected: str) -> None:
    assert _load(ROOT / "ansible/roles" / role / "defaults/main.yml")[key] == expected


def test_requirements_pin_the_bundled_collections() -> None:
    wanted = VERSIONS["ansible"]["collections"]
    requirements = _load(ROOT / "ansible/requirements.yml")["collections"]
    pinned = {c["name"]: c["version"] for c in requirements}
    assert pinned and all(wanted[name] == version for name, version in pinned.items()), pinned
    # The collections the roles call are the ones pinned.
    task_key = re.compile(r"^\s+(?:- )?([a-z_]+\.[a-z_]+)\.[a-z_]+:\s*$", re.MULTILINE)
    used = {
        match
        for path in (ROOT / "ansible/roles").rglob("*.yml")
        for match in task_key.findall(path.read_text())
    } - {"ansible.builtin"}
    assert used <= set(pinned), used - set(pinned)


def test_installed_versions_are_the_pinned_ones() -> None:
    from importlib.metadata import version

    assert version("ansible-core") == VERSIONS["ansible"]["ansible_core"]
    assert version("ansible") == VERSIONS["ansible"]["ansible"]
    assert version("mitogen") == VERSIONS["ansible"]["mitogen"]
    manifest = Path(sys.modules["yaml"].__file__).parents[1] / "ansible_collections"
    import json

    for name, pinned in VERSIONS["ansible"]["collections"].items():
        namespace, collection = name.split(".")
        info = json.loads((manifest / namespace / collection / "MANIFEST.json").read_text())
        assert info["collection_info"]["version"] == pinned, name


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_syntax_check() -> None:
    for name in ("deploy", "baseline", "tune"):
        result = _run(str(BIN / "ansible-playbook"), f"playbooks/{name}.yml", "--syntax-check")
        assert result.returncode == 0, result.stdout + result.stderr


def test_yamllint() -> None:
    result = _run(str(BIN / "yamllint"), "--strict", "-c", "tests/ansible/yamllint.yml",
                  "ansible", "playbooks", "tests/ansible")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_ansible_lint_production_profile() -> None:
    result = _run(str(BIN / "ansible-lint"), "--profile", "production", "--offline",
                  "playbooks/deploy.yml", "playbooks/baseline.yml", "playbooks/tune.yml",
                  "ansible/roles")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
