"""What the tuning tests share: the stand-in profile saved where its model paths resolve, a
sweep's candidates, and `specserve bench` results for them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specserve.tune.state import mark, start

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "profiles" / "standin-cpu.yaml"


def save_profile(tmp_path: Path, text: str) -> Path:
    # Beside the shipped profile's directory layout, so its relative model paths resolve.
    (tmp_path / "profiles").mkdir(exist_ok=True)
    if not (tmp_path / "tests").exists():
        (tmp_path / "tests").symlink_to(ROOT / "tests")
    path = tmp_path / "profiles" / "edited.yaml"
    path.write_text(text)
    return path


def candidates() -> list[dict[str, Any]]:
    """What `specserve tune plan` gives: no speculation, points, one invalid, one that crashes."""
    return [
        {"id": "no-spec", "speculative": False, "max_running_requests": 48, "valid": True},
        {"id": "s1-k1-d2", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 2, "valid": True,
         "max_running_requests": 48},
        {"id": "s3-k1-d4", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4, "valid": True,
         "max_running_requests": 48},
        {"id": "s1-k1-d4", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 4,
         "valid": False, "reason": "chain", "max_running_requests": 48},
        {"id": "s1-k2-d1", "num_steps": 1, "eagle_topk": 2, "num_draft_tokens": 1, "valid": True,
         "max_running_requests": 48},
    ]


def level(concurrency: int, server: float | None, agg: float,
          ttft_p99: float = 0.2, itl_p99: float = 0.01) -> dict[str, Any]:
    """One level of a `specserve bench` results.json, the exporter's figure in its bucket."""
    exporter = None if server is None else {
        "accept_length": 1.8, "gen_throughput_tok_s": {str(concurrency): server}}
    return {"concurrency": concurrency, "agg_tok_s": agg, "exporter": exporter,
            "ttft_s": {"p50": ttft_p99 / 2, "p90": ttft_p99 * 0.9, "p99": ttft_p99},
            "itl_s": {"p50": itl_p99 / 2, "p90": itl_p99 * 0.9, "p99": itl_p99}}


def bench_result(run_dir: Path, ident: str, levels: list[dict[str, Any]]) -> None:
    """The candidate's results.json where the role's benchmark writes it, marked ok."""
    out = run_dir / "points" / ident
    out.mkdir(parents=True)
    (out / "results.json").write_text(json.dumps({"server": {"standin": True}, "levels": levels}))
    mark(run_dir, ident, "ok")


def sweep(run_dir: Path, figures: dict[str, dict[int, float]],
          settings: dict[str, Any] | None = None) -> None:
    """A run whose measured candidates have these server tok/s per concurrency."""
    levels = sorted({c for per in figures.values() for c in per})
    start(run_dir, candidates(), {"profile": "p.yaml", "bench_concurrency": levels,
                                  **(settings or {})})
    for ident, per in figures.items():
        bench_result(run_dir, ident, [level(c, v, v * 1.4, ttft_p99=0.1 * c, itl_p99=0.001 * c)
                                      for c, v in per.items()])
