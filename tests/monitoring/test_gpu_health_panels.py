"""The dashboard's GPU health row shows what the six GPU alerts watch, in real Prometheus.

No DCGM exporter runs here (no GPU), so the monitoring e2e exempts every DCGM query from its
"has data" check. Here series named and labelled as the pinned dcgm-exporter serves them, on two
ranks of a multi-node server scraped by rank 0 (labels node and rank, as the Ansible monitoring
role sets them) plus a third target that is down, are promtool's input; promtool evaluates each
query of the row and each must return the value the series imply, under labels that tell the
ranks apart. Every DCGM_FI_* name of the row is the pinned exporter's own, and one the counters
file specserve deploys collects, so a misspelt or uncollected name fails here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from specserve.monitoring import dcgm
from specserve.monitoring.dashboard import XID_MEANINGS, build_dashboard, iter_panels
from specserve.monitoring.overrides import resolve_settings
from specserve.monitoring.rules import ALERTS, DCGM_JOB, DRAIN_XIDS

from .conftest import run
from .test_dcgm_counters import _queried

ROW = "GPU health (DCGM exporter)"
_DCGM = re.compile(r"\bDCGM_FI_[A-Z0-9_]+")
GPU_ALERTS = {alert.name for alert in ALERTS if alert.name.startswith("SpecServeGpu")}


def _row(model: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The panels under the GPU health row, up to the next row."""
    panels, inside = [], False
    for panel in iter_panels(model or build_dashboard()):
        if panel["type"] == "row":
            inside = panel["title"] == ROW
        elif inside:
            panels.append(panel)
    assert panels, f"no row titled {ROW!r}"
    return panels


def _names(panels: list[dict[str, Any]]) -> set[str]:
    return {name for p in panels for t in p["targets"] for name in _DCGM.findall(t["expr"])}


def unknown_dcgm_names(exprs: list[str]) -> set[str]:
    """Names the pinned exporter's counters file does not have, or the deployed one leaves off."""
    deployed = {
        match["name"]
        for line in dcgm.deployed_counters().splitlines()
        if (match := re.match(r"^(?P<name>DCGM_FI_[A-Z0-9_]+)\s*,", line))
    }
    return {name for expr in exprs for name in _DCGM.findall(expr)} - deployed


def test_every_name_of_the_row_is_collected_by_the_deployed_exporter() -> None:
    panels = _row()
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    assert unknown_dcgm_names(exprs) == set()
    # The counters-file test reads the dashboard's queries too: these names are among them.
    assert _names(panels) <= _queried()
    # The check catches a misspelt name (XID_ERROR for XID_ERRORS) and one the default file
    # leaves commented out that specserve does not enable (board-limit throttling).
    wrong = ["DCGM_FI_DEV_XID_ERROR", "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION"]
    assert unknown_dcgm_names([f"{wrong[0]} == 79", wrong[1]]) == set(wrong)


def test_the_row_reads_every_gpu_alerts_series() -> None:
    assert {"SpecServeGpuXidDrain", "SpecServeGpuUncorrectableEcc",
                          "SpecServeGpuRowRemapFailure", "SpecServeGpuMissing",
                          "SpecServeGpuThrottled", "SpecServeGpuNvlinkErrors"} == GPU_ALERTS
    names = _names(_row())
    for alert in ALERTS:
        if alert.name in GPU_ALERTS:
            missing = set(_DCGM.findall(alert.value_expr)) - names
            assert not missing, f"{alert.name} reads {missing}, no GPU health panel does"


def test_xid_panel_marks_exactly_the_drain_codes_red() -> None:
    (panel,) = [p for p in _row() if p["title"] == "Last XID per GPU"]
    assert panel["type"] == "state-timeline"
    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    red = {int(value) for value, result in mapping["options"].items() if result["color"] == "red"}
    assert red == set(DRAIN_XIDS) == set(XID_MEANINGS)
    assert mapping["options"]["0"]["color"] == "green"
    # Any other code is unmapped: the thresholds colour it orange.
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [(s["value"], s["color"]) for s in steps] == [(None, "green"), (1, "orange")]
    assert panel["fieldConfig"]["defaults"]["color"]["mode"] == "thresholds"


def _steps(panel: dict[str, Any]) -> list[float]:
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    return [s["value"] for s in steps if s["value"] is not None]


def test_threshold_lines_follow_the_alerts_settings() -> None:
    default = {p["title"]: p for p in _row()}
    assert _steps(default["GPUs seen per node"]) == [8]
    assert _steps(default["Clocks held down (power + thermal)"]) == [0.2]
    assert _steps(default["NVLink errors (5m)"]) == [10]
    overridden = build_dashboard(resolve_settings({
        "SpecServeGpuMissing": {"thresholds": {"gpus": 2, "job": "nvidia-dcgm-exporter"}},
        "SpecServeGpuThrottled": {"thresholds": {"max_share": 0.5}},
    }))
    panels = {p["title"]: p for p in _row(overridden)}
    assert _steps(panels["GPUs seen per node"]) == [2]
    assert _steps(panels["Clocks held down (power + thermal)"]) == [0.5]
    # The missing-GPU panel selects the job the alert does (the GPU Operator's here).
    expr = panels["GPUs seen per node"]["targets"][0]["expr"]
    assert 'job=~"nvidia-dcgm-exporter"' in expr and f'job=~"{DCGM_JOB}"' not in expr


# --- the row's queries on exporter-shaped series, in promtool ------------------------------

# Two ranks of a multi-node server as rank 0's Prometheus scrapes them (Ansible's labels), two
# GPUs each; rank 1's GPU 1 fell off the bus (no series), and a third target is down.
TARGETS = {
    "rank0": {"instance": "10.0.0.1:9400", "node": "rank0", "rank": "0", "Hostname": "gpu-a"},
    "rank1": {"instance": "10.0.0.2:9400", "node": "rank1", "rank": "1", "Hostname": "gpu-b"},
}
DOWN = {"instance": "10.0.0.3:9400", "node": "rank2", "rank": "2"}
GPUS = {"rank0": ("0", "1"), "rank1": ("0",)}
# Per GPU: (last XID, ECC double-bit errors per minute, power and thermal violation us/min,
# NVLink errors per minute per counter, row remap failed).
STATE = {
    ("rank0", "0"): (13, 0, 0, 0, 0, 0),
    ("rank0", "1"): (0, 1, 24_000_000, 6_000_000, 0, 0),
    ("rank1", "0"): (79, 0, 0, 0, 3, 1),
}


def _labels(target: str, gpu: str) -> dict[str, str]:
    return {**TARGETS[target], "job": DCGM_JOB, "gpu": gpu, "device": f"nvidia{gpu}",
            "UUID": f"GPU-{target}-{gpu}", "pci_bus_id": f"00000000:1{gpu}:00.0",
            "modelName": "NVIDIA H200"}  # fmt: skip


def _series(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _input() -> list[dict[str, str]]:
    series = []
    for target in TARGETS:
        series.append({"series": _series("up", {**TARGETS[target], "job": DCGM_JOB}),
                       "values": "1x30"})
    series.append({"series": _series("up", {**DOWN, "job": DCGM_JOB}), "values": "0x30"})
    for (target, gpu), (xid, ecc, power, thermal, nvlink, remap) in STATE.items():
        labels = _labels(target, gpu)
        gauges = {"DCGM_FI_DEV_GPU_TEMP": 60, "DCGM_FI_DEV_GPU_UTIL": 90,
                  "DCGM_FI_DEV_FB_USED": 70_000, "DCGM_FI_DEV_POWER_USAGE": 600,
                  "DCGM_FI_DEV_XID_ERRORS": xid, "DCGM_FI_DEV_ROW_REMAP_FAILURE": remap}
        counters = {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ecc,
                    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ecc,
                    "DCGM_FI_DEV_POWER_VIOLATION": power,
                    "DCGM_FI_DEV_THERMAL_VIOLATION": thermal,
                    **{name: nvlink for name in (
                        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
                        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL")}}  # fmt: skip
        series += [{"series": _series(n, labels), "values": f"{v}x30"} for n, v in gauges.items()]
        series += [{"series": _series(n, labels), "values": f"0+{v}x30"}
                   for n, v in counters.items()]  # fmt: skip
    return series


def _sample(labels: dict[str, str], value: float, name: str | None = None) -> dict[str, Any]:
    return {"labels": _series(name or "", labels), "value": value}


def _per_gpu(values: dict[tuple[str, str], float], name: str | None = None,
             keep: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    out = []
    for (target, gpu), value in values.items():
        labels = _labels(target, gpu)
        if keep is not None:
            labels = {k: v for k, v in labels.items() if k in keep}
        out.append(_sample(labels, value, name))
    return out


def _expected() -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(panel title, legend) -> the samples its query returns at 20m."""
    every = {key: 0.0 for key in STATE}
    per_minute = {key: float(state[1]) for key, state in STATE.items()}
    by_gpu = ("instance", "Hostname", "gpu")
    return {
        ("GPUs seen per node", "{{Hostname}} {{instance}}"): [
            _sample({"job": DCGM_JOB, "instance": "10.0.0.1:9400", "Hostname": "gpu-a"}, 2),
            _sample({"job": DCGM_JOB, "instance": "10.0.0.2:9400", "Hostname": "gpu-b"}, 1),
            _sample({"job": DCGM_JOB, "instance": "10.0.0.3:9400"}, 0),
        ],
        ("Last XID per GPU", "{{Hostname}} GPU {{gpu}}"): _per_gpu(
            {key: float(state[0]) for key, state in STATE.items()}, "DCGM_FI_DEV_XID_ERRORS"),
        ("Uncorrectable memory errors (15m)", "{{Hostname}} GPU {{gpu}} double-bit ECC"):
            _per_gpu({key: 15 * v for key, v in per_minute.items()}),
        ("Uncorrectable memory errors (15m)", "{{Hostname}} GPU {{gpu}} rows remapped"):
            _per_gpu({key: 15 * v for key, v in per_minute.items()}),
        ("Row remap failure", "{{Hostname}} GPU {{gpu}}"): _per_gpu(
            {key: float(state[5]) for key, state in STATE.items()},
            "DCGM_FI_DEV_ROW_REMAP_FAILURE"),
        ("NVLink errors (5m)", "{{Hostname}} GPU {{gpu}}"): _per_gpu(
            {key: 4 * 5 * float(state[4]) for key, state in STATE.items()}),
        ("Clocks held down (power + thermal)", "{{Hostname}} GPU {{gpu}}"): _per_gpu(
            {key: (state[2] + state[3]) / 60 / 1e6 for key, state in STATE.items()}),
        ("Clocks held down, by reason", "{{Hostname}} GPU {{gpu}} power"): _per_gpu(
            {key: state[2] / 60 / 1e6 for key, state in STATE.items()}),
        ("Clocks held down, by reason", "{{Hostname}} GPU {{gpu}} thermal"): _per_gpu(
            {key: state[3] / 60 / 1e6 for key, state in STATE.items()}),
        ("GPU utilisation", "{{Hostname}} GPU {{gpu}}"): _per_gpu(
            {key: 90.0 for key in every}, keep=by_gpu),
        ("GPU memory used", "{{Hostname}} GPU {{gpu}}"): _per_gpu(
            {key: 70_000.0 for key in every}, keep=by_gpu),
        ("GPU power", "{{Hostname}} GPU {{gpu}}"): _per_gpu(
            {key: 600.0 for key in every}, keep=by_gpu),
        ("GPU temperature", "{{Hostname}} GPU {{gpu}}"): _per_gpu(
            {key: 60.0 for key in every}, keep=by_gpu),
    }


def test_each_query_of_the_row_returns_what_the_exporter_series_say(
    promtool: str, tmp_path: Path
) -> None:
    expected = _expected()
    queries = {(p["title"], t["legendFormat"]): t["expr"] for p in _row() for t in p["targets"]}
    assert set(queries) == set(expected)
    # Rank 1's GPU 0 is its own series everywhere a GPU is: the ranks are told apart.
    assert all(any("gpu-b" in s["labels"] for s in samples) for samples in expected.values())
    tests = [{"expr": queries[key], "eval_time": "20m", "exp_samples": samples}
             for key, samples in expected.items()]  # fmt: skip
    document = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": _input(), "promql_expr_test": tests}],
    }
    path = tmp_path / "gpu-health-panels.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    result = run(promtool, "test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
