"""Run the NCCL benchmark tool's GPU path on a machine with ONE GPU: a smoke run, not a measurement.

    python benchmarks/nccl_single_gpu_smoke.py --out-dir results/

`python -m specserve.nccl` refuses one GPU (an all-reduce needs two ranks, and a one-rank NCCL
all-reduce moves no data between GPUs). This script makes the same calls the tool makes after that
check, with one rank: every built-in preset's environment reaches a real NCCL communicator, bf16
tensors of every default size are reduced on the GPU and timed with CUDA events, and the reports
go through the tool's aggregation and table, once with each --timing. It proves the GPU path works
on real hardware before a multi-GPU machine is available. With one rank NCCL moves no data, so
graph timing shows NCCL's own floor and eager timing the host's dispatch cost on top: that gap is
why the tool times inside CUDA graphs by default.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specserve.nccl.bench import SERVER_ENV, BenchConfig, run_benchmark
from specserve.nccl.machine import Plan, default_python, probe_torch
from specserve.nccl.presets import builtin_presets, select_presets
from specserve.nccl.report import render_markdown
from specserve.nccl.sizes import DEFAULT_HIDDEN_SIZE, default_sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--topology", default="nvlink", choices=["nvlink", "pcie"])
    args = parser.parse_args()
    python = default_python()
    torch_info = probe_torch(python)
    if torch_info.get("device_count", 0) < 1:
        print("no CUDA GPU visible: this smoke run needs one", file=sys.stderr)
        return 2
    node = Plan(
        device="cuda", backend="nccl", world_size=1, topology=args.topology,
        topology_note="single-GPU smoke run: one rank, no interconnect traffic",
        python=python, torch_version=torch_info["torch_version"],
    )
    selection = select_presets(builtin_presets(), None, node.topology)
    failed: list[str] = []
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for timing in ("graph", "eager"):
        config = BenchConfig(
            sizes=default_sizes(DEFAULT_HIDDEN_SIZE, "bfloat16"),
            hidden_size=DEFAULT_HIDDEN_SIZE, dtype="bfloat16", iters=args.iters, warmup=5,
            timeout_s=300.0, timing=timing, extra_env=SERVER_ENV,
        )
        document = run_benchmark(node, selection, config)
        out = args.out_dir / f"smoke-{timing}.json"
        out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        print(render_markdown(document), end="")
        ran = [e for e in document["presets"] if e["status"] not in ("refused", "skipped")]
        failed += [f"{e['name']} ({timing})" for e in ran if e["status"] != "ok"]
        failed += [] if ran else [f"nothing ran ({timing})"]
    print(f"\nfailed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
