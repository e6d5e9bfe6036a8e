"""Aggregate rank reports into the JSON result, and render it as Markdown.

The JSON layout is documented in docs/nccl.md ("The JSON result"); bump SCHEMA_VERSION when it
changes incompatibly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from specserve.nccl.presets import REFERENCE
from specserve.nccl.sizes import MessageSize
from specserve.nccl.stats import speedup, summarize
from specserve.profile.nccl import NcclPreset

SCHEMA_VERSION = 1


def preset_entry(
    preset: NcclPreset,
    status: str,
    error: str | None = None,
    notes: Sequence[str] = (),
    elapsed_s: float | None = None,
) -> dict[str, Any]:
    return {
        "name": preset.name,
        "description": preset.description,
        "topology": preset.topology,
        "env": dict(preset.env),
        "status": status,
        "error": error,
        "notes": list(notes),
        "elapsed_s": elapsed_s,
        "env_seen": [],
        "results": [],
    }


def expected_nccl_env(
    preset_env: Mapping[str, str], extra_env: Mapping[str, str]
) -> dict[str, str]:
    merged = {**extra_env, **preset_env}
    return {k: v for k, v in sorted(merged.items()) if k.startswith("NCCL_")}


def aggregate(
    entry: dict[str, Any],
    reports: Sequence[Mapping[str, Any]],
    sizes: Sequence[MessageSize],
    world_size: int,
    expected_env: Mapping[str, str],
) -> None:
    """Fill `entry` from the ranks' reports; a wrong env or a wrong sum fails the preset."""
    reports = sorted(reports, key=lambda r: int(r["rank"]))
    entry["env_seen"] = [r["nccl_env_seen"] for r in reports]
    for report in reports:
        if report["nccl_env_seen"] != dict(expected_env):
            entry["status"] = "failed"
            entry["error"] = (
                f"rank {report['rank']} saw NCCL variables {report['nccl_env_seen']} instead of "
                f"{dict(expected_env)}: the measurement would not be of this preset"
            )
            return
    by_label = [{s["label"]: s for s in r["sizes"]} for r in reports]
    wrong: list[str] = []
    for size in sizes:
        per_rank = [ranks[size.label] for ranks in by_label]
        stats = summarize([p["times_us"] for p in per_rank], size.nbytes, world_size)
        correct = all(p["correct"] for p in per_rank)
        if not correct:
            wrong.append(size.label)
        entry["results"].append(
            {
                **size.as_dict(),
                "iterations": len(per_rank[0]["times_us"]),
                "correct": correct,
                "latency_us": {
                    "median": stats.median_us,
                    "p99": stats.p99_us,
                    "mean": stats.mean_us,
                    "min": stats.min_us,
                },
                "algbw_gbps": stats.algbw_gbps,
                "busbw_gbps": stats.busbw_gbps,
                "speedup_vs_default": None,
            }
        )
    if wrong:
        entry["status"] = "failed"
        entry["error"] = (
            f"all-reduce returned wrong sums at {', '.join(wrong)}: this preset corrupts data "
            "on this node and must not be used"
        )


def add_speedups(entries: Sequence[dict[str, Any]]) -> None:
    """Set speedup_vs_default per size for every measured preset (default's own is 1.0)."""
    reference = next((e for e in entries if e["name"] == REFERENCE), None)
    if reference is None or reference["status"] != "ok":
        return
    base = {r["label"]: r["latency_us"]["median"] for r in reference["results"]}
    for entry in entries:
        if entry["status"] != "ok":
            continue
        for result in entry["results"]:
            result["speedup_vs_default"] = speedup(
                base.get(result["label"]), result["latency_us"]["median"]
            )


def machine_section(
    reports: Sequence[Mapping[str, Any]], plan_info: Mapping[str, Any]
) -> dict[str, Any]:
    """Facts from the workers (what actually ran), plus what the parent decided."""
    first = reports[0] if reports else {}
    ordered = sorted(reports, key=lambda r: int(r["rank"]))
    return {
        "hostname": first.get("hostname"),
        "torch_version": first.get("torch_version", plan_info.get("torch_version")),
        "nccl_version": first.get("nccl_version"),
        "cuda_version": first.get("cuda_version"),
        "gpu_names": [r.get("device_name") for r in ordered],
        **plan_info,
    }


def _num(value: float | None, digits: int = 2) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _summary(
    sizes: Sequence[Mapping[str, Any]], measured: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Size x preset matrix of median latency and speedup: the table to read first."""
    if not measured:
        return []
    names = [e["name"] for e in measured]
    lines = [
        "Median latency µs (speedup vs default):",
        "",
        "| size | " + " | ".join(names) + " |",
        "| --- |" + " ---: |" * len(names),
    ]
    for size in sizes:
        cells = []
        for entry in measured:
            result = next(r for r in entry["results"] if r["label"] == size["label"])
            cells.append(
                f"{_num(result['latency_us']['median'], 1)} "
                f"({_ratio(result['speedup_vs_default'])})"
            )
        lines.append(f"| {size['label']} | " + " | ".join(cells) + " |")
    return [*lines, ""]


_TIMING = {
    "graph": "each all-reduce timed inside a replayed CUDA graph (as in SGLang's decode)",
    "eager": "each all-reduce timed as one eager call (host dispatch included)",
    "wall": "wall clock around each synchronous call",
}


def render_markdown(document: Mapping[str, Any]) -> str:
    machine, config = document["machine"], document["config"]
    gpus = sorted({str(n) for n in machine["gpu_names"] if n})
    lines = [
        f"## NCCL all-reduce: {machine['world_size']} x {', '.join(gpus) or '?'} "
        f"({machine['backend']}, {config['dtype']}, hidden {config['hidden_size']})",
        "",
        f"NCCL {machine.get('nccl_version') or 'n/a'}, torch {machine.get('torch_version')}, "
        f"topology {machine['topology']} ({machine['topology_note']}), "
        f"{config['iters']} iterations after {config['warmup']} warm-up, "
        f"{_TIMING.get(str(config.get('timing')), str(config.get('timing')))}.",
        "",
    ]
    if machine["backend"] != "nccl":
        lines += [
            f"**{machine['backend']} ignores NCCL_* variables: differences between presets here "
            "are noise. This run checks the tool, not the presets.**",
            "",
        ]
    measured = [e for e in document["presets"] if e["status"] == "ok"]
    lines += _summary(config["sizes"], measured)
    lines += [
        "| size | bytes | preset | median µs | p99 µs | busbw GB/s | vs default |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for size in config["sizes"]:
        for entry in measured:
            result = next(r for r in entry["results"] if r["label"] == size["label"])
            lines.append(
                f"| {size['label']} | {size['nbytes']} | {entry['name']} | "
                f"{_num(result['latency_us']['median'], 1)} | "
                f"{_num(result['latency_us']['p99'], 1)} | {_num(result['busbw_gbps'])} | "
                f"{_ratio(result['speedup_vs_default'])} |"
            )
    others = [e for e in document["presets"] if e["status"] != "ok"]
    if others:
        lines += ["", "Not measured:", ""]
        for entry in others:
            reason = entry["error"] or "; ".join(entry["notes"])
            lines.append(f"- {entry['name']}: {entry['status']}: {reason}")
    noted = [e for e in measured if e["notes"]]
    if noted:
        lines += ["", "Notes:", ""]
        for entry in noted:
            lines += [f"- {entry['name']}: {note}" for note in entry["notes"]]
    lines.append("")
    lines.append("vs default: default's median latency / this preset's (above 1 = faster).")
    return "\n".join(lines) + "\n"
