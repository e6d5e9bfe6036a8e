"""The whole benchmark: plan, select presets, run each in fresh processes, build the result."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from specserve.nccl.machine import Plan
from specserve.nccl.presets import REFERENCE, Selection
from specserve.nccl.report import (
    SCHEMA_VERSION,
    add_speedups,
    aggregate,
    expected_nccl_env,
    machine_section,
    preset_entry,
)
from specserve.nccl.runner import run_preset
from specserve.nccl.sizes import DTYPE_BYTES, MessageSize
from specserve.profile.nccl import NcclPreset

# What SGLang's server sets for itself before NCCL starts (`_set_envs_and_config` in
# sglang/srt/entrypoints/engine.py), at its defaults, so every preset, `default` included, is
# measured the way the server runs: NVLink SHARP off (`--enable-nccl-nvls` turns it on there;
# `--env NCCL_NVLS_ENABLE=1` here), cuMem off. --env overrides any of them.
SERVER_ENV: dict[str, str] = {
    "NCCL_CUMEM_ENABLE": "0",
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
    "CUDA_DEVICE_MAX_CONNECTIONS": "4",
}


@dataclass(frozen=True)
class BenchConfig:
    sizes: Sequence[MessageSize]
    hidden_size: int
    dtype: str
    iters: int
    warmup: int
    timeout_s: float
    extra_env: Mapping[str, str] = field(default_factory=dict)
    timing: str = "graph"  # on CUDA: "graph" (as SGLang's decode runs) or "eager"


def _progress(message: str) -> None:
    print(f"[nccl-bench] {message}", file=sys.stderr, flush=True)


def worker_spec(plan: Plan, config: BenchConfig) -> dict[str, Any]:
    return {
        "backend": plan.backend,
        "device": plan.device,
        "dtype": config.dtype,
        "iters": config.iters,
        "warmup": config.warmup,
        "timing": config.timing,
        "collective_timeout_s": config.timeout_s,
        "sizes": [s.as_dict() for s in config.sizes],
    }


def run_benchmark(plan: Plan, selection: Selection, config: BenchConfig) -> dict[str, Any]:
    spec = worker_spec(plan, config)
    entries: list[dict[str, Any]] = []
    all_reports: list[dict[str, Any]] = []
    for index, preset in enumerate(selection.run, start=1):
        _progress(
            f"preset {preset.name} ({index}/{len(selection.run)}): {plan.world_size} ranks, "
            f"env {preset.env or '{}'}"
        )
        entry, reports = measure_preset(
            preset, plan, config, spec, selection.notes.get(preset.name, [])
        )
        # Machine facts come from workers that really ran (GPU names, NCCL version they loaded).
        all_reports = all_reports or reports
        _progress(
            f"preset {preset.name}: {entry['status']} in {entry['elapsed_s']:.1f} s"
            + (f": {entry['error']}" if entry["error"] else "")
        )
        entries.append(entry)
    entries += [preset_entry(p, "refused", error="; ".join(m)) for p, m in selection.refused]
    entries += [preset_entry(p, "skipped", notes=[why]) for p, why in selection.skipped]
    add_speedups(entries)
    plan_info = {
        "world_size": plan.world_size,
        "device": plan.device,
        "backend": plan.backend,
        "topology": plan.topology,
        "topology_note": plan.topology_note,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        # Stripped from every worker so `default` is NCCL's default; listed so nobody wonders.
        "inherited_nccl_env_ignored": sorted(k for k in os.environ if k.startswith("NCCL_")),
        "torch_version": plan.torch_version,
        "python": plan.python,
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "specserve nccl-bench",
        "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine_section(all_reports, plan_info),
        "config": {
            "hidden_size": config.hidden_size,
            "dtype": config.dtype,
            "dtype_bytes": DTYPE_BYTES[config.dtype],
            "iters": config.iters,
            "warmup": config.warmup,
            # What the workers did: "wall" on CPU whatever was asked.
            "timing": (all_reports[0].get("timing") if all_reports else None) or config.timing,
            "timeout_s": config.timeout_s,
            "extra_env": dict(config.extra_env),
            "reference": REFERENCE,
            "sizes": [s.as_dict() for s in config.sizes],
        },
        "presets": entries,
    }


def measure_preset(
    preset: NcclPreset,
    plan: Plan,
    config: BenchConfig,
    spec: Mapping[str, Any],
    notes: Sequence[str],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The preset's result entry, and the ranks' raw reports (empty when no rank reported)."""
    started = time.monotonic()
    run = run_preset(
        plan.python, dict(spec), preset.env, config.extra_env, plan.world_size, config.timeout_s
    )
    entry = preset_entry(preset, run.status, error=run.error, notes=notes)
    if run.status == "ok":
        try:
            aggregate(
                entry,
                run.reports,
                config.sizes,
                plan.world_size,
                expected_nccl_env(preset.env, config.extra_env),
            )
        except (KeyError, TypeError, ValueError) as exc:
            entry["status"] = "failed"
            entry["error"] = f"rank reports could not be aggregated: {type(exc).__name__}: {exc}"
    entry["elapsed_s"] = round(time.monotonic() - started, 3)
    return entry, run.reports
