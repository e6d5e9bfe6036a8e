"""diagnose's targets from a deployment's inventory, through the real ansible-inventory."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specserve.diagnose.inventory import InventoryError, targets


def _inventory(tmp_path: Path, host_vars: dict[str, object], group_vars: dict[str, object]) -> Path:
    path = tmp_path / "hosts.yml"
    doc = {"specserve": {"hosts": {"gpu-node-1": host_vars}, "vars": group_vars}}
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_a_remote_node_is_read_through_a_tunnel_with_its_overrides_and_profile(tmp_path) -> None:
    inventory = _inventory(tmp_path, {"ansible_host": "node1.example.internal"},
                           {"specserve_profile": "site/kimi-profile.yaml",
                            "specserve_alert_overrides": "site/overrides.yml",
                            "monitoring_prometheus_port": 9191})  # fmt: skip
    found = targets(inventory)
    assert found.host == "gpu-node-1" and found.prometheus == "http://127.0.0.1:9191"
    assert found.overrides == Path("site/overrides.yml")
    assert found.profile == Path("site/kimi-profile.yaml")
    assert "ssh -L 9191:127.0.0.1:9191 node1.example.internal" in found.note


def test_the_role_defaults_fill_what_the_inventory_leaves_unset(tmp_path) -> None:
    inventory = _inventory(tmp_path, {"ansible_connection": "local"},
                           {"monitoring_listen_host": "0.0.0.0"})  # fmt: skip
    found = targets(inventory, "gpu-node-1")
    # monitoring_prometheus_port's default (ansible/roles/monitoring/defaults/main.yml).
    assert found.prometheus == "http://gpu-node-1:9090"
    assert found.overrides is None and found.note == ""


def test_a_templated_value_and_a_missing_file_are_named(tmp_path) -> None:
    inventory = _inventory(tmp_path, {}, {"monitoring_prometheus_port": "{{ base + 1 }}"})
    with pytest.raises(InventoryError, match="monitoring_prometheus_port is a template"):
        targets(inventory)
    with pytest.raises(InventoryError, match="no such file"):
        targets(tmp_path / "nope.yml")
