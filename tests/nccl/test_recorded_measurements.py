"""The NCCL figures in docs/ are the recorded runs' figures: tables re-render from the JSON, and the
summary table in docs/nccl.md is computed from the same JSON files."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from specserve.nccl.report import render_markdown

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = ROOT / "docs" / "measurements"
H200_RUNS = sorted(MEASUREMENTS.glob("nccl-h200x2-*.json"))


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _results(document: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Measured results by preset name, then size label."""
    return {
        entry["name"]: {r["label"]: r for r in entry["results"]}
        for entry in document["presets"]
        if entry["status"] == "ok"
    }


def test_the_multi_gpu_runs_are_recorded() -> None:
    assert len(H200_RUNS) == 7
    for path in H200_RUNS:
        machine = _load(path)["machine"]
        assert machine["world_size"] == 2 and machine["backend"] == "nccl"
        assert machine["topology"] == "nvlink"
        assert machine["gpu_names"] == ["NVIDIA H200", "NVIDIA H200"]


@pytest.mark.parametrize("path", H200_RUNS, ids=lambda p: p.stem)
def test_recorded_table_is_the_json_rendered(path: Path) -> None:
    document = _load(path)
    assert all(
        result["correct"] for entry in document["presets"] for result in entry["results"]
    ), "every recorded all-reduce passed its sum check"
    assert render_markdown(document) in path.with_suffix(".md").read_text()


def _docs_table() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "nccl.md").read_text()
    section = text[text.index("### Multi-GPU: 2 x H200") : text.index("### Single GPU")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and re.fullmatch(r"\d+(tok|MiB)", cells[0]):
            rows[cells[0]] = cells
    return rows


def test_docs_summary_is_computed_from_the_runs() -> None:
    graph = [_results(_load(p)) for p in H200_RUNS if "-graph-" in p.name]
    rows = _docs_table()
    assert len(rows) == 12
    for label, cells in rows.items():
        per_preset = {
            name: [run[name][label] for run in graph if name in run]
            for name in ("default", "nvlink", "pcie-8gpu-seeds")
        }
        assert [len(v) for v in per_preset.values()] == [5, 3, 2]
        for column, name in zip(cells[2:5], per_preset, strict=True):
            median = statistics.median(r["latency_us"]["median"] for r in per_preset[name])
            assert float(column) == pytest.approx(median, abs=0.051)
        busbw = statistics.median(r["busbw_gbps"] for r in per_preset["default"])
        assert float(cells[6]) == pytest.approx(busbw, abs=0.051)
        # The tool's own per-run ratio (report.add_speedups), not one recomputed here.
        ratios = sorted(r["speedup_vs_default"] for r in per_preset["pcie-8gpu-seeds"])
        low, _, high = cells[5].rstrip("x").partition("-")
        assert float(low) == pytest.approx(ratios[0], abs=0.0051)
        assert float(high or low) == pytest.approx(ratios[-1], abs=0.0051)
