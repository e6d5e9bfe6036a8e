"""One candidate's numbers at one concurrency, from its `specserve bench` results.json: the
server's decode-log gen throughput in the concurrency bucket as the exporter saw it (the
quantity a baseline holds), and the client's view beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specserve.buckets import concurrency_bucket


def result_path(run_dir: Path, ident: str) -> Path:
    """Where the role's benchmark of candidate `ident` writes (bench.yml's tune_bench_out)."""
    return run_dir / "points" / ident / "results.json"


def _level(result: dict[str, Any], concurrency: int) -> dict[str, Any] | None:
    return next((lv for lv in result["levels"] if lv["concurrency"] == concurrency), None)


def _p99(level: dict[str, Any], key: str) -> float | None:
    value = (level.get(key) or {}).get("p99")
    return float(value) if isinstance(value, int | float) else None


def measure(run_dir: Path, ident: str, concurrency: int) -> dict[str, Any]:
    """The point's numbers at `concurrency`; `server_gen_tok_s` None (and a note) when there is
    no server figure to rank by."""
    path = result_path(run_dir, ident)
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return {"server_gen_tok_s": None, "note": f"no benchmark result ({exc})"}
    level = _level(result, concurrency)
    if level is None:
        return {"server_gen_tok_s": None, "note": f"not benchmarked at concurrency {concurrency}"}
    exporter = level.get("exporter") or {}
    server = (exporter.get("gen_throughput_tok_s") or {}).get(concurrency_bucket(concurrency))
    return {
        "server_gen_tok_s": server,
        "agg_tok_s": level.get("agg_tok_s"),
        "accept_length": exporter.get("accept_length"),
        # The client's view of what speculation costs in latency (specserve bench's stats).
        "ttft_p99_s": _p99(level, "ttft_s"),
        "itl_p99_s": _p99(level, "itl_s"),
        "standin": bool(result["server"].get("standin")),
        # specserve bench's degenerate-output count (absent in results from before issue 31).
        "degenerate": level.get("degenerate"),
        "note": "" if server is not None else (
            level.get("exporter_error") or "the exporter saw no decode line in this bucket"),
    }
