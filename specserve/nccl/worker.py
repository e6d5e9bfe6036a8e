"""One rank of an all-reduce benchmark; the orchestrator starts one process per GPU.

Run as `python worker.py SPEC.json OUT.json` (the orchestrator goes through runpy) with torchrun's
variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) in the environment. It is a
separate process per preset because NCCL reads its environment once, at communicator creation.
Imports only torch and the stdlib: it runs under whichever interpreter has PyTorch, even one
without specserve installed.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

_DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}


# How many all-reduces one CUDA graph holds in graph timing: each timed sample is one replay's
# time divided by this, so the graph launch (a few µs) weighs a tenth on each collective.
GRAPH_BATCH = 10


class _Timer:
    """Per-all-reduce time in microseconds: `iters` samples.

    "graph" (CUDA): all-reduces captured in a CUDA graph and replayed, as SGLang runs them in
    decode. "eager" (CUDA): one torch.distributed call each; for small messages this mostly
    measures the host's dispatch (25 to 45 µs on an H100 with one rank, where graph timing
    shows about 1.5 µs). "wall" (CPU, gloo): wall clock around each synchronous call.
    """

    def __init__(self, device: torch.device, timing: str) -> None:
        self.method = timing if device.type == "cuda" else "wall"

    def time(self, tensor: torch.Tensor, iters: int) -> list[float]:
        if self.method == "graph":
            return self._graph(tensor, iters)
        if self.method == "eager":
            # Events are queued on the stream and read after one final sync, so the host never
            # stalls between iterations and each pair brackets exactly one collective.
            return self._events(lambda: dist.all_reduce(tensor), iters, 1)
        times = []
        for _ in range(iters):
            # gloo's CPU all_reduce is synchronous: wall clock around the call is its duration.
            begin = time.perf_counter_ns()
            dist.all_reduce(tensor)
            times.append((time.perf_counter_ns() - begin) / 1000.0)
        return times

    def _graph(self, tensor: torch.Tensor, iters: int) -> list[float]:
        # Capture needs the collective warmed up on a side stream first (PyTorch's graph rules).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                dist.all_reduce(tensor)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(GRAPH_BATCH):
                dist.all_reduce(tensor)
        return self._events(graph.replay, iters, GRAPH_BATCH)

    @staticmethod
    def _events(launch: Any, iters: int, per_launch: int) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for start, end in zip(starts, ends, strict=True):
            start.record()
            launch()
            end.record()
        torch.cuda.synchronize()
        return [
            s.elapsed_time(e) * 1000.0 / per_launch for s, e in zip(starts, ends, strict=True)
        ]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _check_sum(tensor: torch.Tensor, rank: int, world_size: int, device: torch.device) -> bool:
    """All-reduce rank+1 and compare with n(n+1)/2: catches a preset that corrupts data."""
    tensor.fill_(rank + 1)
    dist.all_reduce(tensor)
    _sync(device)
    expected = world_size * (world_size + 1) / 2
    return bool(torch.all(tensor == expected).item())


def _machine(device: torch.device, local_rank: int) -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "torch_version": torch.__version__,
        "device_name": "cpu",
        "nccl_version": None,
        "cuda_version": torch.version.cuda,
    }
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(local_rank)
        version = torch.cuda.nccl.version()
        # A tuple (2, 27, 3) since torch 1.x's later releases; a bare int (22703) before.
        info["nccl_version"] = (
            ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        )
    return info


def run(spec: dict[str, Any]) -> dict[str, Any]:
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if spec["device"] == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dtype = _DTYPES[spec["dtype"]]
    report: dict[str, Any] = {
        "rank": rank,
        "world_size": world_size,
        "local_rank": local_rank,
        # What NCCL will actually read: proves the preset reached this process, and nothing else.
        "nccl_env_seen": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        "backend": spec["backend"],
        "dtype": spec["dtype"],
        **_machine(device, local_rank),
    }
    kwargs: dict[str, Any] = {}
    if spec["backend"] == "nccl":
        # Binds the communicator to this GPU and creates it now, so init errors surface here.
        kwargs["device_id"] = device
    dist.init_process_group(
        backend=spec["backend"],
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=spec["collective_timeout_s"]),
        **kwargs,
    )
    try:
        timer = _Timer(device, spec.get("timing", "graph"))
        report["timing"] = timer.method
        results = []
        for size in spec["sizes"]:
            tensor = torch.empty(size["numel"], dtype=dtype, device=device)
            correct = _check_sum(tensor, rank, world_size, device)
            # Zeros keep every timed sum finite (repeated sums of ones would overflow bf16).
            tensor.zero_()
            timer.time(tensor, spec["warmup"])
            dist.barrier()
            _sync(device)
            times = timer.time(tensor, spec["iters"])
            correct = correct and _check_sum(tensor, rank, world_size, device)
            results.append({"label": size["label"], "times_us": times, "correct": correct})
            del tensor
        report["sizes"] = results
    finally:
        dist.destroy_process_group()
    return report


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)


def main(argv: list[str]) -> int:
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    try:
        report = run(spec)
    except Exception as exc:
        _write(
            out_path,
            {
                "rank": int(os.environ.get("RANK", "-1")),
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            },
        )
        print(traceback.format_exc(), file=sys.stderr)
        return 1
    _write(out_path, report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
