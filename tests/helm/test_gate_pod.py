"""The chart's test pod runs the same gate (`specserve verify`) with the gate's own defaults:
it passes a budget only where a value sets one, and its floor is the accept-length alert's."""

from __future__ import annotations

from pathlib import Path

import yaml

from specserve.verify.options import alert_floor

from .conftest import template


def _gate_command(tools: Path, *sets: str) -> list[str]:
    result = template(tools, *[arg for s in sets for arg in ("--set-json", s)])
    assert result.returncode == 0, result.stderr
    pod = next(d for d in yaml.safe_load_all(result.stdout)
               if d and d["kind"] == "Pod" and "test" in d["metadata"]["name"])
    return pod["spec"]["containers"][0]["command"]


def test_the_test_pod_leaves_the_gates_defaults_to_the_gate(tools: Path) -> None:
    command = _gate_command(tools)
    assert command[:2] == ["specserve", "verify"]
    assert not any(word.startswith("--max-tokens") for word in command)
    assert f"--floor={alert_floor()}" in command
    # A value set in the chart is passed, named by its value in failure messages.
    assert "--max-tokens=64" in _gate_command(tools, "tests.maxTokens=64")


def test_the_floor_follows_the_alerts_floor(tools: Path) -> None:
    floor = "prometheusRule.alerts.SpecDecodeAcceptLengthLow.thresholds.floor=2.25"
    assert "--floor=2.25" in _gate_command(tools, floor)
    assert "--floor=1.75" in _gate_command(tools, floor, "tests.acceptLengthFloor=1.75")
