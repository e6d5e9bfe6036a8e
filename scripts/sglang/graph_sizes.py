"""The decode CUDA-graph batch sizes SGLang's own resolution gives an argv on a GPU of some memory.

Runs INSIDE an SGLang venv (tests/contract/test_graph_sizes.py). This host has no GPU, so the
one thing SGLang reads from the device for the decode graphs, its memory
(`sglang.srt.utils.common.get_device_memory_capacity`, imported by name into the hooks), is
replaced by the value each case names; everything else is SGLang's `prepare_server_args` and
`ServerArgs.resolve_once` on the argv as given (pass `--device cuda`).
stdin: JSON list of {"argv": [...], "gpu_memory_mib": float | null}
stdout: JSON list, one per case, in order:
    {"ok": true, "bs": [...], "max_bs": N, "max_running_requests": N | null}
    {"ok": false, "error": "..."}
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

from parse_argv import plain, prepare


def _report_memory(mib: float | None) -> None:
    """Every loaded SGLang module's `get_device_memory_capacity` answers `mib`."""

    def capacity(*_args: Any, **_kwargs: Any) -> float | None:
        return mib

    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "") or ""
        if name.startswith("sglang") and hasattr(module, "get_device_memory_capacity"):
            module.get_device_memory_capacity = capacity


def resolve(argv: list[str], mib: float | None) -> dict[str, Any]:
    server_args, failure, _ = prepare(argv)
    if failure is not None:
        return {"ok": False, "error": failure["error"]}
    _report_memory(mib)  # after the parse: it imports the hooks that hold the name
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            server_args.resolve_once()
            resolved = server_args.resolved_dict()
    except Exception as exc:  # SGLang's validation raises ValueError, AssertionError...
        return {"ok": False, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
    config = resolved["cuda_graph_config"]  # a dict in 0.5.21, a CudaGraphConfig in 0.5.23
    decode = plain(config["decode"] if isinstance(config, dict) else config.decode.__dict__)
    return {
        "ok": True,
        "bs": decode["bs"],
        "max_bs": decode["max_bs"],
        "max_running_requests": plain(resolved["max_running_requests"]),
    }


def main() -> int:
    cases = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):  # stdout is for the JSON answer alone
        results = [resolve(case["argv"], case["gpu_memory_mib"]) for case in cases]
    json.dump(results, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
